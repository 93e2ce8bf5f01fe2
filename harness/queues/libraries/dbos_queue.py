"""DBOS through its own code: its system tables in the run's schema (`DBOS.migrate` with
`schema`; the worker's `dbos_system_schema`), its SQL enqueue (`enqueue_workflow`, one
call per job in one statement per batch), its queue worker (`DBOS.launch`, then
`DBOS.register_queue` with `worker_concurrency` = the scenario's workers and
`polling_interval_sec` = the scenario's poll), and an async workflow that sleeps the job's
duration. Every connection is the harness's own (a SQLAlchemy engine over
harness.server.connections), so DBOS never builds a URL of the DSN but for its migration.

Mappings of tenants onto its knobs:
  one_queue           every job on the queue "harness", one global order
  partitioned         partition key = tenant, `partition_worker_concurrency` = the
                      worker's slots: partitioned, no tenant capped below the worker
  partitioned_capped  partition key = tenant, `partition_concurrency` = tenant_cap

DBOS polls: no notification wakes a queue's worker thread (1 s by default, here the
scenario's poll). Each poll of a queue without partition limits claims every free slot
in `priority, created_at` order; with limits it lists the partitions that have queued work
with a recursive loose index scan and tries them in a random order (docs/real-queues.md).

The queue is registered closed (a rate limit of 0 workflows an hour) at install, and the
worker opens it at the start signal by removing the limit: DBOS reads a queue's
configuration from its table on every poll, so the queue opens on the next poll, and
nothing is claimed before the clock starts.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import psycopg

from harness.queues.base import (
    ProgramMain,
    PythonPackages,
    QueueEntry,
    Signals,
    Site,
    TaskRun,
    WorkerReport,
)
from harness.queues.libraries import captures, common
from harness.queues.libraries.library import LibraryQueue
from harness.queues.process import run_program
from harness.queues.programs import TenantCap
from harness.scenario.inputs import RunInputs
from harness.scenario.workload import BacklogRows
from harness.server.connections import connect, session_name
from harness.server.dsn import password_for

Mapping = Literal["one_queue", "partitioned", "partitioned_capped"]
MAPPINGS: dict[str, Mapping] = {  # strategy name -> mapping
    "dbos": "one_queue",
    "dbos_partitioned": "partitioned",
    "dbos_partitioned_capped": "partitioned_capped",
}
APPLICATION = "tenant-queue-bench"
QUEUE = "harness"
WORKFLOW = "harness_job"
CLOSED_PERIOD_S = 3600.0  # the closed queue's limit: 0 workflows in an hour
POOL_SIZE = 20  # DBOS's default sys_db_pool_size
COMPLETION_WAIT_S = 10  # at the stop, for the outcomes of workflows that have just returned
QUEUE_THREAD_TIMEOUT_S = 10  # DBOS lists its queues every second
# The claims among a capture's statements: the one-queue (and per-partition) dequeue
# orders by created_at, is limited by the worker's free slots (DBOS's internal queue,
# polled alike, has no limit) and locks; the capped sweep of partitions picks each one's
# head in a lateral subquery (its listing of partitions, run while the queue is closed,
# has none).
CLAIM_MARKER = "created_at ASC LIMIT"
SWEEP_MARKER = "JOIN LATERAL"


@dataclass(frozen=True)
class Spec(common.PythonSpec):
    mapping: Mapping
    cap: TenantCap = 1  # partitioned_capped: each partition's partition_concurrency


def _queue_options(spec: Spec, slots: int) -> dict[str, Any]:
    """The queue as registered: `slots` workflows at once in this worker."""
    options: dict[str, Any] = {
        "worker_concurrency": slots,
        "polling_interval_sec": spec.poll_interval_s,
    }
    if spec.mapping == "partitioned":
        options["partition_worker_concurrency"] = slots
    if spec.mapping == "partitioned_capped":
        options["partition_concurrency"] = spec.cap
    return options


def _partition_settings(spec: Spec) -> dict[str, Any]:
    if spec.mapping == "partitioned":
        return {"queue_partition_key": "the tenant", "partition_worker_concurrency": "as above"}
    if spec.mapping == "partitioned_capped":
        return {"queue_partition_key": "the tenant", "partition_concurrency": spec.cap}
    return {}


def _engine(spec: Spec) -> Any:
    """A SQLAlchemy engine over the harness's connections (DBOS's pool settings); in a
    plan capture, with auto_explain in every session and its notices to the plans file."""
    import sqlalchemy

    dsn = _with_explain(spec.site.dsn) if spec.plans_file is not None else spec.site.dsn

    def creator() -> psycopg.Connection[Any]:
        conn = connect(dsn, schema=spec.site.schema, autocommit=False, connect_timeout=10)
        if spec.plans_file is not None:
            conn.add_notice_handler(captures.notice_handler(spec.plans_file))
        return conn

    return sqlalchemy.create_engine(
        "postgresql+psycopg://",
        creator=creator,
        pool_size=POOL_SIZE,
        max_overflow=0,
        pool_timeout=30,
        pool_pre_ping=True,
    )


def _with_explain(dsn: str) -> str:
    own = str(psycopg.conninfo.conninfo_to_dict(dsn).get("options") or "")
    options = f"{own} {captures.explain_options()}".strip()
    return psycopg.conninfo.make_conninfo(dsn, options=options)


def migration_url(dsn: str) -> str:
    """The DSN as the URL `DBOS.migrate` takes (it builds its own engine): a socket
    directory and the other libpq keywords as query parameters, the password libpq would
    send (from the DSN or its password file)."""
    from sqlalchemy.engine import URL

    info = {key: str(value) for key, value in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    host, port = info.pop("host", None), info.pop("port", None)
    user, database = info.pop("user", None), info.pop("dbname", None)
    info.pop("password", None)
    if host is not None and host.startswith("/"):
        info["host"], host = host, None
    info.setdefault("application_name", session_name())
    url = URL.create(
        "postgresql+psycopg",
        username=user,
        password=password_for(dsn),
        host=host,
        port=int(port) if port else None,
        database=database,
        query=info,
    )
    return url.render_as_string(hide_password=False)


def _install(spec: Spec) -> None:
    """Its tables migrated, and its queue registered closed: a worker's queue thread,
    which lists the queues as DBOS launches and then every second, starts at once."""
    from dbos import DBOS, DBOSClient

    url = migration_url(spec.site.dsn)
    DBOS.migrate(url, schema=spec.site.schema)
    client = DBOSClient(
        system_database_url=url, dbos_system_schema=spec.site.schema, application_name=APPLICATION
    )
    try:
        client.register_queue(QUEUE, **_queue_options(spec, spec.concurrency), limiter=_closed())
    finally:
        client.destroy()


def _closed() -> Any:
    """Its QueueRateLimit of a closed queue: no workflow starts until it is removed."""
    return {"limit": 0, "period": CLOSED_PERIOD_S}


def _enqueue(conn: psycopg.Connection[Any], spec: Spec, jobs: list[common.Job]) -> None:
    conn.execute(
        common.sql("dbos_enqueue"),  # type: ignore[arg-type]
        {
            "workflow": WORKFLOW,
            "queue": QUEUE,
            "partitioned": spec.mapping != "one_queue",
            "numbers": [number for number, _, _ in jobs],
            "tenants": [tenant for _, tenant, _ in jobs],
            "ms": [ms for _, _, ms in jobs],
        },
    )


def enqueuer_main(index: int, spec: Spec, signals: Signals) -> None:
    common.run_enqueuer(index, signals, spec.schedule, lambda: _sending(spec))


@asynccontextmanager
async def _sending(spec: Spec) -> AsyncIterator[common.Enqueue]:
    """DBOS's SQL enqueue (dbos_enqueue) on one connection, a batch a statement: the
    schedule's event loop waits for each, as an enqueuer's would."""
    with connect(spec.site.dsn, schema=spec.site.schema) as conn:

        async def enqueue(jobs: list[common.Job]) -> None:
            _enqueue(conn, spec, jobs)

        yield enqueue


def worker_main(index: int, spec: Spec, signals: Signals) -> None:
    run_program(index, signals, lambda report: _work(index, spec, signals, report))


def _work(index: int, spec: Spec, signals: Signals, report: WorkerReport) -> None:
    from dbos import DBOS

    DBOS(config=_config(spec))
    held = _register_workflow(index, spec, signals, report)
    DBOS.launch()
    try:
        slots = 1 if spec.hold else spec.concurrency
        closed: Any = {
            "limit": 0,
            "period": CLOSED_PERIOD_S,
        }  # its QueueRateLimit: opened at the start
        queue = DBOS.register_queue(QUEUE, **_queue_options(spec, slots), limiter=closed)
        _wait_for_queue_thread()
        signals.ready[index] = 1
        signals.start.wait()
        queue.set_limiter(None)
        if spec.hold:
            _grow_with_holds(queue, spec, signals, held)
        signals.stop.wait()
    finally:
        # Its outcome is written after a workflow returns: wait for the last ones to land.
        DBOS.destroy(destroy_registry=True, workflow_completion_timeout_sec=COMPLETION_WAIT_S)


def _config(spec: Spec) -> Any:
    return {
        "name": APPLICATION,
        "system_database_engine": _engine(spec),
        "dbos_system_schema": spec.site.schema,
        # "must be set to a unique value for each process" without its Conductor (its
        # queue tutorial): a fleet's members each run a worker process.
        "executor_id": f"{APPLICATION}-{socket.gethostname()}-{os.getpid()}",
        # Its INFO lines are per launch (executor, version, queues), none per workflow.
        "log_level": "WARNING",
    }


def _register_workflow(index: int, spec: Spec, signals: Signals, report: WorkerReport) -> list[int]:
    """The workflow every job runs; the count of held jobs (a plan capture's) it keeps."""
    from dbos import DBOS

    held = [0]

    @DBOS.workflow(name=WORKFLOW)
    async def harness_job(n: int, t: int, ms: float) -> None:
        workflow = DBOS.workflow_id or ""
        if spec.hold:
            held[0] += 1
            await common.wait_event(signals.stop)
        elif ms > 0:
            await asyncio.sleep(ms / 1000)
        common.record_run(report, signals, index, TaskRun(int(n), int(t), workflow))

    return held


def _wait_for_outcomes() -> None:
    """A workflow's outcome is written after it returns: the last ones, let land before
    DBOS is destroyed (which cancels what still runs). DBOS's own wait for it polls every
    second."""
    from dbos import DBOS

    deadline = time.monotonic() + COMPLETION_WAIT_S
    while time.monotonic() < deadline and DBOS.list_workflows(
        status="PENDING", queue_name=QUEUE, load_input=False, load_output=False
    ):
        time.sleep(common.STOP_POLL_S)


def _wait_for_queue_thread() -> None:
    """DBOS starts a queue's worker thread when its queue lister next sees the queue."""
    deadline = time.monotonic() + QUEUE_THREAD_TIMEOUT_S
    name = f"queue-worker-{QUEUE}"
    while not any(thread.name == name for thread in threading.enumerate()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"DBOS started no worker thread for queue {QUEUE}")
        time.sleep(0.01)


def _grow_with_holds(queue: Any, spec: Spec, signals: Signals, held: list[int]) -> None:
    """A plan capture's worker: one more slot each time a fetched job is held, so that
    each fetch claims one job with the jobs before it still running (DBOS claims every
    free slot at once)."""
    slots = 1
    while not signals.stop.is_set() and slots < spec.concurrency:
        if held[0] >= slots:
            slots += 1
            queue.set_worker_concurrency(slots)
            if spec.mapping == "partitioned":
                queue.set_partition_worker_concurrency(slots)
        time.sleep(common.STOP_POLL_S)


class DbosQueue(LibraryQueue):
    label = "dbos"
    ledger_block = "dbos_ledger"

    def __init__(self, name: str, mapping: str, site: Site, inputs: RunInputs) -> None:
        spec = Spec.of(site, inputs, mapping, cap=inputs.scenario.tenant_cap or 1)
        super().__init__(name, site, inputs, spec)
        capped = spec.mapping == "partitioned_capped" and spec.cap == 1
        # With partition_concurrency 1 DBOS sweeps the partitions in one statement, which
        # picks each one's head, and locks them in another; the sweep is its fetch.
        self.fetch_marker = SWEEP_MARKER if capped else CLAIM_MARKER
        self.fetch_locks = not capped

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        return worker_main, enqueuer_main

    def install(self, conn: psycopg.Connection[Any]) -> None:
        _install(self.spec)

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        self.spec = self.spec.serving(self.inputs, rows)
        _enqueue(conn, self.spec, common.backlog_jobs(self.inputs, rows))
        common.analyze(conn)

    def ledger_params(self) -> dict[str, Any]:
        return {"queue": QUEUE}

    def provenance(self) -> dict[str, Any]:
        return {
            "library": "dbos",
            "version": importlib.metadata.version("dbos"),
            "driver": "psycopg 3 through a SQLAlchemy engine of the harness's connections",
            "mapping": self.spec.mapping,
            "settings": {
                "system_schema": "the run's schema (dbos_system_schema)",
                "enqueue": "enqueue_workflow (its SQL function), one statement per batch",
                "worker_concurrency": "the scenario's workers",
                "polling_interval_sec": self.spec.poll_interval_s,
                **_partition_settings(self.spec),
                "sys_db_pool_size": POOL_SIZE,
                "workflow": "async, sleeps the job's duration",
            },
        }


common.register_programs("dbos", Spec, worker_main, enqueuer_main)


def entries() -> list[QueueEntry]:
    return common.library_entries(
        dict(MAPPINGS), DbosQueue, (PythonPackages(("dbos",), "libraries"),)
    )
