"""`python -m harness ARGS` without paying for the imports each time: a fork server.

A `harness` process spends most of a short command importing (pydantic's models,
psycopg, pandas: 0.7-1.3 CPU-s here), and make test starts about a hundred of them
(harness processes took 143 of its parallel part's 440 CPU-s, most of it importing, on
2026-12-04). This server, one per pytest process, imports the harness once; each
command is a fork of it, which runs `harness.cli.main` as `python -m harness` would, in a
process of its own: its own pid, exit code, stdout and stderr (files of the caller's),
working folder and environment, stdin /dev/null, and the interpreter's exit as the
program sees it (non-daemon threads waited for, atexit handlers, a traceback on stderr
for an exception that escapes, the exit status Python gives it). The caller waits for it
as `subprocess.run` does, and kills it at its timeout.

What a fork leaves out is the interpreter's teardown of its modules, which here cost more
than most commands: it touches every object the server imported, and each page it writes
is copied from the server's (0.5-0.6 CPU-s per command on 2026-12-04, against 0.13-0.16
for `harness worker --help` itself). The server's objects are frozen out of the garbage
collector's walks (gc.freeze) for the same reason.

Run as `python -m tests.forked_cli FD`: FD is its end of a SOCK_SEQPACKET pair. A
request is a packet of JSON (argv, cwd, env) carrying the two descriptors for stdout and
stderr; the server answers the child's pid, then its wait status, a packet each.
tests/unit/test_forked_cli.py holds a fork's answers to a real process's.
TQB_FORKED_CLI=0 in the environment of pytest runs real processes instead.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from harness.commands import load_every_command

ROOT = Path(__file__).resolve().parent.parent
_MAX_REQUEST = 1 << 20


def _serve(channel: socket.socket) -> tuple[list[str], str, dict[str, str]] | None:
    """Answer requests until the caller closes its end; in a fork, the request it is to
    run (returned in the child only)."""
    while True:
        message, fds, _, _ = socket.recv_fds(channel, _MAX_REQUEST, 2)
        if not message:
            return None
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            channel.close()
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            for fd in fds:
                os.close(fd)
            return request["argv"], request["cwd"], request["env"]
        for fd in fds:
            os.close(fd)
        channel.send(str(pid).encode())
        _, status = os.waitpid(pid, 0)
        channel.send(str(status).encode())


def _child(argv: list[str], cwd: str, env: dict[str, str]) -> NoReturn:
    """The harness as `python -m harness ARGV` runs it, in this fork."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own, never closed
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # TMPDIR as this command's environment says
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = [str(ROOT / "harness" / "__main__.py"), *argv]
    from harness.cli import main

    end(main)


def end(program: Callable[[], object]) -> NoReturn:
    """Run `program` as the main module of a process and end the process as CPython's
    exit does, short of tearing down the modules: after its non-daemon threads end, its
    atexit handlers run, its unreachable objects are finalized and its stdout and stderr
    are flushed, with the status Python gives (0; SystemExit's code, or 1 with its text
    on stderr; 1 with a traceback for another exception; 120 if the flush fails), or
    killed by SIGINT for a KeyboardInterrupt that escaped, as Python kills itself."""
    status: int | signal.Signals = 0
    try:
        program()
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            status = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            status = 1
    except BaseException as error:
        sys.excepthook(type(error), error, error.__traceback__)
        status = signal.SIGINT if isinstance(error, KeyboardInterrupt) else 1
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120
    if isinstance(status, signal.Signals):
        signal.signal(status, signal.SIG_DFL)
        os.kill(os.getpid(), status)
    os._exit(status)


def serve(fd: int) -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no thread to lose in a fork
    load_every_command()  # loaded once: a fork gets it for nothing
    gc.freeze()  # what the server holds is no fork's garbage: never walked again
    channel = socket.socket(fileno=fd)
    try:
        request = _serve(channel)
    except KeyboardInterrupt:  # a Ctrl-C in the terminal reaches the whole group
        return
    if request is not None:
        _child(*request)


class ForkedCli:
    """The caller's side: one server, started on first use, for this process. Requests
    and replies are packets of a SOCK_SEQPACKET pair: each read is one whole message."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channel: socket.socket | None = None
        self._server: subprocess.Popen[bytes] | None = None

    def _started(self) -> socket.socket:
        if self._channel is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self._server = subprocess.Popen(
                [sys.executable, "-m", "tests.forked_cli", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # a pytest-xdist worker's stdout is its channel
            )
            theirs.close()
            self._channel = ours
        return self._channel

    def run(
        self, argv: list[str], timeout: float, cwd: Path | None, env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        with self._lock, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            channel = self._started()
            request = {"argv": argv, "cwd": str(cwd or Path.cwd()), "env": env}
            socket.send_fds(channel, [json.dumps(request).encode()], [out.fileno(), err.fileno()])
            pid = int(channel.recv(64))
            status = self._waited(channel, pid, timeout)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(), err.read().decode()
        if status is None:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess(
            ["harness", *argv], os.waitstatus_to_exitcode(status), stdout, stderr
        )

    @staticmethod
    def _waited(channel: socket.socket, pid: int, timeout: float) -> int | None:
        """The child's wait status; None if it outlived `timeout` (it is killed)."""
        channel.settimeout(timeout)
        try:
            return int(channel.recv(64))
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            channel.settimeout(None)
            channel.recv(64)  # its status, now that it is gone
            return None
        finally:
            channel.settimeout(None)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._server is not None:
            self._server.wait(timeout=30)
            self._server = None


if __name__ == "__main__":
    serve(int(sys.argv[1]))
