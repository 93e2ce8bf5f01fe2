"""Worker processes: claim a job, do its work outside the transaction, complete it.

The article's claim pattern. One OS process and one connection per worker. The claim
is one short transaction: `dequeue` (SELECT ... FOR UPDATE SKIP LOCKED), `start` (the
job is running, started_at = clock_timestamp()) and, for strategies that have it,
`served`. The work is a sleep of the job's duration. `complete` marks it done.

This module imports little: it is what every spawned worker process loads.
"""

from __future__ import annotations

import ctypes
import signal
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any

import psycopg


@dataclass(frozen=True)
class WorkerSpec:
    dsn: str
    schema: str
    dequeue: str
    start: str
    complete: str
    served: str | None
    poll_interval_s: float
    durations_ms: dict[int, float]  # tenant id -> the sleep that simulates each job's work


@dataclass
class WorkerReport:
    """What a worker sends back when it stops: each claim it made, or why it failed."""

    worker: int
    claims: list[tuple[int, int, float]] = field(default_factory=list)  # job, tenant, ms
    empty_polls: int = 0
    error: str | None = None


@dataclass(frozen=True)
class WorkerSignals:
    """Shared between the runner and its workers."""

    # Shared memory without locks: each worker writes only its own slot.
    ready: ctypes.Array[Any]  # 1 once the worker is connected
    done: ctypes.Array[Any]  # jobs the worker has completed
    stop: Event
    reports: Queue  # type: ignore[type-arg]


def worker_main(index: int, spec: WorkerSpec, signals: WorkerSignals) -> None:
    """Entry point of a worker process."""
    # Ctrl-C reaches the whole process group; the runner decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    report = WorkerReport(worker=index)
    try:
        with _connect(spec) as conn:
            signals.ready[index] = 1
            _work(conn, spec, index, signals, report)
    except Exception:
        report.error = traceback.format_exc(limit=4)
    signals.reports.put(report)


def _die_with_parent() -> None:
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6").prctl(pr_set_pdeathsig, signal.SIGKILL)


def _connect(spec: WorkerSpec) -> psycopg.Connection:
    return psycopg.connect(spec.dsn, autocommit=True, options=f"-c search_path={spec.schema}")


def _work(
    conn: psycopg.Connection,
    spec: WorkerSpec,
    index: int,
    signals: WorkerSignals,
    report: WorkerReport,
) -> None:
    while not signals.stop.is_set():
        began = time.perf_counter()
        job = claim(conn, spec)
        if job is None:
            report.empty_polls += 1
            time.sleep(spec.poll_interval_s)
            continue
        claim_ms = (time.perf_counter() - began) * 1000
        job_id, tenant_id = job
        report.claims.append((job_id, tenant_id, claim_ms))
        time.sleep(spec.durations_ms[tenant_id] / 1000)
        complete(conn, spec, job_id)
        signals.done[index] += 1


def claim(conn: psycopg.Connection, spec: WorkerSpec) -> tuple[int, int] | None:
    """One claim transaction: (job id, tenant id), or None if no job is free."""
    with conn.transaction():
        return claim_statements(conn, spec)


def claim_statements(conn: psycopg.Connection, spec: WorkerSpec) -> tuple[int, int] | None:
    """The claim's statements, inside whatever transaction the caller holds."""
    row = conn.execute(spec.dequeue).fetchone()
    if row is None:
        return None
    job_id, tenant_id = row
    if conn.execute(spec.start, {"job_id": job_id}).rowcount != 1:
        raise RuntimeError(f"job {job_id} was dequeued but could not be started")
    if spec.served is not None:
        conn.execute(spec.served, {"tenant_id": tenant_id})
    return job_id, tenant_id


def complete(conn: psycopg.Connection, spec: WorkerSpec, job_id: int) -> None:
    updated = conn.execute(spec.complete, {"job_id": job_id}).rowcount
    if updated != 1:
        raise RuntimeError(f"job {job_id}: complete updated {updated} rows, expected 1")
