"""harness_cli's fork server (tests/forked_cli.py) answers as `python -m harness` does:
the same exit code, stdout and stderr, in the caller's folder and environment; a command
that outlives its timeout is killed, as subprocess.run kills it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FORKED, ROOT, SCENARIOS


def real(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["validate", "noisy.yaml"],  # relative to the caller's folder
        ["validate", "missing.yaml"],  # exit 2, one line on stderr
        ["run", "noisy.yaml", "--pg", "nope"],  # typer's usage error: exit 2
    ],
)
def test_a_fork_answers_as_a_process_of_its_own(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "noisy.yaml").write_text((SCENARIOS / "noisy-neighbour.yaml").read_text())
    env = {"NO_COLOR": "1", "COLUMNS": "100"}
    forked = FORKED.run(args, 60, tmp_path, {**os.environ, **env})
    expected = real(*args, cwd=tmp_path, env=env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        expected.returncode,
        expected.stdout,
        expected.stderr,
    )


def test_a_fork_that_outlives_its_timeout_is_killed(tmp_path: Path) -> None:
    """A server socket that takes the connection and never answers: the command would
    wait out libpq's connect_timeout (60 s); the caller's timeout kills it well before,
    and the next command runs as ever."""
    with socket.socket(socket.AF_UNIX) as silent:
        silent.bind(str(tmp_path / ".s.PGSQL.5432"))
        silent.listen()
        dsn = f"host={tmp_path} port=5432 connect_timeout=60"
        command = ["run", str(SCENARIOS / "noisy-neighbour.yaml"), "--dsn", dsn]
        began = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            FORKED.run(command, 1.0, tmp_path, dict(os.environ))
        assert time.monotonic() - began < 30  # killed, not waited for
    after = FORKED.run(["--version"], 60, tmp_path, dict(os.environ))
    assert after.returncode == 0 and after.stdout.startswith("harness (tenant-queue-bench)")


ENDINGS = {
    "returns": "print('out')",
    "exit code": "import sys; print('out'); sys.exit(3)",
    "exit text": "import sys; sys.exit('bye')",
    "exception": "print('out'); raise ValueError('no')",
    "ctrl-c": "raise KeyboardInterrupt",
    "atexit": "import atexit; atexit.register(print, 'late'); print('early', end='')",
    "thread": (
        "import threading, time\n"
        "def late():\n    time.sleep(0.3)\n    print('from the thread')\n"
        "threading.Thread(target=late).start()"
    ),
    "cycle": (
        "class Cycle:\n    def __del__(self):\n        print('finalized')\n"
        "def make():\n    c = Cycle(); c.me = c\nmake()"
    ),
    "buffered": "import sys; sys.stdout.write('no newline')",
}


@pytest.mark.parametrize("source", ENDINGS.values(), ids=ENDINGS.keys())
def test_a_fork_ends_as_the_interpreter_ends_a_process(source: str) -> None:
    """A fork skips the interpreter's teardown of its modules (forked_cli.end); what a
    program can see of its end is Python's: the status, the output its threads, atexit
    handlers and finalizers write, the last line of a traceback."""
    ended = f"from tests.forked_cli import end\nend(lambda: exec({source!r}, {{}}))"

    def ran(code: str) -> tuple[int, str, str]:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        return done.returncode, done.stdout, done.stderr.strip().splitlines()[-1:]

    assert ran(ended) == ran(source)
