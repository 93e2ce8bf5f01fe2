"""Server programs the harness starts (postgres, pgbouncer): spawned as their user in a
session of their own, dying with the harness, waited for, and stopped step by step."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from harness.errors import ProviderUnavailable
from harness.server.connections import connect
from harness.server.run_user import program_args


def spawn_server_process(
    command: list[str], log_path: Path, cwd: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """A server program (postgres, pgbouncer) as the run's user, in its own session, its
    output appended to `log_path`, dying with the harness; `env`: its whole environment."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=lambda: signal_on_parent_death("SIGQUIT"),
            **program_args(),
        )


def signal_on_parent_death(signal_name: str) -> None:
    """In a child process: if the harness is killed outright, get that signal at once.

    Linux's prctl(PR_SET_PDEATHSIG), from the C library the process already has loaded
    (glibc or musl); other systems have no such signal, and there the harness's own stop
    is the only one. In a server, it runs after the switch to the unprivileged user,
    which would otherwise clear it.
    """
    if sys.platform != "linux":
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, getattr(signal, signal_name))


def wait_until_accepting(
    program: str,
    dsn: str,
    process: subprocess.Popen[bytes],
    logs: list[Path],
    timeout_s: float,
    **options: Any,
) -> None:
    """Until a server program we started takes connections; its log's last line if it
    exits or does not answer in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ProviderUnavailable(f"{program} exited at start: {last_log_line(logs)}")
        try:
            with connect(dsn, connect_timeout=2, **options):
                return
        except psycopg.OperationalError:
            time.sleep(0.05)
    raise ProviderUnavailable(
        f"{program} did not accept connections in {timeout_s:g} s: {last_log_line(logs)}"
    )


def last_log_line(logs: list[Path]) -> str:
    """The last line of the first of `logs` that has one."""
    found = False
    for log in logs:
        try:
            lines = log.read_text(errors="replace").strip().splitlines()
        except OSError:
            continue
        found = True
        if lines:
            return lines[-1]
    return "empty log" if found else "no log"


def stop_escalating(
    process: subprocess.Popen[bytes], steps: list[tuple[signal.Signals, float]]
) -> None:
    """Each signal in turn, waiting its grace in seconds, until the process has ended."""
    for sig, grace in steps:
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)


# What a server's log says as its start recovers from a crash: it was interrupted, then
# the WAL replayed from the last checkpoint, or nothing there to replay.
RECOVERY_SAID = (
    "database system was interrupted",
    "database system was not properly shut down",
    "redo starts at",
    "redo done at",
    "redo is not required",
)


def crash_recovery(log: str) -> list[str]:
    """The messages of a server's log (read from a crash on) that say its start recovered
    from the crash, each without the time and process id before its `LOG:`."""
    messages = (line.partition("LOG:")[2].strip() for line in log.splitlines())
    return [message for message in messages if message.startswith(RECOVERY_SAID)]


def free_port(host: str) -> int:
    """A TCP port nothing listens on now (the kernel's choice)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
