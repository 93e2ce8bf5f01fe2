"""jobs.csv: one row per job of every repetition, the contract every figure is computed
from. Timestamps are the server's clock, ISO 8601 with microseconds and zone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

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
    "host",  # the host the job's worker ran on
    "member",  # its fleet member: 0 for the coordinator's own workers (harness run --fleet)
]


_TIMESTAMPS = ["enqueued_at", "started_at", "finished_at"]


def with_timestamps(jobs: pd.DataFrame) -> pd.DataFrame:
    """The timestamp columns parsed (UTC), from jobs.csv text or the runner's records."""
    jobs = jobs.copy()
    for column in _TIMESTAMPS:
        jobs[column] = pd.to_datetime(jobs[column], utc=True, format="ISO8601")
    return jobs


def load_jobs(run: Path) -> pd.DataFrame:
    """jobs.csv of a run folder, timestamps parsed (UTC)."""
    return with_timestamps(pd.read_csv(run / "jobs.csv"))


def jobs_csv(records: list[dict[str, Any]]) -> str:
    return pd.DataFrame.from_records(records, columns=JOB_COLUMNS).to_csv(index=False)
