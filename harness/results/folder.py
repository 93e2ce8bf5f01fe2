"""Run folders: versioned, write-once, with the raw data that every figure comes from.

Layout of a run folder, results/<scenario>/<UTC time>-<short id>/:
  scenario.yaml   the scenario exactly as read
  run.json        format version, status, provenance (see metadata.py), repetitions
  jobs.csv        one row per job of every repetition: the contract analysis reads
  summary.csv     per strategy, workers, repetition and tenant class: waits, makespan
  summary.md      the same as ranges over repetitions, beside the reference figures
  explain/<variant>/<strategy>.json, .txt   raw EXPLAIN (ANALYZE, BUFFERS) captures
  plans.csv       one row per captured execution: the figures read from its JSON plan
  bloat.csv       with long_transaction: the sampled xmin age, dead tuples, sizes, dequeue
  bloat-summary.csv  per repetition: claim latency before, during and after the hold
  *.png           plots

Format history (RUN_FORMAT_VERSION):
  1  first version.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

RUN_FORMAT_VERSION = 1
JOB_COLUMNS = [
    "scenario",
    "strategy",
    "workers",
    "repetition",
    "job_id",
    "tenant_id",
    "tenant_class",
    "enqueued_at",
    "started_at",
    "finished_at",
    "worker",
    "duration_ms",
    "claim_ms",
]
_TIMESTAMPS = ["enqueued_at", "started_at", "finished_at"]
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
        if target.exists() and not replace:
            raise FileExistsError(f"{target} exists; results are never overwritten")
        atomic_write(target, data.encode("utf-8") if isinstance(data, str) else data)
        return target

    def write_json(self, name: str, document: dict[str, Any], *, replace: bool = False) -> Path:
        return self.write(name, json.dumps(document, indent=2, default=str) + "\n", replace=replace)

    def write_jobs(self, records: list[dict[str, Any]]) -> Path:
        """jobs.csv as the database gave it: ISO 8601 timestamps with microseconds."""
        raw = pd.DataFrame.from_records(records, columns=JOB_COLUMNS)
        return self.write("jobs.csv", raw.to_csv(index=False))


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


def point_latest(root: Path, run: Path) -> None:
    """results/latest -> the newest run, replaced atomically."""
    link = root / "latest"
    temporary = root / f".latest-{secrets.token_hex(4)}"
    temporary.symlink_to(run.relative_to(root), target_is_directory=True)
    temporary.replace(link)


def with_timestamps(jobs: pd.DataFrame) -> pd.DataFrame:
    """The timestamp columns parsed (UTC), from jobs.csv text or the runner's records."""
    jobs = jobs.copy()
    for column in _TIMESTAMPS:
        jobs[column] = pd.to_datetime(jobs[column], utc=True, format="ISO8601")
    return jobs


def load_jobs(run: Path) -> pd.DataFrame:
    """jobs.csv of a run folder, timestamps parsed (UTC)."""
    return with_timestamps(pd.read_csv(run / "jobs.csv"))


def load_run(run: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run / "run.json").read_text(encoding="utf-8"))
    version = document.get("format_version")
    if version != RUN_FORMAT_VERSION:
        raise ValueError(
            f"{run / 'run.json'}: format_version {version}, this harness reads {RUN_FORMAT_VERSION}"
        )
    return document
