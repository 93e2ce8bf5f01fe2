"""Worker and enqueuer processes.

Workers use the article's claim pattern. One OS process and one connection per worker.
The claim is one short transaction: `dequeue` (SELECT ... FOR UPDATE SKIP LOCKED), then,
for strategies that have it, `served` (the tenant's turn is used), `start` (the job is
running, started_at = clock_timestamp()) and `retire` (the tenant's upkeep). The work is a
sleep of the job's duration, outside the transaction; `complete` marks it done. A
strategy whose header says `-- claim: hold` instead keeps the transaction, and so the
job's row lock, open for the work and completes inside it.

A `served` statement that changes no row means the tenant's turn was taken by a
concurrent claim (a per-tenant cap reached, say): the claim is rolled back and counted
as a lost race, and the worker dequeues again.

Enqueuers insert their batches at their offsets from the shared start. This module
imports little: it is what every spawned process loads.
"""

from __future__ import annotations

import ctypes
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any

import psycopg

from harness.distributions import Duration, job_duration_ms


@dataclass(frozen=True)
class WorkerSpec:
    dsn: str
    schema: str
    dequeue: str
    start: str
    complete: str
    served: str | None
    retire: str | None
    hold_lock: bool  # one transaction around claim, work and completion
    poll_interval_s: float
    seed: int  # with the job's id, draws the sleep that simulates its work
    durations: dict[int, Duration]  # tenant id -> its jobs' duration distribution
    params: dict[str, Any] = field(default_factory=dict)  # the scenario's, for every statement
    faults: FaultSpec | None = None  # the fault features' claim, finish and reconnects


@dataclass(frozen=True)
class FaultSpec:
    """What a worker needs when the scenario uses faults (harness/sql/faults.sql)."""

    sql: dict[str, str]  # faults.sql blocks by name
    lease_s: float | None  # None: no lease, a killed worker's job stays running
    failures: dict[int, tuple[float, int, float]]  # tenant -> probability, attempts, backoff s


@dataclass
class WorkerReport:
    """What a worker sends back when it stops: each claim it made, or why it failed."""

    worker: int
    claims: list[tuple[int, int, float]] = field(default_factory=list)  # job, tenant, ms
    empty_polls: int = 0
    lost_races: int = 0
    error: str | None = None
    reconnects: int = 0  # connections re-opened after the server went away
    in_doubt: int = 0  # claims whose commit was cut by a disconnect (resolved on reconnect)
    failed_attempts: int = 0
    leases_lost: int = 0  # jobs finished after their lease ran out: someone else ran them


@dataclass(frozen=True)
class WorkerSignals:
    """Shared between the runner, its workers and its enqueuers."""

    # Shared memory without locks: each process writes only its own slot.
    ready: ctypes.Array[Any]  # 1 once connected; workers first, then enqueuers
    done: ctypes.Array[Any]  # jobs each worker has completed
    holding: ctypes.Array[Any]  # the job each worker is working on, 0 between jobs
    start: Event  # the clock starts: enqueuers begin their schedules
    stop: Event
    reports: Queue  # type: ignore[type-arg]


class LostRace(Exception):
    """The tenant's turn went to a concurrent claim; roll back and dequeue again."""


def worker_main(index: int, spec: WorkerSpec, signals: WorkerSignals) -> None:
    """Entry point of a worker process."""
    if spec.faults is not None:
        from harness.faulty_worker import work_with_faults

        _run_process(index, spec, signals, work_with_faults)
        return
    _run_process(index, spec, signals, _work)


def enqueuer_main(index: int, spec: EnqueuerSpec, signals: WorkerSignals) -> None:
    """Entry point of an enqueuer process."""
    _run_process(index, spec, signals, _enqueue_schedule)


def _run_process(index: int, spec: Any, signals: WorkerSignals, body: Callable[..., None]) -> None:
    # Ctrl-C reaches the whole process group; the runner decides when its children stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    report = WorkerReport(worker=index)
    try:
        with connect(spec.dsn, spec.schema) as conn:
            signals.ready[index] = 1
            body(conn, spec, index, signals, report)
    except Exception:
        report.error = traceback.format_exc(limit=4)
    signals.reports.put(report)


def _die_with_parent() -> None:
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6").prctl(pr_set_pdeathsig, signal.SIGKILL)


def connect(dsn: str, schema: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}")


def _work(
    conn: psycopg.Connection,
    spec: WorkerSpec,
    index: int,
    signals: WorkerSignals,
    report: WorkerReport,
) -> None:
    signals.start.wait()
    while not signals.stop.is_set():
        began = time.perf_counter()
        try:
            claimed = _claim_and_work(conn, spec, report, began)
        except LostRace:
            report.lost_races += 1
            continue
        if not claimed:
            report.empty_polls += 1
            time.sleep(spec.poll_interval_s)
            continue
        signals.done[index] += 1


def _claim_and_work(
    conn: psycopg.Connection, spec: WorkerSpec, report: WorkerReport, began: float
) -> bool:
    if spec.hold_lock:
        with conn.transaction():
            job = claim_statements(conn, spec)
            if job is not None:
                _record(report, job, began)
                _do_work(conn, spec, job)
        return job is not None
    job = claim(conn, spec)
    if job is not None:
        _record(report, job, began)
        _do_work(conn, spec, job)
    return job is not None


def _record(report: WorkerReport, job: tuple[int, int], began: float) -> None:
    report.claims.append((job[0], job[1], (time.perf_counter() - began) * 1000))


def _do_work(conn: psycopg.Connection, spec: WorkerSpec, job: tuple[int, int]) -> None:
    job_id, tenant_id = job
    time.sleep(job_duration_ms(spec.seed, job_id, spec.durations[tenant_id]) / 1000)
    complete(conn, spec, job_id)


def claim(conn: psycopg.Connection, spec: WorkerSpec) -> tuple[int, int] | None:
    """One claim transaction: (job id, tenant id), or None if no job is free."""
    with conn.transaction():
        return claim_statements(conn, spec)


def claim_statements(conn: psycopg.Connection, spec: WorkerSpec) -> tuple[int, int] | None:
    """The claim's statements, inside whatever transaction the caller holds."""
    row = conn.execute(spec.dequeue, spec.params).fetchone()
    if row is None:
        return None
    job_id, tenant_id = row
    params = {**spec.params, "job_id": job_id, "tenant_id": tenant_id}
    # `served` before `start`: a guard there (a cap) decides before the job's started_at
    # is taken, so recorded intervals never overlap more than the guard allowed.
    if spec.served is not None and conn.execute(spec.served, params).rowcount == 0:
        raise LostRace()
    if conn.execute(spec.start, params).rowcount != 1:
        raise RuntimeError(f"job {job_id} was dequeued but could not be started")
    if spec.retire is not None:
        conn.execute(spec.retire, params)
    return job_id, tenant_id


def complete(conn: psycopg.Connection, spec: WorkerSpec, job_id: int) -> None:
    updated = conn.execute(spec.complete, {**spec.params, "job_id": job_id}).rowcount
    if updated != 1:
        raise RuntimeError(f"job {job_id}: complete updated {updated} rows, expected 1")


@dataclass(frozen=True)
class EnqueuerSpec:
    dsn: str
    schema: str
    enqueue: str
    batches: list[tuple[float, dict[str, Any]]]  # (offset in s, parameters), by offset


def _enqueue_schedule(
    conn: psycopg.Connection,
    spec: EnqueuerSpec,
    index: int,
    signals: WorkerSignals,
    report: WorkerReport,
) -> None:
    signals.start.wait()
    start = time.monotonic()
    for at_s, params in spec.batches:
        delay = at_s - (time.monotonic() - start)
        if delay > 0:
            time.sleep(delay)
        if signals.stop.is_set():
            return
        conn.execute(spec.enqueue, params)
    signals.stop.wait()  # an enqueuer that exits early would look like one that failed
