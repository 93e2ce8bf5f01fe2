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


@dataclass(frozen=True)
class FaultBooks:
    """The books of a fault scenario: what was stuck, lost, run twice, dead-lettered."""

    problems: list[str]  # what fails the run: lost jobs above all
    lost: list[int]  # neither done nor dead nor held by a killed worker
    stuck: list[int]  # running forever, held by a killed worker (no lease)
    duplicates: list[int]  # done, and started more often than their attempts explain
    dead: list[int]  # dead-lettered after their last failed attempt
    retried: list[int]  # done after at least one failed attempt


def check_fault_books(
    enqueued: int,
    rows: Sequence[JobRow],
    claimed: Sequence[int],
    failures: dict[int, tuple[int, bool]],
    held: set[int],
    at_least_once: bool,
) -> FaultBooks:
    """Every job done or dead exactly once, but for those a killed worker holds.

    `claimed`: the job of every committed claim (the claim log, killed workers' included);
    `failures`: job -> (failed attempts, dead-lettered); `held`: the jobs killed workers
    held; `at_least_once`: a lease may hand a job to a second worker (duplicates allowed).
    """
    problems = (
        [] if len(rows) == enqueued else [f"{enqueued} jobs enqueued, {len(rows)} in the table"]
    )
    finished = [r for r in rows if r.status in ("done", "dead")]
    stuck = [
        r.job_id for r in rows if r.status == "running" and r.job_id in held and not at_least_once
    ]
    lost = [r.job_id for r in rows if r.status not in ("done", "dead") and r.job_id not in stuck]
    problems += _describe("lost (never done)", lost)
    problems += _describe(
        "with timestamps out of order", [r.job_id for r in finished if not _in_order(r)]
    )
    dead = [r.job_id for r in rows if r.status == "dead"]
    problems += _describe(
        "dead but not dead-lettered", [j for j in dead if not failures.get(j, (0, False))[1]]
    )
    counts = Counter(claimed)
    # A done job's claims: one per failed attempt, and the one that did it; a dead job's:
    # one per failed attempt. Any more started the work again (a crash, a lease).
    extra = {
        r.job_id: counts[r.job_id]
        - failures.get(r.job_id, (0, False))[0]
        - (1 if r.status == "done" else 0)
        for r in finished
    }
    problems += _describe(
        "finished with fewer claims than attempts", [j for j, n in extra.items() if n < 0]
    )
    duplicates = sorted(j for j, n in extra.items() if n > 0)
    if not at_least_once:
        problems += _describe("claimed more than once", duplicates)
    in_table = {row.job_id for row in rows}
    problems += _describe("claimed but not in the table", sorted(set(counts) - in_table))
    retried = [
        r.job_id for r in finished if r.status == "done" and failures.get(r.job_id, (0, False))[0]
    ]
    return FaultBooks(problems, lost, stuck, duplicates, dead, retried)
