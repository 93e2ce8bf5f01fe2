"""Where and how an adapter runs: its runtime checked (one line naming what to install),
its folder prepared once in the harness's cache where its manifest asks (`npm ci`), and
its command resolved without a shell: a bare program on PATH, anything else a path
inside the folder it runs from.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from harness.errors import HarnessError
from harness.queues.contract.manifest import Adapter

REQUIREMENT_TIMEOUT_S = 60
PREPARE_TIMEOUT_S = 900


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tenant-queue-bench"


_CHECKED: dict[tuple[Path, str], str | None] = {}


def missing(adapter: Adapter) -> str | None:
    """What the adapter needs and this machine lacks, in one line; None if nothing.
    Checked once per adapter and process."""
    key = (adapter.folder, adapter.digest)
    if key not in _CHECKED:
        _CHECKED[key] = _first_missing(adapter)
    return _CHECKED[key]


def _first_missing(adapter: Adapter) -> str | None:
    for requirement in adapter.manifest.requires:
        argv = resolve(requirement.command, adapter.folder)
        if argv is None or not _succeeds(argv, adapter.folder):
            shown = " ".join(requirement.command)
            return f"adapter {adapter.name}: `{shown}` fails here; {requirement.install}"
    return None


def require(adapter: Adapter) -> None:
    """HarnessError (one line, exit 2) where its runtime is missing."""
    problem = missing(adapter)
    if problem is not None:
        raise HarnessError(problem)


def _succeeds(argv: list[str], folder: Path) -> bool:
    try:
        done = subprocess.run(
            argv,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=REQUIREMENT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def resolve(argv: list[str], folder: Path) -> list[str] | None:
    """The command as it is executed: a bare program found on PATH, a path taken inside
    `folder`; None if the program is not there."""
    program = argv[0]
    if "/" not in program:
        found = shutil.which(program)
        return None if found is None else [found, *argv[1:]]
    inside = (folder / program).resolve()
    if not inside.is_relative_to(folder.resolve()) or not inside.is_file():
        return None
    return [str(inside), *argv[1:]]


def run_dir(adapter: Adapter) -> Path:
    """The folder the adapter runs from: its own, or its prepared copy in the cache."""
    if adapter.manifest.prepare is None:
        return adapter.folder
    return _prepared(adapter.folder, adapter.digest, tuple(adapter.manifest.prepare.command))


@cache
def _prepared(folder: Path, digest: str, command: tuple[str, ...]) -> Path:
    target = cache_root() / "adapters" / f"{folder.name}-{digest[:16]}"
    if (target / ".prepared").exists():
        return target
    argv = resolve(list(command), folder)
    if argv is None:
        raise HarnessError(f"{folder}: prepare: `{command[0]}` is not installed")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=target.parent))
    shutil.copytree(folder, staging, dirs_exist_ok=True, ignore=_not_copied)
    done = subprocess.run(
        argv,
        cwd=staging,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PREPARE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"{folder}: prepare (`{' '.join(command)}`) failed: {last}")
    (staging / ".prepared").touch()
    with contextlib.suppress(OSError):  # another process may have prepared it meanwhile
        staging.rename(target)
    shutil.rmtree(staging, ignore_errors=True)
    return target


def _not_copied(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name in ("node_modules", "__pycache__")]


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
