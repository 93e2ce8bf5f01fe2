"""The harness's own Python, where the run's user can run it: for a program of Python
(an adapter whose command is the harness's interpreter) in a root run.

A virtual environment made from an interpreter under a private home (pyenv's, in
/root) is out of that user's reach, though the environment's packages may not be. As
the PostgreSQL build is (harness/server/embedded.py), the interpreter is then copied
once into the shared cache (harness/server/run_user.py): its program, its libpython and
its standard library, without site-packages, tests and the static library. Beside it, a
virtual environment of the copy's (its pyvenv.cfg, its python) whose site-packages is
the harness's own: the same packages, the harness's included. Where those packages are
out of reach too, nothing is copied: the program is refused in one line.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from harness.server.run_user import (
    PopenArgs,
    environment,
    out_of_reach,
    program_args,
    program_popen,
    refuse_out_of_reach,
    run_user,
    shared_cache,
)

_LEFT_OUT = ("site-packages", "test", "idlelib", "__pycache__")  # and config-* (libpython.a)
_CHECK_TIMEOUT_S = 30


def launch(what: str, argv: list[str], folder: Path) -> tuple[list[str], PopenArgs]:
    """A library's program as the run's user runs it from `folder`: its command (the
    harness's interpreter swapped for its reachable copy where need be) and its
    subprocess arguments (the user, a minimal environment); one line, naming what to do,
    where that user cannot reach it."""
    program, extra = for_run_user(Path(argv[0]))
    refuse_out_of_reach(what, program, folder)
    popen = program_popen()
    popen["env"] = {**popen.get("env", {}), **extra}
    return [str(program), *argv[1:]], popen


@functools.cache
def for_run_user(program: Path) -> tuple[Path, dict[str, str]]:
    """The program as the run's user runs it, and what its environment needs besides:
    `program` itself, unless it is the harness's interpreter out of that user's reach,
    then its copy's (with LD_LIBRARY_PATH for its libpython)."""
    if run_user() is None or out_of_reach(program, True) is None or not _ours(program):
        return program, {}
    if out_of_reach(_site_packages(), False) is not None:
        return program, {}  # refused by the caller, naming the program
    base = _copied_base()
    venv = _venv_of(base)
    extra = {"LD_LIBRARY_PATH": str(base / "lib")}
    return (venv / "bin" / "python3", extra) if _runs(venv, extra) else (program, {})


def _ours(program: Path) -> bool:
    """Is `program` this interpreter (its venv's python, or the one it was made from)?"""
    ours = {Path(sys.executable).resolve(), Path(getattr(sys, "_base_executable", "")).resolve()}
    return program.resolve() in ours


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _key() -> str:
    real = Path(sys.executable).resolve()
    info = real.stat()
    text = f"{real}\0{sys.version}\0{info.st_size}\0{info.st_mtime_ns}\0{sys.base_prefix}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _copied_base() -> Path:
    """The base interpreter's copy, made once per interpreter."""
    folder = shared_cache() / "python"
    folder.mkdir(mode=0o755, exist_ok=True)
    base = folder / f"base-{_key()}"
    if not base.is_dir():
        _publish(_staged_base(folder), base)
    return base


def _staged_base(folder: Path) -> Path:
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=folder))
    prefix = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (staging / "bin").mkdir()
    shutil.copy2(Path(sys.executable).resolve(), staging / "bin" / version)
    shutil.copytree(prefix / "lib" / version, staging / "lib" / version, ignore=_left_out)
    for library in (prefix / "lib").glob("libpython*.so*"):
        shutil.copy2(library, staging / "lib" / library.name, follow_symlinks=False)
    staging.chmod(0o755)
    return staging


def _left_out(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name in _LEFT_OUT or name.startswith("config-")]


def _venv_of(base: Path) -> Path:
    """A virtual environment of the copied interpreter whose packages are ours."""
    site = _site_packages()
    name = hashlib.sha256(f"{base}\0{site}".encode()).hexdigest()[:16]
    venv = base.parent / f"venv-{name}"
    if venv.is_dir():
        return venv
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=base.parent))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (staging / "bin").mkdir()
    (staging / "bin" / "python3").symlink_to(base / "bin" / version)
    (staging / "lib" / version).mkdir(parents=True)
    (staging / "lib" / version / "site-packages").symlink_to(site)
    (staging / "pyvenv.cfg").write_text(
        f"home = {base / 'bin'}\ninclude-system-site-packages = false\n"
        f"version = {sys.version.split()[0]}\n"
    )
    staging.chmod(0o755)
    _publish(staging, venv)
    return venv


def _publish(staging: Path, target: Path) -> None:
    """In its place at once; another harness's, published first, stays."""
    try:
        staging.rename(target)
    except OSError as error:
        if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
        shutil.rmtree(staging, ignore_errors=True)


def _runs(venv: Path, extra: dict[str, str]) -> bool:
    """Does the copy run, as the run's user, with the harness's packages?"""
    try:
        done = subprocess.run(
            [str(venv / "bin" / "python3"), "-c", "import harness"],
            capture_output=True,
            timeout=_CHECK_TIMEOUT_S,
            check=False,
            cwd=os.sep,
            env=environment(extra),
            **program_args(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
