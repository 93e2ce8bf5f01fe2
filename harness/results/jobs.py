"""jobs.csv: one row per job of every repetition, the contract every figure is computed
from. Timestamps are the server's clock, ISO 8601 with microseconds and zone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a frame is made: a command that makes none goes without
    import pandas as pd

# The column that names the server a row was measured on, major.minor (format 3), in
# jobs.csv, monitor.csv, bloat.csv and first in every derived table.
PG = "pg_version"
RUN_ID = "run_id"  # first in jobs.csv (format 5) and in every derived table

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
    PG,  # the server it ran on
]


_TIMESTAMPS = ["enqueued_at", "started_at", "finished_at"]


def with_timestamps(jobs: pd.DataFrame) -> pd.DataFrame:
    """The timestamp columns parsed (UTC), from jobs.csv text or the runner's records."""
    import pandas as pd

    jobs = jobs.copy()
    for column in _TIMESTAMPS:
        jobs[column] = pd.to_datetime(jobs[column], utc=True, format="ISO8601")
    return jobs


def load_jobs(run: Path) -> pd.DataFrame:
    """jobs.csv of a run folder, timestamps parsed (UTC); pg_version as text (17.10 is
    not 17.1), empty where a run before format 3 did not record it; without the run's id
    (format 5), which every derived table is given again as it is written."""
    jobs = read_versioned_csv(run / "jobs.csv").drop(columns=[RUN_ID], errors="ignore")
    return with_timestamps(jobs)


def read_versioned_csv(path: Path) -> pd.DataFrame:
    """A raw CSV of a run folder whose rows may name their server (pg_version, as text)."""
    import pandas as pd

    frame = pd.read_csv(path, dtype={PG: str})
    if PG not in frame.columns:
        frame[PG] = ""
    frame[PG] = frame[PG].fillna("")
    return frame


def jobs_csv(records: list[dict[str, Any]], run_id: str) -> str:
    """jobs.csv's text: the run's id, then JOB_COLUMNS."""
    import pandas as pd

    jobs = pd.DataFrame.from_records(records, columns=JOB_COLUMNS)
    jobs.insert(0, RUN_ID, run_id)
    return jobs.to_csv(index=False)
