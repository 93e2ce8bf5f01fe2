"""The worker loop when a scenario uses faults: the same claim, work and complete, plus
what surviving faults takes.

- Every committed claim is logged in `job_claims` in the claim transaction: a worker
  killed outright never reports, and the books must still know what it claimed.
- With a lease, the claim also writes the job's lease, and completion releases it in
  the same transaction; no lease left means it ran out and the job went back to the
  queue, so this worker's completion is dropped (someone else runs the job).
- A failing attempt (drawn from the seed, the job and the attempt number) does not
  complete the job: it is counted in `job_attempts` and the job waits as 'retrying'
  until the runner queues it again after the backoff, or it is dead-lettered.
- A lost connection (the server restarting) makes the worker reconnect with capped
  exponential backoff and take up what it was doing: a claim whose COMMIT was cut is
  looked up in `job_claims` (committed: work it; not: the server rolled it back and
  the job is still queued); a cut completion is retried unless it had gone through.

The job a worker is working on is published in `signals.holding`, so that the runner
kills it mid-job.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from harness.queues.sql.worker import (
    FaultSpec,
    LostRace,
    Plain,
    WorkerReport,
    WorkerSignals,
    WorkerSpec,
    claim_statements,
    complete,
)
from harness.scenario.distributions import attempt_fails, job_duration_ms
from harness.server.connections import connect

RECONNECT_FIRST_S = 0.05
RECONNECT_CAP_S = 1.0
RECONNECT_GIVE_UP_S = 60.0


class LeaseLost(Exception):
    """The job's lease ran out before completion: roll back, someone else runs it."""


@dataclass
class Session:
    """One worker's connection, re-opened after the server went away."""

    conn: psycopg.Connection
    spec: WorkerSpec
    index: int
    report: WorkerReport
    signals: WorkerSignals
    claims: int = 0  # this process's claim counter, to find its own claims after a cut
    extra: list[psycopg.Connection] = field(default_factory=list)  # re-opened ones

    @property
    def faults(self) -> FaultSpec:
        assert self.spec.faults is not None
        return self.spec.faults

    def params(self, **values: Any) -> dict[str, Any]:
        return {**self.spec.params, "worker": self.index, "pid": os.getpid(), **values}

    def reconnect(self) -> None:
        """Capped exponential backoff until the server answers again."""
        with contextlib.suppress(Exception):
            self.conn.close()
        delay, deadline = RECONNECT_FIRST_S, time.monotonic() + RECONNECT_GIVE_UP_S
        while True:
            time.sleep(delay)
            try:
                self.conn = connect(self.spec.dsn, schema=self.spec.schema)
            except psycopg.OperationalError:
                if time.monotonic() > deadline or self.signals.stop.is_set():
                    raise
                delay = min(delay * 2, RECONNECT_CAP_S)
                continue
            self.extra.append(self.conn)
            self.report.reconnects += 1
            return

    def close(self) -> None:
        for conn in self.extra:
            with contextlib.suppress(Exception):
                conn.close()

    def claim(self, began: float) -> tuple[int, int, int] | None:
        """(job, tenant, attempt number) claimed, or None if no job was free."""
        self.claims += 1
        dequeued: list[tuple[int, int]] = []
        try:
            return self._claim_once(dequeued, began)
        except psycopg.OperationalError:
            self.reconnect()
            if not dequeued:
                return None
            self.report.in_doubt += 1
            return self._claim_after_cut(dequeued[0], began)

    def _claim_once(
        self, dequeued: list[tuple[int, int]], began: float
    ) -> tuple[int, int, int] | None:
        with self.conn.transaction():
            job = claim_statements(Plain(self.conn), self.spec)
            if job is None:
                return None
            dequeued.append(job)
            row = self.conn.execute(
                self.faults.sql["claim_record"], self.params(job_id=job[0], claim=self.claims)
            ).fetchone()
            if self.faults.lease_s is not None:
                self._take_lease(job)
        self.report.claims.append((job[0], job[1], (time.perf_counter() - began) * 1000))
        return job[0], job[1], int(row[0]) if row else 1

    def _take_lease(self, job: tuple[int, int]) -> None:
        work_s = job_duration_ms(self.spec.seed, job[0], self.spec.durations[job[1]]) / 1000
        self.conn.execute(
            self.faults.sql["lease_take"],
            self.params(job_id=job[0], work_s=work_s, lease_s=self.faults.lease_s),
        )

    def _claim_after_cut(self, job: tuple[int, int], began: float) -> tuple[int, int, int] | None:
        row = self.conn.execute(
            self.faults.sql["claim_committed"], self.params(job_id=job[0], claim=self.claims)
        ).fetchone()
        if row is None:
            return None  # rolled back by the server: the job is queued for anyone
        self.report.claims.append((job[0], job[1], (time.perf_counter() - began) * 1000))
        return job[0], job[1], int(row[0])

    def finish(self, job_id: int, tenant: int, attempt: int) -> bool:
        """Complete, fail or drop the job; True if it is now done or dead for good."""
        probability, max_attempts, backoff_s = self.faults.failures.get(tenant, (0.0, 1, 0.0))
        fails = attempt_fails(self.spec.seed, job_id, attempt, probability)
        while True:
            try:
                return self._finish_once(job_id, fails, max_attempts, backoff_s)
            except LeaseLost:
                self.report.leases_lost += 1
                return False
            except psycopg.OperationalError:
                self.reconnect()
                status = self._status(job_id)
                if status != "running":  # the cut commit had gone through, or was reaped
                    return status in ("done", "dead")

    def _finish_once(self, job_id: int, fails: bool, max_attempts: int, backoff_s: float) -> bool:
        with self.conn.transaction():
            if self.faults.lease_s is not None:
                released = self.conn.execute(
                    self.faults.sql["lease_release"], self.params(job_id=job_id)
                ).rowcount
                if released != 1:
                    raise LeaseLost()
            if not fails:
                complete(Plain(self.conn), self.spec, job_id)
                return True
            return self._fail(job_id, max_attempts, backoff_s)

    def _fail(self, job_id: int, max_attempts: int, backoff_s: float) -> bool:
        sql = self.faults.sql
        row = self.conn.execute(
            sql["fail_attempt"], self.params(job_id=job_id, backoff_s=backoff_s)
        ).fetchone()
        dead = row is not None and int(row[0]) >= max_attempts
        updated = self.conn.execute(sql["fail_job"], self.params(job_id=job_id, dead=dead))
        if updated.rowcount != 1:
            raise RuntimeError(f"job {job_id}: a failed attempt found it no longer running")
        if dead:
            self.conn.execute(sql["mark_dead"], self.params(job_id=job_id))
        self.report.failed_attempts += 1
        return dead

    def _status(self, job_id: int) -> str | None:
        row = self.conn.execute(self.faults.sql["job_status"], {"job_id": job_id}).fetchone()
        return str(row[0]) if row else None


def work_with_faults(
    conn: psycopg.Connection,
    spec: WorkerSpec,
    index: int,
    signals: WorkerSignals,
    report: WorkerReport,
) -> None:
    session = Session(conn, spec, index, report, signals)
    try:
        signals.start.wait()
        while not signals.stop.is_set():
            if not _one_job(session, spec, index, signals, report):
                report.empty_polls += 1
                time.sleep(spec.poll_interval_s)
    finally:
        session.close()


def _one_job(
    session: Session, spec: WorkerSpec, index: int, signals: WorkerSignals, report: WorkerReport
) -> bool:
    """Claim, work and finish one job; False if the queue had none for this worker."""
    try:
        job = session.claim(time.perf_counter())
    except LostRace:
        report.lost_races += 1
        return True
    if job is None:
        return False
    job_id, tenant, attempt = job
    signals.holding[index] = job_id  # from here until the work ends, a kill is mid-job
    time.sleep(job_duration_ms(spec.seed, job_id, spec.durations[tenant]) / 1000)
    signals.holding[index] = 0
    if session.finish(job_id, tenant, attempt):
        signals.done[index] += 1
    return True
