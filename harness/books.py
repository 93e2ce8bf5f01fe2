"""The books: every job enqueued is done exactly once, or the run fails loudly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class JobRow:
    """A job as the database holds it after a repetition."""

    job_id: int
    tenant_id: int
    status: str
    enqueued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def check_books(enqueued: int, rows: Sequence[JobRow], claimed: Sequence[int]) -> list[str]:
    """What does not balance; empty when every enqueued job was done exactly once.

    `claimed` lists the job id of every claim the workers reported, one entry per claim.
    """
    problems = []
    if len(rows) != enqueued:
        problems.append(f"{enqueued} jobs enqueued but {len(rows)} in the table")
    problems += _describe("not done", [r.job_id for r in rows if r.status != "done"])
    problems += _describe(
        "with timestamps out of order",
        [r.job_id for r in rows if r.status == "done" and not _in_order(r)],
    )
    counts = Counter(claimed)
    problems += _describe("claimed more than once", [job for job, n in counts.items() if n > 1])
    in_table = {row.job_id for row in rows}
    problems += _describe("done but never claimed by a worker", sorted(in_table - set(counts)))
    problems += _describe("claimed but not in the table", sorted(set(counts) - in_table))
    return problems


def _in_order(row: JobRow) -> bool:
    if row.started_at is None or row.finished_at is None:
        return False
    return row.enqueued_at <= row.started_at <= row.finished_at


def _describe(what: str, job_ids: list[int]) -> list[str]:
    if not job_ids:
        return []
    shown = ", ".join(str(job) for job in job_ids[:5])
    more = f" and {len(job_ids) - 5} more" if len(job_ids) > 5 else ""
    return [f"{len(job_ids)} job(s) {what}: {shown}{more}"]
