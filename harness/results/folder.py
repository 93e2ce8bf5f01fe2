"""Run folders: write-once, atomic files under results/<scenario>/<UTC time>-<short id>/.

Which files a run folder holds, raw or derived, is harness/results/contract.py (and
docs/results-format.md); run.json's format is harness/results/document.py; jobs.csv's
columns are harness/results/jobs.py.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.results.jobs import jobs_csv

_UMASK = os.umask(0o022)
os.umask(_UMASK)


@dataclass(frozen=True)
class RunFolder:
    path: Path
    run_id: str

    @classmethod
    def create(cls, root: Path, scenario: str) -> RunFolder:
        """A new folder for a run; an existing one is never reused or overwritten."""
        now = datetime.now(UTC)
        run_id = f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
        path = root / scenario / run_id
        path.mkdir(parents=True, exist_ok=False)
        return cls(path=path, run_id=run_id)

    def write(self, name: str, data: str | bytes, *, replace: bool = False) -> Path:
        """Write a file atomically; refuse to overwrite unless `replace` (run.json)."""
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        return write_once(
            target, data.encode("utf-8") if isinstance(data, str) else data, replace=replace
        )

    def write_jobs(self, records: list[dict[str, Any]]) -> Path:
        """jobs.csv as the database gave it: ISO 8601 timestamps with microseconds."""
        return self.write("jobs.csv", jobs_csv(records, self.run_id))


def write_once(target: Path, data: bytes, *, replace: bool = False) -> Path:
    """Written atomically; refused if `target` exists, unless the writer says it replaces
    it (run.json as the run goes, derived files at every render, a new baseline)."""
    if target.exists() and not replace:
        raise FileExistsError(f"{target} exists; results are never overwritten")
    atomic_write(target, data)
    return target


def atomic_write(target: Path, data: bytes) -> None:
    """Temporary file in the same folder, fsync, rename: never a half-written file."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        os.fchmod(handle, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are for sharing
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        Path(temporary).replace(target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(temporary).unlink()
        raise


def check_results_dir(root: Path, folders: list[str], *, latest: bool = False) -> None:
    """Before any server starts: the run folders `folders` can be made under `root` (each
    path's nearest existing part is a writable folder), and with `latest`, the link the
    harness keeps there is a link, not a file or folder it would fail to replace."""
    for folder in [root, *(root / name for name in folders)]:
        found = _nearest_existing(folder)
        if not found.is_dir():
            raise HarnessError(
                f"--results-dir: {found} is a file; run folders go in a folder (made if missing)"
            )
        if not os.access(found, os.W_OK | os.X_OK):
            raise HarnessError(f"--results-dir: {found} is not writable; run folders go there")
    link = root / "latest"
    if latest and link.exists() and not link.is_symlink():
        kind = "folder" if link.is_dir() else "file"
        raise HarnessError(
            f"--results-dir: {link} is a {kind}, not the link the harness points at the "
            "newest run; move it away or give another --results-dir"
        )


def _nearest_existing(path: Path) -> Path:
    return next(part for part in [path, *path.parents] if part.exists())


def point_latest(root: Path, run: Path) -> None:
    """results/latest -> the newest run, replaced atomically."""
    link = root / "latest"
    temporary = root / f".latest-{secrets.token_hex(4)}"
    temporary.symlink_to(run.relative_to(root), target_is_directory=True)
    try:
        temporary.replace(link)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
