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

Workers run these statements prepared, through libpq directly (`Prepared`): the same
statements, transactions and round trips as through psycopg's cursors, at a fraction of
the client's CPU, which on a small machine is taken from the server it measures
(`harness overhead` compares the workers with pgbench on the same SQL).

Enqueuers insert their batches at their offsets from the shared start. This module
imports little: it is what every spawned process loads.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import re
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any, Protocol

import psycopg
from psycopg import pq
from psycopg.pq.abc import PGresult

from harness.scenario.distributions import Duration, job_duration_ms
from harness.server.connections import connect


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
    """What a worker needs when the scenario uses faults (harness/queues/sql/faults.sql)."""

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
        from harness.queues.sql.fault_worker import work_with_faults

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
        with connect(spec.dsn, schema=spec.schema) as conn:
            signals.ready[index] = 1
            body(conn, spec, index, signals, report)
    except Exception:
        report.error = traceback.format_exc(limit=4)
    signals.reports.put(report)


def _die_with_parent() -> None:
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6").prctl(pr_set_pdeathsig, signal.SIGKILL)


class Statements(Protocol):
    """How the claim's statements reach the server; they return ids, so rows are ints."""

    def row(self, sql: str, params: dict[str, Any]) -> tuple[int, ...] | None:
        """The statement's first row, or None."""

    def changed(self, sql: str, params: dict[str, Any]) -> int:
        """How many rows the statement changed."""


class Plain:
    """Through psycopg's cursors, which prepare a statement from its fifth execution.
    `harness check` times claims this way beside a reference query sent the same way."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def row(self, sql: str, params: dict[str, Any]) -> tuple[int, ...] | None:
        found = self.conn.execute(sql, params).fetchone()  # type: ignore[call-overload]
        return None if found is None else tuple(found)

    def changed(self, sql: str, params: dict[str, Any]) -> int:
        return int(self.conn.execute(sql, params).rowcount)  # type: ignore[call-overload]


# Unique in the process, so that two sessions on one connection never clash.
_STATEMENT_NUMBERS = itertools.count()
_PLACEHOLDER = re.compile(r"%\((?P<name>[a-z_][a-z0-9_]*)\)s")


class Prepared:
    """Each statement prepared on its first use, then run through libpq directly.

    The server sees what psycopg's cursors send once they have prepared a statement: the
    same statements, transactions (BEGIN and COMMIT as simple queries) and round trips.
    The client does about a tenth of the work per statement: with 0 ms jobs and four
    workers on two cores, the cursors' bookkeeping took CPU the server needed, and the
    workers drained a queue at about 0.6 of pgbench's rate on the same SQL.
    """

    def __init__(self, conn: psycopg.Connection) -> None:
        self.pgconn = conn.pgconn
        self.encoding = conn.info.encoding
        self.statements: dict[str, tuple[bytes, list[str]]] = {}  # sql -> name, parameters

    def row(self, sql: str, params: dict[str, Any]) -> tuple[int, ...] | None:
        return _first_row(self._run(sql, params))

    def changed(self, sql: str, params: dict[str, Any]) -> int:
        return int(self._run(sql, params).command_tuples or 0)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN ... COMMIT, or ROLLBACK if the block raises (a lost race, say)."""
        self._command(b"begin")
        try:
            yield
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                self._command(b"rollback")
            raise
        self._command(b"commit")

    def pipelined(self, steps: list[Step]) -> list[PGresult]:
        """Statements sent together and answered in one round trip (libpq's pipeline
        mode), in order, each as the server ran it; a `bytes` step is a plain command
        (begin, commit). After an error the rest are skipped; the first error is raised."""
        known = [None if isinstance(step, bytes) else self._known(step[0]) for step in steps]
        self.pgconn.enter_pipeline_mode()
        try:
            for step, statement in zip(steps, known, strict=True):
                if isinstance(step, bytes):
                    self.pgconn.send_query_params(step, None)
                else:
                    assert statement is not None
                    name, names = statement
                    self.pgconn.send_query_prepared(name, _values(step[1], names))
            self.pgconn.pipeline_sync()
            results = [self._one_result() for _ in steps]
            self.pgconn.get_result()  # the sync's own result
        finally:
            self.pgconn.exit_pipeline_mode()
        return [self._checked(result) for result in results]

    def _one_result(self) -> PGresult:
        result = self.pgconn.get_result()
        assert result is not None
        while self.pgconn.get_result() is not None:  # a statement's results end with None
            pass
        return result

    def _known(self, sql: str) -> tuple[bytes, list[str]]:
        return self.statements.get(sql) or self._prepare(sql)

    def _run(self, sql: str, params: dict[str, Any]) -> PGresult:
        name, names = self._known(sql)
        return self._checked(self.pgconn.exec_prepared(name, _values(params, names)))

    def _prepare(self, sql: str) -> tuple[bytes, list[str]]:
        """psycopg's %(name)s placeholders become $1, $2 ... in order of first use."""
        names: list[str] = []

        def number(found: re.Match[str]) -> str:
            if found["name"] not in names:
                names.append(found["name"])
            return f"${names.index(found['name']) + 1}"

        text = _PLACEHOLDER.sub(number, sql).replace("%%", "%")
        name = f"harness_{next(_STATEMENT_NUMBERS)}".encode()
        self._checked(self.pgconn.prepare(name, text.encode(self.encoding)))
        self.statements[sql] = (name, names)
        return name, names

    def _command(self, command: bytes) -> None:
        self._checked(self.pgconn.exec_(command))

    def _checked(self, result: PGresult) -> PGresult:
        if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            raise psycopg.errors.error_from_result(result, encoding=self.encoding)
        return result


Step = tuple[str, dict[str, Any]] | bytes  # a prepared statement and its parameters, or a command


def _values(params: dict[str, Any], names: list[str]) -> list[bytes]:
    return [str(params[name]).encode() for name in names]  # ids and counts: never NULL


def _first_row(result: PGresult) -> tuple[int, ...] | None:
    if result.ntuples == 0:
        return None
    return tuple(int(result.get_value(0, column) or 0) for column in range(result.nfields))


def _work(
    conn: psycopg.Connection,
    spec: WorkerSpec,
    index: int,
    signals: WorkerSignals,
    report: WorkerReport,
) -> None:
    session = Prepared(conn)
    signals.start.wait()
    while not signals.stop.is_set():
        began = time.perf_counter()
        try:
            claimed = _claim_and_work(session, spec, report, began)
        except LostRace:
            report.lost_races += 1
            continue
        if not claimed:
            report.empty_polls += 1
            time.sleep(spec.poll_interval_s)
            continue
        signals.done[index] += 1


def _claim_and_work(
    session: Prepared, spec: WorkerSpec, report: WorkerReport, began: float
) -> bool:
    if spec.hold_lock:
        with session.transaction():
            job = claim_statements(session, spec)
            if job is not None:
                _record(report, job, began)
                _do_work(session, spec, job)
        return job is not None
    job = claim(session, spec)
    if job is not None:
        _record(report, job, began)
        _do_work(session, spec, job)
    return job is not None


def _record(report: WorkerReport, job: tuple[int, int], began: float) -> None:
    report.claims.append((job[0], job[1], (time.perf_counter() - began) * 1000))


def _do_work(session: Prepared, spec: WorkerSpec, job: tuple[int, int]) -> None:
    job_id, tenant_id = job
    work_ms = job_duration_ms(spec.seed, job_id, spec.durations[tenant_id])
    if work_ms > 0:  # sleep(0) still gives up the CPU: a 0 ms job does no work at all
        time.sleep(work_ms / 1000)
    complete(session, spec, job_id)


def claim(session: Prepared, spec: WorkerSpec) -> tuple[int, int] | None:
    """One claim transaction: (job id, tenant id), or None if no job is free.

    The statements of claim_statements, in the same transaction, with fewer round trips:
    BEGIN goes with the dequeue, and start (and retire) with the COMMIT. `served`, when
    the strategy has it, keeps a round trip of its own: a guard that changes no row must
    roll back before anything is committed. Nothing the server runs changes; the client
    waits for the network (and wakes up) two or three times fewer per claim."""
    row = _first_row(session.pipelined([b"begin", (spec.dequeue, spec.params)])[1])
    if row is None:
        session.pipelined([b"commit"])
        return None
    job_id, tenant_id = row
    params = {**spec.params, "job_id": job_id, "tenant_id": tenant_id}
    try:
        if spec.served is not None and session.changed(spec.served, params) == 0:
            raise LostRace()
        retire: list[Step] = [] if spec.retire is None else [(spec.retire, params)]
        started = session.pipelined([(spec.start, params), *retire, b"commit"])[0]
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            session.pipelined([b"rollback"])
        raise
    if started.command_tuples != 1:
        raise RuntimeError(f"job {job_id} was dequeued but could not be started")
    return job_id, tenant_id


def claim_statements(statements: Statements, spec: WorkerSpec) -> tuple[int, int] | None:
    """The claim's statements, inside whatever transaction the caller holds."""
    row = statements.row(spec.dequeue, spec.params)
    if row is None:
        return None
    job_id, tenant_id = row
    params = {**spec.params, "job_id": job_id, "tenant_id": tenant_id}
    # `served` before `start`: a guard there (a cap) decides before the job's started_at
    # is taken, so recorded intervals never overlap more than the guard allowed.
    if spec.served is not None and statements.changed(spec.served, params) == 0:
        raise LostRace()
    if statements.changed(spec.start, params) != 1:
        raise RuntimeError(f"job {job_id} was dequeued but could not be started")
    if spec.retire is not None:
        statements.changed(spec.retire, params)
    return job_id, tenant_id


def complete(statements: Statements, spec: WorkerSpec, job_id: int) -> None:
    updated = statements.changed(spec.complete, {**spec.params, "job_id": job_id})
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
