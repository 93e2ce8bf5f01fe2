"""Where and how an adapter runs: its runtime checked (one line naming what to install),
its folder prepared once in the harness's cache where its manifest asks (`npm ci`), and
its command resolved without a shell: a bare program on PATH, anything else a path
inside the folder it runs from.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.queues.base import Missing, Say
from harness.queues.contract.manifest import HARNESS_PYTHON, Adapter, Requirement
from harness.server import sealed
from harness.server.reachable_python import launch
from harness.server.run_user import shared_cache

REQUIREMENT_TIMEOUT_S = 60
PREPARE_TIMEOUT_S = 900


_CHECKED: dict[tuple[Path, str], str | None] = {}


def missing(adapter: Adapter) -> str | None:
    """What the adapter needs and this machine lacks, in one line; None if nothing.
    Checked once per adapter and process."""
    key = (adapter.folder, adapter.digest)
    if key not in _CHECKED:
        _CHECKED[key] = _first_missing(adapter)
    return _CHECKED[key]


def _first_missing(adapter: Adapter) -> str | None:
    absent = absent_runtime(adapter)
    return None if absent is None else f"adapter {adapter.name}: {absent.what}; {absent.install}"


def absent_runtime(adapter: Adapter) -> Missing | None:
    """The first of the manifest's requirements this machine fails, or None."""
    for requirement in adapter.manifest.requires:
        what = _unmet(requirement, adapter.folder)
        if what is not None:
            return Missing(what, requirement.install)
    return None


def _unmet(requirement: Requirement, folder: Path) -> str | None:
    """What of the requirement this machine fails, or None."""
    if requirement.python_modules is not None:
        absent = [name for name in requirement.python_modules if not _importable(name)]
        return ", ".join(absent) if absent else None
    assert requirement.command is not None  # the manifest has one or the other
    argv = resolve(requirement.command, folder)
    if argv is None or not _succeeds(argv, folder):
        return f"`{' '.join(requirement.command)}` fails here"
    return None


def _importable(module: str) -> bool:
    """Would the harness's interpreter find it (looked up, not imported)?"""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class AdapterRuntime:
    """An adapter's runtime as a queue's requirement (`requires` of its catalog entries):
    checked, and its folder prepared (`npm ci`, showing how it goes), before any server
    starts."""

    adapter: Adapter

    def missing(self) -> Missing | None:
        return absent_runtime(self.adapter)

    def prepare(self, say: Say) -> None:
        run_dir(self.adapter, say)


def require(adapter: Adapter) -> None:
    """HarnessError (one line, exit 2) where its runtime is missing."""
    problem = missing(adapter)
    if problem is not None:
        raise HarnessError(problem)


def _succeeds(argv: list[str], folder: Path) -> bool:
    try:
        command, as_user = launch("requirement", argv, folder)  # run as the adapter runs
        done = subprocess.run(
            command,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=REQUIREMENT_TIMEOUT_S,
            check=False,
            **as_user,
        )
    except (OSError, subprocess.TimeoutExpired, HarnessError):
        return False
    return done.returncode == 0


def resolve(argv: list[str], folder: Path) -> list[str] | None:
    """The command as it is executed: the harness's own interpreter, a bare program found
    on PATH, a path taken inside `folder`; None if the program is not there."""
    program = argv[0]
    if program == HARNESS_PYTHON:
        return [sys.executable, *argv[1:]]
    if "/" not in program:
        found = shutil.which(program)
        return None if found is None else [found, *argv[1:]]
    inside = (folder / program).resolve()
    if not inside.is_relative_to(folder.resolve()) or not inside.is_file():
        return None
    return [str(inside), *argv[1:]]


def run_dir(adapter: Adapter, say: Say | None = None) -> Path:
    """The folder the adapter runs from: its own, or its prepared copy in the cache."""
    if adapter.manifest.prepare is None:
        return adapter.folder
    command = tuple(adapter.manifest.prepare.command)
    return _prepared(adapter.folder, adapter.digest, command, say or (lambda line: None))


def _prepared(folder: Path, digest: str, command: tuple[str, ...], say: Say) -> Path:
    target = shared_cache() / "prepared" / f"{folder.name}-{digest[:16]}"
    what = f"the prepared copy of adapter folder {folder.name}"
    if sealed.is_sealed(target):
        sealed.check(target, what)  # what npm ci wrote, every file of it, unchanged
        return target
    argv = resolve(list(command), folder)
    if argv is None:
        raise HarnessError(f"{folder}: prepare: `{command[0]}` is not installed")
    say(f"Preparing adapter folder {folder.name} ({' '.join(command)}; first use only) in {target}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=target.parent))
    shutil.copytree(folder, staging, dirs_exist_ok=True, ignore=_not_copied)
    code, last = _run_showing_progress(argv, staging, command[0], say)
    if code != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise HarnessError(f"{folder}: prepare (`{' '.join(command)}`) failed: {last}")
    sealed.seal(staging)
    staging.chmod(0o755)  # for the run's user (the shared cache keeps others out)
    with contextlib.suppress(OSError):  # another process may have prepared it meanwhile
        staging.rename(target)
    shutil.rmtree(staging, ignore_errors=True)
    sealed.check(target, what)
    return target


def _not_copied(directory: str, names: list[str]) -> list[str]:
    """Dotfiles are not in the folder's digest (manifest.py): not copied either, so that
    no undigested file (an .npmrc naming another registry) changes what is prepared."""
    return [n for n in names if n in ("node_modules", "__pycache__") or n.startswith(".")]


def argv(adapter: Adapter) -> list[str]:
    """Its command, resolved in the folder it runs from; HarnessError if it is not there."""
    folder = run_dir(adapter)
    resolved = resolve(adapter.manifest.command, folder)
    if resolved is None:
        raise HarnessError(
            f"adapter {adapter.name}: its command's program `{adapter.manifest.command[0]}` "
            f"is not found (PATH, or inside {folder})"
        )
    return resolved


PROGRESS_S = 2.0  # how often a preparation's progress is shown


def _run_showing_progress(argv: list[str], folder: Path, name: str, say: Say) -> tuple[int, str]:
    """The preparation's command, its output read as it comes and its progress said every
    PROGRESS_S (npm shows none where its output is no terminal): lines of output so far,
    seconds. Its exit code and last line; killed after PREPARE_TIMEOUT_S, output or not."""
    began = shown = time.monotonic()
    lines, last = 0, "no output"
    with subprocess.Popen(
        argv,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        deadline = threading.Timer(PREPARE_TIMEOUT_S, process.kill)
        deadline.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines += 1
                last = line.strip() or last
                if time.monotonic() - shown >= PROGRESS_S:
                    shown = time.monotonic()
                    say(f"{name}: {lines} lines of output, {shown - began:.0f} s")
        finally:
            deadline.cancel()
    if time.monotonic() - began >= PREPARE_TIMEOUT_S:
        return 1, f"timed out after {PREPARE_TIMEOUT_S} s"
    say(f"{name}: done in {time.monotonic() - began:.0f} s ({last})")
    return process.returncode, last
