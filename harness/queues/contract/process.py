"""One adapter process: started without a shell in a process group of its own, its
config (password included) written as the first line on its stdin, never on its command
line; commands in, validated events out, its stderr kept aside for when it fails; and
at the end nothing of it left running.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import IO, Any, TypeVar

from harness.queues.contract import protocol, runtime
from harness.queues.contract.manifest import Adapter
from harness.queues.contract.protocol import (
    AdapterExited,
    AdapterFailed,
    Config,
    Event,
    Plan,
    ProtocolError,
)
from harness.server.processes import signal_on_parent_death
from harness.server.reachable_python import launch

STOP_BOUND_S = 30.0  # from `stop` (or a closed stdin) to its exit, at most
E = TypeVar("E")
PlanSink = Callable[[str], None]


def _set_death_signal() -> None:
    signal_on_parent_death("SIGKILL")  # the adapter dies with the harness's process (Linux)


class AdapterProcess:
    """An adapter's process for one role. `events()` yields what it says, validated; a
    `plan` goes to `plans` (a capture's) and is not yielded; an `error` raises."""

    def __init__(self, adapter: Adapter, config: Config, plans: PlanSink | None = None) -> None:
        self.adapter, self.plans = adapter, plans
        self.secret = config.connection.password  # never shown, whatever the adapter prints
        self.lines = 0
        self.stopped_in_time: bool | None = None
        line = config.line()  # before the process: a bad config starts nothing
        # Kept open for the process's life, read when it fails: no `with` fits that.
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        folder = runtime.run_dir(adapter)
        # Never root: the run's user (harness/server/run_user.py), a minimal environment.
        argv, as_user = launch(f"adapter {adapter.name}", runtime.argv(adapter), folder)
        self.process = subprocess.Popen(
            argv,
            cwd=folder,
            **as_user,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            start_new_session=True,  # its own process group: whatever it forks ends with it
            preexec_fn=_set_death_signal,
        )
        self.send(line)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line.encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            raise AdapterExited(
                f"adapter {self.adapter.name} exited: {self.stderr_tail()}"
            ) from None

    def next_event(self) -> Event:
        """The next event but plans; an `error` event raises AdapterFailed."""
        while True:
            event = self._read()
            if isinstance(event, Plan):
                if self.plans is not None:
                    self.plans(event.message)
                continue
            if isinstance(event, protocol.Error):
                said = (
                    event.message.replace(self.secret, "********") if self.secret else event.message
                )
                raise AdapterFailed(f"adapter {self.adapter.name} failed: {said}")
            return event

    def _read(self) -> Event:
        assert self.process.stdout is not None
        line = self.process.stdout.readline(protocol.MAX_LINE_BYTES + 1)
        if not line:
            raise AdapterExited(f"adapter {self.adapter.name} exited: {self.stderr_tail()}")
        self.lines += 1
        return protocol.parse_event(line, self.lines, self.adapter.name)

    def expect(self, kind: type[E]) -> E:
        event = self.next_event()
        if not isinstance(event, kind):
            name = kind.__name__
            raise ProtocolError(
                f"adapter {self.adapter.name}: protocol: stdout line {self.lines} is "
                f"'{event.event}' where {name.lower()} was expected"  # type: ignore[union-attr]
            )
        return event

    def stderr_tail(self) -> str:
        """Its last line on stderr, or its exit code (once it has exited)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        last = self.said_last()
        return f"exit code {self.process.returncode}" if last is None else last

    def said_last(self) -> str | None:
        """Its last line on stderr so far (its password masked), if it wrote any. Read
        at offsets: the file's position is the one the adapter writes at."""
        fd = self.stderr.fileno()
        last = last_line(os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace"))
        if last is None:
            return None
        return last.replace(self.secret, "********") if self.secret else last

    def kill(self) -> None:
        """SIGKILL to its whole process group: it and whatever it started, told nothing."""
        _kill_group(self.process.pid)
        self.process.wait()

    def close(self, bound_s: float = STOP_BOUND_S) -> None:
        """Its stdin closed (a stop, for an adapter that did not get one), its exit awaited
        within `bound_s`, then its whole process group killed: nothing it started is left."""
        with contextlib.suppress(OSError, ValueError):
            self.process.stdin.close()  # type: ignore[union-attr]
        try:
            self.process.wait(timeout=bound_s)
            self.stopped_in_time = True
        except subprocess.TimeoutExpired:
            self.stopped_in_time = False
        _kill_group(self.process.pid)
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.stderr.close()


# After an uncaught error Node prints the error, its stack frames, a blank line and its
# version: the error is the line worth quoting.
_AFTER_THE_ERROR = re.compile(r"^(\s*Node\.js v\d+\.\d+\.\d+|\s+at .*|\s*)$")


def last_line(text: str) -> str | None:
    """What a program's stderr said last, at most 300 characters: its last line, but
    for the stack frames, the error's own fields (`... { errno: -32, code: 'EPIPE' }`)
    and the version Node prints after an uncaught error."""
    lines = text.strip().splitlines()
    while True:
        while len(lines) > 1 and _AFTER_THE_ERROR.match(lines[-1]):
            lines.pop()
        opening = _fields_opened(lines) if lines and lines[-1].strip() == "}" else None
        if opening is None:
            return lines[-1][:300] if lines else None
        lines = [*lines[:opening], lines[opening].rstrip()[:-1].rstrip()]


def _fields_opened(lines: list[str]) -> int | None:
    """The line whose trailing `{` opens the block of fields a closing `}` ends."""
    return next((i for i in range(len(lines) - 2, -1, -1) if lines[i].rstrip().endswith("{")), None)


def _kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def run_role(
    adapter: Adapter,
    config: Config,
    ending: tuple[type[Any], ...],
    before: tuple[type[Any], ...] = (),
) -> tuple[list[Any], Any]:
    """A one-shot role (install, versions, ledger): the events of the types `before`, then
    its last, of one of the types `ending`; it must then exit 0. Any other event is a
    protocol error."""
    process = AdapterProcess(adapter, config)
    began = time.monotonic()
    try:
        seen = []
        while not isinstance(event := process.next_event(), ending):
            if not isinstance(event, before):
                raise ProtocolError(
                    f"adapter {adapter.name}: protocol: stdout line {process.lines}: "
                    f"'{event.event}' in its {config.role} role"  # type: ignore[union-attr]
                )
            seen.append(event)
    finally:
        process.close()
    if process.process.returncode != 0:
        raise AdapterFailed(
            f"adapter {adapter.name}'s {config.role} exited with {process.process.returncode} "
            f"after {time.monotonic() - began:.1f} s"
        )
    return seen, event
