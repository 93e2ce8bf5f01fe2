"""The books: every job enqueued is done exactly once, or the run fails loudly.

One check for every repetition, faults or not. Its inputs are the queue's ledger (every
job as the queue's own state records it, and the job of every committed claim), the jobs
a killed worker still holds, and whether the queue delivers at least once (a lease hands
a dead worker's job to another, so it may run twice). Without faults nothing is held and
delivery is exactly once: every job must be done, claimed exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.queues.base import JobRecord, Ledger

FINISHED = ("done", "dead")


@dataclass(frozen=True)
class Books:
    """What the books found: the problems that fail the run, and what is reported."""

    problems: list[str]  # empty when the books balance
    lost: list[int]  # neither done nor dead nor held by a killed worker
    stuck: list[int]  # running forever, held by a killed worker (no lease)
    duplicates: list[int]  # finished, and started more often than their attempts explain
    dead: list[int]  # dead-lettered after their last failed attempt
    retried: list[int]  # done after at least one failed attempt
    unfinished_measured: bool = False  # lost jobs are a library's, after its workers' kills
    # Done in the library's table, reported by no worker: killed between its commit and
    # its report (faults.worker_kills only; no moments of its own: not in jobs.csv).
    unreported: list[int] = field(default_factory=list)
    # Done by the task log, absent from the library's table (Ledger.unrecorded): no
    # moments of their own either, not in jobs.csv.
    unrecorded: list[int] = field(default_factory=list)
    # Under a library's faults only (else each fails the run): enqueued, yet neither in
    # the library's table at the end nor ever run by its task: gone, by the library's
    # doing (`missing`); and run or recorded by the library, never enqueued
    # (`unexpected`), a job of no tenant, in no table of the run's.
    missing: list[int] = field(default_factory=list)
    unexpected: list[int] = field(default_factory=list)

    @property
    def status(self) -> str:
        """run.json's `books` of a repetition: stuck jobs are said, never a silent success;
        nor are the jobs a library did not recover after its workers were killed, lost or
        ran without their being enqueued."""
        said = [
            f"{what}: {len(jobs)}"
            for what, jobs in (
                ("not recovered", self.lost if self.unfinished_measured else []),
                ("lost", self.missing),
                ("unexpected", self.unexpected),
            )
            if jobs
        ]
        if said:
            return "; ".join(said)
        return f"stuck: {len(self.stuck)}" if self.stuck else "balanced"


def check_books(
    enqueued: int,
    ledger: Ledger,
    held: frozenset[int] = frozenset(),
    at_least_once: bool = False,
    unfinished_measured: bool = False,
) -> Books:
    """Every job done or dead exactly once, but for those a killed worker holds. With
    `unfinished_measured` (a library's faults), a job its library did not finish is a
    measured result, in `lost`, not a problem: the library's recovery, counted; so are a
    job enqueued (1 to `enqueued`) that its library holds no record of and never ran
    (`missing`), and one it ran or holds that was never enqueued (`unexpected`). A job
    that is twice in the table fails the books whatever the faults: the harness could
    not tell which row is the job."""
    planned = set(range(1, enqueued + 1))
    in_table = Counter(record.job_id for record in ledger.records)
    repeated = sorted(job for job, n in in_table.items() if n > 1)
    missing = sorted(planned - in_table.keys())
    unexpected = sorted(in_table.keys() - planned)
    records = [r for r in ledger.records if r.job_id in planned]
    finished = [r for r in records if r.status in FINISHED]
    stuck = [r.job_id for r in records if _stuck(r, held, at_least_once)]
    lost = [r.job_id for r in records if r.status not in FINISHED and r.job_id not in stuck]
    claims = Counter(job for job in ledger.claims if job not in unexpected)
    unreported = _never_claimed(finished, claims) if unfinished_measured else []
    # A killed worker's unreported jobs are not checked for moments or claims they lack,
    # nor the moments of those the library holds no record of.
    unrecorded = set(ledger.unrecorded)
    reported = [
        r
        for r in finished
        if (claims[r.job_id] or not unfinished_measured) and r.job_id not in unrecorded
    ]
    extra = {r.job_id: _extra_claims(r, claims) for r in finished}
    duplicates = sorted(job for job, n in extra.items() if n > 0)
    problems = [
        *([] if unfinished_measured else _count(enqueued, ledger.records)),
        *([] if unfinished_measured else _describe("enqueued but not in the table", missing)),
        *([] if unfinished_measured else _describe("in the table but never enqueued", unexpected)),
        *_describe("in the table more than once", repeated),
        *([] if unfinished_measured else _describe("not done", lost)),
        *_describe(
            "with timestamps out of order", [r.job_id for r in reported if not _in_order(r)]
        ),
        *_describe("dead but not dead-lettered", [r.job_id for r in records if _undead(r)]),
        *_describe("done but never claimed by a worker", _never_claimed(reported, claims)),
        *_describe("finished with fewer claims than attempts", _short(finished, claims, extra)),
        *([] if at_least_once else _describe("claimed more than once", duplicates)),
        *_describe("claimed but not in the table", sorted(set(claims) - _ids(records))),
    ]
    dead = [r.job_id for r in records if r.status == "dead"]
    retried = [r.job_id for r in finished if r.status == "done" and r.failed_attempts]
    return Books(
        problems,
        lost,
        stuck,
        duplicates,
        dead,
        retried,
        unfinished_measured,
        unreported,
        sorted(unrecorded - set(unexpected)),
        missing if unfinished_measured else [],
        unexpected if unfinished_measured else [],
    )


def _stuck(record: JobRecord, held: frozenset[int], at_least_once: bool) -> bool:
    return record.status == "running" and record.job_id in held and not at_least_once


def _extra_claims(record: JobRecord, claims: Counter[int]) -> int:
    """A done job's claims: one per failed attempt, and the one that did it; a dead job's:
    one per failed attempt. Any more started the work again (a crash, a lease)."""
    expected = record.failed_attempts + (1 if record.status == "done" else 0)
    return claims[record.job_id] - expected


def _count(enqueued: int, records: Sequence[JobRecord]) -> list[str]:
    if len(records) == enqueued:
        return []
    return [f"{enqueued} jobs enqueued but {len(records)} in the table"]


def _undead(record: JobRecord) -> bool:
    return record.status == "dead" and not record.dead_lettered


def _never_claimed(finished: list[JobRecord], claims: Counter[int]) -> list[int]:
    return sorted(r.job_id for r in finished if claims[r.job_id] == 0)


def _short(finished: list[JobRecord], claims: Counter[int], extra: dict[int, int]) -> list[int]:
    """Claimed, but fewer times than its attempts need (never claimed is said apart)."""
    return sorted(r.job_id for r in finished if extra[r.job_id] < 0 and claims[r.job_id])


def _ids(records: Sequence[JobRecord]) -> set[int]:
    return {record.job_id for record in records}


def _in_order(record: JobRecord) -> bool:
    if record.enqueued_at is None or record.started_at is None or record.finished_at is None:
        return False
    return record.enqueued_at <= record.started_at <= record.finished_at


def _describe(what: str, job_ids: list[int]) -> list[str]:
    if not job_ids:
        return []
    shown = ", ".join(str(job) for job in job_ids[:5])
    more = f" and {len(job_ids) - 5} more" if len(job_ids) > 5 else ""
    return [f"{len(job_ids)} job(s) {what}: {shown}{more}"]
