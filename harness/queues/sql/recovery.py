"""A worker's side of the fault features: the same claim and completion, plus what
surviving faults takes. Only scenarios with faults use it (the null behaviour is
harness/queues/sql/worker.py's `Direct`).

- Every committed claim is logged in `job_claims` in the claim transaction: a worker
  killed outright never reports, and the books must still know what it claimed.
- With a lease, the claim also writes the job's lease, and completion releases it in
  the same transaction; no lease left means it ran out and the job went back to the
  queue, so this worker's completion is dropped (someone else runs the job).
- A failing attempt (drawn from the seed, the job and the attempt number) does not
  complete the job: it is counted in `job_attempts` and the job waits as 'retrying'
  until the runner queues it again after the backoff, or it is dead-lettered.
- A lost connection (the server restarting, a terminated session) makes the worker
  reconnect with capped exponential backoff (refused meanwhile under a connection
  exhaustion) and take up what it was doing: a claim whose COMMIT was cut is
  looked up in `job_claims` (committed: work it; not: the server rolled it back and
  the job is still queued); a cut completion is retried unless it had gone through.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from harness.queues.base import Signals, WorkerReport
from harness.queues.sql.claim import Claimed, claim, complete, rollback
from harness.queues.sql.session import BEGIN, COMMIT, Plain, Step
from harness.queues.sql.specs import RecoverySpec, WorkerSpec
from harness.scenario.distributions import Failures, attempt_fails, job_duration_ms
from harness.server.connections import connect, session_name
from harness.sqlfiles import builtin_blocks

RECONNECT_FIRST_S = 0.05
RECONNECT_CAP_S = 1.0
NEVER_FAILS = Failures(probability=0.0, max_attempts=1, backoff_s=0.0)


def fault_sql() -> dict[str, str]:
    """faults.sql's statements by name, as this install has them."""
    blocks = builtin_blocks("harness.queues.sql", "faults.sql")
    return {name: block.sql for name, block in blocks.items()}


class LeaseLost(Exception):
    """The job's lease ran out before completion: roll back, someone else runs it."""


@dataclass
class Recovering:
    """One worker's claims and completions with the fault features, on a connection that
    is opened again after the server went away."""

    conn: psycopg.Connection[Any]
    spec: WorkerSpec
    index: int
    report: WorkerReport
    signals: Signals
    claims: int = 0  # this process's claim counter, to find its own claims after a cut
    attempts: dict[int, int] = field(default_factory=dict)  # job -> the attempt it makes
    opened: list[psycopg.Connection[Any]] = field(default_factory=list)  # re-opened ones
    sql: dict[str, str] = field(default_factory=fault_sql)

    @property
    def recovery(self) -> RecoverySpec:
        assert self.spec.recovery is not None
        return self.spec.recovery

    def params(self, **values: Any) -> dict[str, Any]:
        return {**self.spec.params, "worker": self.index, "pid": os.getpid(), **values}

    def claim(self) -> Claimed | None:
        """A committed claim, or None if no job was free (or the cut claim had not
        committed: the server rolled it back and the job is queued for anyone)."""
        self.claims += 1
        dequeued: list[dict[str, Any]] = []
        try:
            claimed = claim(
                Plain(self.conn), self.spec.claim, self.params(), self._logged(dequeued)
            )
        except psycopg.OperationalError:
            self.reconnect()
            if not dequeued:
                return None
            self.report.in_doubt += 1
            return self._claim_after_cut(dequeued[0])
        if claimed is not None:
            logged = claimed.extra[0].row  # claim_record returns the attempt this claim makes
            self.attempts[claimed.job_id] = logged[0] if logged else 1
        return claimed

    def _logged(self, dequeued: list[dict[str, Any]]) -> Any:
        """The claim log's row (and the lease) in the claim transaction, after `start`."""

        def steps(job: dict[str, Any]) -> list[Step]:
            dequeued.append(job)
            params = self.params(job_id=job["job_id"], claim=self.claims)
            logged: list[Step] = [(self.sql["claim_record"], params)]
            if self.recovery.lease_s is not None:
                logged.append((self.sql["lease_take"], self._lease(job)))
            return logged

        return steps

    def _lease(self, job: dict[str, Any]) -> dict[str, Any]:
        duration = self.spec.durations[job["tenant_id"]]
        work_s = job_duration_ms(self.spec.seed, job["job_id"], duration) / 1000
        return self.params(job_id=job["job_id"], work_s=work_s, lease_s=self.recovery.lease_s)

    def _claim_after_cut(self, job: dict[str, Any]) -> Claimed | None:
        params = self.params(job_id=job["job_id"], claim=self.claims)
        row = self.conn.execute(self.sql["claim_committed"], params).fetchone()
        if row is None:
            return None
        self.attempts[job["job_id"]] = int(row[0])
        return Claimed(job["job_id"], job["tenant_id"], [])

    def finish(self, job: Claimed) -> bool:
        """Complete, fail or drop the job; True if it is now done or dead for good."""
        failures = self.recovery.failures.get(job.tenant_id, NEVER_FAILS)
        attempt = self.attempts.pop(job.job_id, 1)
        fails = attempt_fails(self.spec.seed, job.job_id, attempt, failures.probability)
        while True:
            try:
                return self._finish_once(job.job_id, fails, failures)
            except LeaseLost:
                self.report.leases_lost += 1
                return False
            except psycopg.OperationalError:
                self.reconnect()
                status = self._status(job.job_id)
                if status != "running":  # the cut commit had gone through, or was reaped
                    return status in ("done", "dead")

    def _finish_once(self, job_id: int, fails: bool, failures: Failures) -> bool:
        session = Plain(self.conn)
        session.run([BEGIN])
        try:
            self._release_lease(session, job_id)
            finished = self._fail(job_id, failures) if fails else self._complete(session, job_id)
        except BaseException:
            rollback(session)
            raise
        session.run([COMMIT])
        return finished

    def _release_lease(self, session: Plain, job_id: int) -> None:
        if self.recovery.lease_s is None:
            return
        released = session.run([(self.sql["lease_release"], self.params(job_id=job_id))])
        if released[0].changed != 1:
            raise LeaseLost()

    def _complete(self, session: Plain, job_id: int) -> bool:
        complete(session, self.spec.claim, self.spec.params, job_id)
        return True

    def _fail(self, job_id: int, failures: Failures) -> bool:
        sql = self.sql
        row = self.conn.execute(
            sql["fail_attempt"], self.params(job_id=job_id, backoff_s=failures.backoff_s)
        ).fetchone()
        dead = row is not None and int(row[0]) >= failures.max_attempts
        updated = self.conn.execute(sql["fail_job"], self.params(job_id=job_id, dead=dead))
        if updated.rowcount != 1:
            raise RuntimeError(f"job {job_id}: a failed attempt found it no longer running")
        if dead:
            self.conn.execute(sql["mark_dead"], self.params(job_id=job_id))
        self.report.failed_attempts += 1
        return dead

    def _status(self, job_id: int) -> str | None:
        row = self.conn.execute(self.sql["job_status"], {"job_id": job_id}).fetchone()
        return str(row[0]) if row else None

    def reconnect(self) -> None:
        """Capped exponential backoff until the server answers again (and has a
        connection to give: a connection exhaustion refuses one until it ends)."""
        with contextlib.suppress(Exception):
            self.conn.close()
        delay = RECONNECT_FIRST_S
        deadline = time.monotonic() + self.recovery.reconnect_give_up_s
        name = self.spec.application_name or session_name()
        while True:
            time.sleep(delay)
            try:
                site = self.spec.site
                self.conn = connect(site.dsn, schema=site.schema, application_name=name)
            except psycopg.OperationalError:
                self.report.reconnects_refused += 1
                if time.monotonic() > deadline or self.signals.stop.is_set():
                    raise
                delay = min(delay * 2, RECONNECT_CAP_S)
                continue
            self.opened.append(self.conn)
            self.report.reconnects += 1
            return

    def close(self) -> None:
        for conn in self.opened:
            with contextlib.suppress(Exception):
                conn.close()
