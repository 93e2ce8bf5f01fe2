"""The runner's side of a fault scenario: the side tables, the crashes, the reaper, the
retry scheduler, the server restart, and the books of what the faults did.

A scenario without faults never reaches this module: it runs exactly the statements it
ran before. See harness/faulty_worker.py for the workers' side.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import pandas as pd
import psycopg

from harness.errors import HarnessError
from harness.queues.sql.strategies import SHARED_SOURCE, Strategy
from harness.queues.sql.worker import FaultSpec, WorkerReport
from harness.run.books import FaultBooks, JobRow, check_fault_books
from harness.scenario.model import Crash, Scenario, TenantGroup
from harness.scenario.workload import tenant_ranges
from harness.server.connections import connect
from harness.sqlfiles import builtin_blocks

RETRIED, DEAD = "+retried", "+dead"  # tenant_class suffixes in jobs.csv


def fault_sql() -> dict[str, str]:
    blocks = builtin_blocks("harness.queues.sql", "faults.sql")
    return {name: block.sql for name, block in blocks.items()}


def check_strategy(strategy: Strategy) -> None:
    """Faults put jobs back with a plain update of `jobs`: a strategy that keeps per-job
    state elsewhere (counters in queue_tenants, a held transaction) would drift."""
    shared = all(strategy.blocks[name].source == SHARED_SOURCE for name in ("start", "complete"))
    if strategy.hold_lock or strategy.has("retire") or not shared:
        raise HarnessError(
            f"strategy '{strategy.name}' keeps job state beyond the jobs row (its own start, "
            "complete or retire, or a held lock); faults run with fifo, round_robin and "
            "other strategies that use the shared start and complete"
        )


def create_tables(conn: psycopg.Connection, scenario: Scenario) -> None:
    sql = fault_sql()
    blocks = ["claims_table", "attempts_table"]
    if scenario.faults is not None and scenario.faults.lease is not None:
        blocks.append("leases_table")
    for block in blocks:
        conn.execute(sql[block])  # type: ignore[arg-type]  # our own file, not user input


def fault_spec(scenario: Scenario) -> FaultSpec:
    lease = scenario.faults.lease if scenario.faults is not None else None
    failures = {
        tenant: (r.group.failure_probability, r.group.max_attempts, r.group.backoff_ms / 1000)
        for r in tenant_ranges(scenario)
        if isinstance(r.group, TenantGroup) and r.group.failure_probability > 0
        for tenant in r.ids
    }
    return FaultSpec(
        sql=fault_sql(),
        lease_s=lease.seconds if lease else None,
        failures=failures,  # type: ignore[arg-type]
    )


class CrewControl(Protocol):
    """What the fault driver asks of the crew of processes."""

    def kill_mid_job(self, worker: int) -> tuple[int, int] | None: ...

    def replace(self, worker: int) -> None: ...

    def holding(self) -> int: ...


@dataclass
class CrashRecord:
    worker: int  # as the scenario numbers them
    slot: int  # the process's number in jobs.csv's worker column
    job: int  # the job it was working on
    at_s: float  # when it was killed, from the repetition's start
    killed_at: datetime  # the server's clock, just after the kill


@dataclass
class FaultDriver:
    """Fault actions in the runner's watch loop, every tick."""

    scenario: Scenario
    dsn: str
    schema: str
    conn: psycopg.Connection  # the runner's own; a new one after a server restart
    restart: Callable[[], None] | None = None
    crashes: list[CrashRecord] = field(default_factory=list)
    requeued: int = 0  # retries queued again after their backoff
    reaped: int = 0  # jobs put back by an expired lease
    restart_record: dict[str, float] = field(default_factory=dict)
    _pending: list[Crash] = field(default_factory=list)
    _sql: dict[str, str] = field(default_factory=fault_sql)
    _opened: list[psycopg.Connection] = field(default_factory=list)

    def __post_init__(self) -> None:
        faults = self.scenario.faults
        self._pending = sorted(faults.crashes, key=lambda c: c.at_s) if faults else []
        self._opened.append(self.conn)

    @property
    def lease(self) -> bool:
        return self.scenario.faults is not None and self.scenario.faults.lease is not None

    def tick(self, crew: CrewControl, elapsed: float) -> None:
        self._crash_due(crew, elapsed)
        self._restart_due(crew, elapsed)
        if self.lease:
            self.reaped += len(self.conn.execute(self._sql["reap_expired"]).fetchall())  # type: ignore[arg-type]
        self.requeued += len(self.conn.execute(self._sql["requeue_due"]).fetchall())  # type: ignore[arg-type]

    def finished(self, total: int) -> bool:
        """Every job done or dead, or (no lease) the rest held by killed workers."""
        held = [] if self.lease else [crash.job for crash in self.crashes]
        row = self.conn.execute(self._sql["progress"], {"held": held}).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return int(row[0]) + int(row[1]) >= total

    def close(self) -> None:
        for conn in self._opened:
            with contextlib.suppress(Exception):
                conn.close()

    def _crash_due(self, crew: CrewControl, elapsed: float) -> None:
        """Kill at the first moment from at_s when the worker holds a job: mid-job."""
        while self._pending and self._pending[0].at_s <= elapsed:
            crash = self._pending[0]
            killed = crew.kill_mid_job(crash.worker)
            if killed is None:
                return  # between jobs: try again next tick
            self._pending.pop(0)
            killed_at = _now(self.conn)
            self.crashes.append(CrashRecord(crash.worker, killed[0], killed[1], elapsed, killed_at))
            if self.scenario.faults is not None and self.scenario.faults.restart_workers:
                crew.replace(crash.worker)

    def _restart_due(self, crew: CrewControl, elapsed: float) -> None:
        faults = self.scenario.faults
        if faults is None or faults.server_restart is None or self.restart_record:
            return
        if elapsed < faults.server_restart.at_s:
            return
        if self.restart is None:
            raise HarnessError("faults.server_restart needs the embedded provider (--pg embedded)")
        held, began = crew.holding(), time.monotonic()
        self.restart()
        self.restart_record = {
            "at_s": round(elapsed, 4),
            "took_s": round(time.monotonic() - began, 4),
            "held_at_restart": held,
        }
        with contextlib.suppress(Exception):
            self.conn.close()
        self.conn = runner_connection(self.dsn, self.schema)
        self._opened.append(self.conn)


def runner_connection(dsn: str, schema: str) -> psycopg.Connection:
    return connect(dsn, schema=schema, utc=True)


def _now(conn: psycopg.Connection) -> datetime:
    row = conn.execute("select clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class FaultOutcome:
    """A repetition's fault books and the figures run.json and faults.csv carry."""

    books: FaultBooks
    summary: dict[str, Any]
    claims: dict[int, int]  # job -> the worker slot of its last claim
    failures: dict[int, tuple[int, bool]]


def fault_books(
    conn: psycopg.Connection,
    total: int,
    rows: list[JobRow],
    driver: FaultDriver,
    reports: list[WorkerReport],
) -> FaultOutcome:
    sql = fault_sql()
    claims = conn.execute(sql["fault_claims"]).fetchall()  # type: ignore[arg-type]
    failures = {
        int(job): (int(n), bool(dead))
        for job, n, dead in conn.execute(sql["fault_attempts"])  # type: ignore[arg-type]
    }
    held = {crash.job for crash in driver.crashes}
    books = check_fault_books(
        total, rows, [int(c[0]) for c in claims], failures, held, driver.lease
    )
    last_claim = {int(job): int(worker) for job, worker, *_ in claims}
    return FaultOutcome(books, _summary(driver, books, rows, reports), last_claim, failures)


def _summary(
    driver: FaultDriver, books: FaultBooks, rows: list[JobRow], reports: list[WorkerReport]
) -> dict[str, Any]:
    crashes = _crash_entries(driver, rows)
    recovery = [c["recovery_s"] for c in crashes if c["recovery_s"] is not None]
    faults = driver.scenario.faults
    return {
        "crashes_planned": len(faults.crashes) if faults else 0,
        "crashes": crashes,
        "lease_s": faults.lease.seconds if faults and faults.lease else None,
        "lost": len(books.lost),  # a run with lost jobs fails: 0 in every written summary
        "stuck": len(books.stuck),
        "stuck_jobs": books.stuck,
        "duplicates": len(books.duplicates),
        "duplicate_jobs": books.duplicates,
        "dead_lettered": len(books.dead),
        "dead_jobs": books.dead,
        "retried_done": len(books.retried),
        "failed_attempts": sum(r.failed_attempts for r in reports),
        "requeued_after_backoff": driver.requeued,
        "reaped": driver.reaped,
        "recovery_max_s": max(recovery) if recovery else None,
        "recovery_p50_s": statistics.median(recovery) if recovery else None,
        "server_restarts": 1 if driver.restart_record else 0,
        **{f"restart_{k}": v for k, v in driver.restart_record.items()},
        "reconnects": sum(r.reconnects for r in reports),
        "in_doubt_claims": sum(r.in_doubt for r in reports),
        "leases_lost": sum(r.leases_lost for r in reports),
    }


def _crash_entries(driver: FaultDriver, rows: list[JobRow]) -> list[dict[str, Any]]:
    by_id = {row.job_id: row for row in rows}
    entries = []
    for crash in driver.crashes:
        row = by_id.get(crash.job)
        recovered = (
            row.started_at if row and row.started_at and row.started_at > crash.killed_at else None
        )
        entries.append(
            {
                "worker": crash.worker,
                "slot": crash.slot,
                "job": crash.job,
                "at_s": round(crash.at_s, 4),
                "killed_at": crash.killed_at.isoformat(),
                "recovered_at": recovered.isoformat() if recovered else None,
                "recovery_s": (
                    round((recovered - crash.killed_at).total_seconds(), 6) if recovered else None
                ),
            }
        )
    return entries


def books_status(books: FaultBooks) -> str:
    """run.json's `books` of a repetition: stuck jobs are said, never a silent success."""
    return f"stuck: {len(books.stuck)}" if books.stuck else "balanced"


def tenant_class(base: str, job_id: int, failures: dict[int, tuple[int, bool]]) -> str:
    """Retried and dead-lettered jobs as classes of their own, so their waits (which
    include earlier attempts and backoffs) are reported apart."""
    failed, dead = failures.get(job_id, (0, False))
    return base + DEAD if dead else base + RETRIED if failed else base


FAULT_COLUMNS = [
    "strategy",
    "workers",
    "repetition",
    "crashes",
    "lost",
    "duplicates",
    "stuck",
    "dead_lettered",
    "retried_done",
    "recovery_max_s",
    "recovery_p50_s",
    "server_restarts",
    "held_at_restart",
    "in_doubt_claims",
    "reconnects",
]


def fault_table(document: dict[str, Any]) -> pd.DataFrame | None:
    """faults.csv: one row per repetition of what its faults did, from run.json."""
    rows = [
        {
            "strategy": entry["strategy"],
            "workers": entry["workers"],
            "repetition": entry["repetition"],
            **{
                column: faults.get(column)
                for column in FAULT_COLUMNS[4:]
                if column != "held_at_restart"
            },
            "crashes": len(faults["crashes"]),
            "held_at_restart": faults.get("restart_held_at_restart"),
        }
        for entry in document.get("repetitions", [])
        if (faults := entry.get("faults")) is not None
    ]
    return pd.DataFrame(rows, columns=FAULT_COLUMNS) if rows else None
