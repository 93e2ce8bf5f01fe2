"""The SQL strategies' worker and enqueuer processes: one loop each.

One OS process and one connection per worker. A worker claims a job (the article's
claim pattern, harness/queues/sql/claim.py), sleeps the job's duration outside the claim
transaction (inside it for `-- claim: hold` strategies), and completes it. Which
statements carry the claim and the completion is the worker's behaviour:

- `Direct` (every scenario without faults): the claim and `complete`, prepared and
  pipelined through libpq (harness/queues/sql/session.py `Prepared`). Nothing else runs.
- `Recovering` (scenarios with faults, harness/queues/sql/recovery.py): the same claim
  with the claim log (and lease) in its transaction, failing attempts, reconnection.

The job a worker is working on is published in `signals.holding`, so that the runner's
fault driver kills it mid-job. Enqueuers insert their batches at their offsets from the
shared start.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import psycopg

from harness.queues.base import Signals, WorkerReport
from harness.queues.process import run_connected
from harness.queues.sql.claim import Claimed, LostRace, claim, complete, rollback
from harness.queues.sql.recovery import Recovering
from harness.queues.sql.session import Prepared
from harness.queues.sql.specs import EnqueuerSpec, WorkerSpec
from harness.scenario.distributions import job_duration_ms


class Behaviour(Protocol):
    """How a worker claims and finishes: Direct, or Recovering with the fault features."""

    def claim(self) -> Claimed | None: ...

    def finish(self, job: Claimed) -> bool:
        """True if the job is now done (or dead) for good."""


@dataclass
class Direct:
    """The claim and the completion, nothing else: the null behaviour of the faults."""

    session: Prepared
    spec: WorkerSpec

    def claim(self) -> Claimed | None:
        return claim(self.session, self.spec.claim, self.spec.params)

    def finish(self, job: Claimed) -> bool:
        try:
            complete(self.session, self.spec.claim, self.spec.params, job.job_id)
        except BaseException:
            if self.spec.claim.hold_lock:
                rollback(self.session)
            raise
        return True


def worker_main(index: int, spec: WorkerSpec, signals: Signals) -> None:
    """Entry point of a worker process."""
    run_connected(index, spec.site, signals, partial(_worker_body, spec), spec.application_name)


def _worker_body(
    spec: WorkerSpec,
    conn: psycopg.Connection[Any],
    index: int,
    signals: Signals,
    report: WorkerReport,
) -> None:
    with _behaviour(conn, spec, index, signals, report) as behaviour:
        work(behaviour, spec, index, signals, report)


@contextlib.contextmanager
def _behaviour(
    conn: psycopg.Connection[Any],
    spec: WorkerSpec,
    index: int,
    signals: Signals,
    report: WorkerReport,
) -> Iterator[Behaviour]:
    if spec.recovery is None:
        yield Direct(Prepared(conn), spec)
        return
    recovering = Recovering(conn, spec, index, report, signals)
    try:
        yield recovering
    finally:
        recovering.close()


def work(
    behaviour: Behaviour, spec: WorkerSpec, index: int, signals: Signals, report: WorkerReport
) -> None:
    """Claim, work, finish, until the stop; poll when the queue has nothing free."""
    signals.start.wait()
    while not signals.stop.is_set():
        began = time.perf_counter()
        try:
            job = behaviour.claim()
        except LostRace:
            report.lost_races += 1
            continue
        if job is None:
            report.empty_polls += 1
            time.sleep(spec.poll_interval_s)
            continue
        report.claims.append((job.job_id, job.tenant_id, (time.perf_counter() - began) * 1000))
        signals.holding[index] = job.job_id  # from here until the work ends, a kill is mid-job
        _sleep_the_work(spec, job)
        signals.holding[index] = 0
        if behaviour.finish(job):
            signals.done[index] += 1


def _sleep_the_work(spec: WorkerSpec, job: Claimed) -> None:
    work_ms = job_duration_ms(spec.seed, job.job_id, spec.durations[job.tenant_id])
    if work_ms > 0:  # sleep(0) still gives up the CPU: a 0 ms job does no work at all
        time.sleep(work_ms / 1000)


def enqueuer_main(index: int, spec: EnqueuerSpec, signals: Signals) -> None:
    """Entry point of an enqueuer process."""
    run_connected(index, spec.site, signals, partial(_enqueuer_body, spec))


def _enqueuer_body(
    spec: EnqueuerSpec,
    conn: psycopg.Connection[Any],
    index: int,
    signals: Signals,
    report: WorkerReport,
) -> None:
    signals.start.wait()
    start = time.monotonic()
    for batch in spec.arrivals:
        delay = batch.at_s - (time.monotonic() - start)
        if delay > 0:
            time.sleep(delay)
        if signals.stop.is_set():
            return
        conn.execute(spec.enqueue, batch.params(spec.params))  # type: ignore[call-overload]
    signals.stop.wait()  # an enqueuer that exits early would look like one that failed
