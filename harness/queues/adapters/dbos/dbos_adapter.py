"""DBOS through its own code, as an adapter of the contract (docs/adapters.md): its system
tables in the run's schema (`DBOS.migrate` with `schema`; the worker's
`dbos_system_schema`), its SQL enqueue (`enqueue_workflow`, one call per job in one
statement per batch, dbos.sql), its queue worker (`DBOS.launch`, then
`DBOS.register_queue` with `worker_concurrency` = the worker's slots and
`polling_interval_sec` = the scenario's poll), and an async workflow that sleeps the job's
duration. DBOS's system database is a SQLAlchemy engine over this process's own psycopg
connections (in the run's schema, auto_explain's options and the notice forwarder in a
plan capture), so DBOS never builds a URL of the connection but for its migration.

Mappings of tenants onto its knobs (dbos.toml):
  one_queue           every job on the queue "harness", one global order
  partitioned         partition key = tenant, `partition_worker_concurrency` = the
                      worker's slots: partitioned, no tenant capped below the worker
  partitioned_capped  partition key = tenant, `partition_concurrency` = tenant_cap
  one_queue_recovered one_queue, each worker process the same executor each time it is
                      started (the option `executor_id`): DBOS's launch recovers the
                      workflows that executor left pending

DBOS polls: no notification wakes a queue's worker thread (1 s by default, here the
scenario's poll). Each poll of a queue without partition limits claims every free slot
in `priority, created_at` order; with limits it lists the partitions that have queued work
with a recursive loose index scan and tries them in a random order (docs/libraries/dbos.md).

The queue is registered closed (a rate limit of 0 workflows an hour) at install, and the
worker opens it at the start by removing the limit: DBOS reads a queue's configuration
from its table on every poll, so the queue opens on the next poll, and nothing is claimed
before the clock starts.

A workflow's inputs are read as its row's `serialization` column says, whatever the
process configured: `py_pickle` would unpickle them, so anyone who can rewrite a row could
run code in the worker. The harness enqueues JSON (`portable_json`); the worker runs with
DBOS's JSON serializer and refuses every pickle (`refuse_pickles`): such a workflow is
recorded ERROR, never run.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import psycopg

from harness.queues.adapters.python import kit

if TYPE_CHECKING:
    from dbos._serialization import Serializer

MAPPINGS = ("one_queue", "partitioned", "partitioned_capped", "one_queue_recovered")
APPLICATION = "tenant-queue-bench"
QUEUE = "harness"
WORKFLOW = "harness_job"
CLOSED_PERIOD_S = 3600.0  # the closed queue's limit: 0 workflows in an hour
POOL_SIZE = 20  # DBOS's default sys_db_pool_size
COMPLETION_WAIT_S = 10  # at the stop, for the outcomes of workflows that have just returned
QUEUE_THREAD_TIMEOUT_S = 10  # DBOS lists its queues every second
POLL_S = 0.01
# With partition_concurrency 1 DBOS sweeps the partitions in one statement, which picks
# each one's head in a lateral subquery, and locks them in another: the sweep is its fetch
# (its listing of partitions, run while the queue is closed, has no LATERAL).
SWEEP = {"marker": "JOIN LATERAL", "locks": False}
SQL = kit.sql_blocks(Path(__file__).with_name("dbos.sql"))


def sql(block: str) -> str:
    return SQL[block].sql


def _mapping(config: kit.Config) -> str:
    mapping = str(config["mapping"])
    if mapping not in MAPPINGS:
        raise ValueError(f"dbos has no mapping {mapping[:40]!r}; it has {list(MAPPINGS)}")
    return mapping


def _sweeps_partitions(config: kit.Config) -> bool:
    return _mapping(config) == "partitioned_capped" and config["cap"] == 1


def _queue_options(config: kit.Config, slots: int) -> dict[str, Any]:
    """The queue as registered: `slots` workflows at once in this worker."""
    options: dict[str, Any] = {
        "worker_concurrency": slots,
        "polling_interval_sec": config["poll_interval_ms"] / 1000,
    }
    if _mapping(config) == "partitioned":
        options["partition_worker_concurrency"] = slots
    if _mapping(config) == "partitioned_capped":
        options["partition_concurrency"] = config["cap"]
    return options


def _partition_settings(config: kit.Config) -> dict[str, Any]:
    if _mapping(config) == "partitioned":
        return {"queue_partition_key": "the tenant", "partition_worker_concurrency": "as above"}
    if _mapping(config) == "partitioned_capped":
        return {"queue_partition_key": "the tenant", "partition_concurrency": config["cap"]}
    return {}


def _closed() -> Any:
    """Its QueueRateLimit of a closed queue: no workflow starts until it is removed."""
    return {"limit": 0, "period": CLOSED_PERIOD_S}


# -- connections ---------------------------------------------------------------------------


def _engine(config: kit.Config, out: kit.Out) -> Any:
    """A SQLAlchemy engine over this process's psycopg connections (DBOS's pool settings);
    in a plan capture, with auto_explain in every session and its notices forwarded."""
    import sqlalchemy

    def creator() -> psycopg.Connection[Any]:
        info = kit.conninfo(config, client_encoding="UTF8", connect_timeout=10)
        conn = psycopg.connect(info, autocommit=False)
        if config.get("explain_options"):
            conn.add_notice_handler(kit.notice_forwarder(out))
        return conn

    return sqlalchemy.create_engine(
        "postgresql+psycopg://",
        creator=creator,
        pool_size=POOL_SIZE,
        max_overflow=0,
        pool_timeout=30,
        pool_pre_ping=True,
    )


def migration_url(dsn: str) -> str:
    """The DSN as the URL `DBOS.migrate` takes (it builds its own engine): a socket
    directory and the other libpq keywords as query parameters."""
    from sqlalchemy.engine import URL

    info = {key: str(value) for key, value in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    host, port = info.pop("host", None), info.pop("port", None)
    user, database = info.pop("user", None), info.pop("dbname", None)
    password = info.pop("password", None)
    if host is not None and host.startswith("/"):
        info["host"], host = host, None
    url = URL.create(
        "postgresql+psycopg",
        username=user,
        password=password,
        host=host,
        port=int(port) if port else None,
        database=database,
        query=info,
    )
    return url.render_as_string(hide_password=False)


def _connect(config: kit.Config) -> psycopg.Connection[Any]:
    return psycopg.connect(kit.conninfo(config), autocommit=True)


# -- pickles refused -----------------------------------------------------------------------


class RefusedPickle:
    """DBOS's serializer of the name `py_pickle`, which never reads a pickle. What DBOS
    writes under that name (the refusal itself, as the failed workflow's error) is still
    its pickle: writing one runs nothing."""

    def name(self) -> str:
        return "py_pickle"

    def serialize(self, data: Any) -> str:
        from dbos._serialization import DefaultSerializer

        return DefaultSerializer().serialize(data)

    def deserialize(self, serialized_data: str) -> Any:
        raise TypeError("refused: a py_pickle row (the harness enqueues JSON only)")


def refuse_pickles() -> None:
    """DBOS reads a row whose `serialization` is `py_pickle` with its module's pickle
    serializer, whatever the process configured: that serializer, replaced by one that
    refuses to read."""
    from dbos import _datasource, _serialization

    refused = cast("Serializer", RefusedPickle())
    _serialization.DBOSDefaultSerializer = refused
    _datasource.DBOSDefaultSerializer = refused  # bound by name at its import


# -- the roles -----------------------------------------------------------------------------


def versions(config: kit.Config) -> kit.Said:
    return kit.Said(
        versions={"dbos": importlib.metadata.version("dbos")},
        settings={
            "driver": "psycopg 3 through a SQLAlchemy engine of the adapter's connections",
            "system_schema": "the run's schema (dbos_system_schema)",
            "enqueue": "enqueue_workflow (its SQL function), one statement per batch",
            "worker_concurrency": "the scenario's workers",
            "polling_interval_sec": config["poll_interval_ms"] / 1000,
            **_partition_settings(config),
            "sys_db_pool_size": POOL_SIZE,
            "workflow": "async, sleeps the job's duration",
            "serializer": "portable JSON (what enqueue_workflow writes); py_pickle refused",
            "executor_id": (
                "per worker process, the same when it is started again"
                if config["options"].get("executor_id") == "per_process"
                else "per process id: a worker started again is a new executor"
            ),
        },
        fetch=SWEEP if _sweeps_partitions(config) else None,
    )


def install(config: kit.Config) -> None:
    """Its tables migrated, and its queue registered closed: a worker's queue thread,
    which lists the queues as DBOS launches and then every second, starts at once."""
    from dbos import DBOS, DBOSClient

    url = migration_url(kit.conninfo(config, search_path=False))
    DBOS.migrate(url, schema=config["schema"])
    client = DBOSClient(
        system_database_url=url, dbos_system_schema=config["schema"], application_name=APPLICATION
    )
    try:
        options = _queue_options(config, config["concurrency"])
        client.register_queue(QUEUE, **options, limiter=_closed())
    finally:
        client.destroy()


def _enqueue_params(config: kit.Config, jobs: list[kit.Job]) -> dict[str, Any]:
    return {
        "workflow": WORKFLOW,
        "queue": QUEUE,
        "partitioned": _mapping(config) in ("partitioned", "partitioned_capped"),
        "numbers": [number for number, _, _ in jobs],
        "tenants": [tenant for _, tenant, _ in jobs],
        "ms": [ms for _, _, ms in jobs],
    }


@asynccontextmanager
async def enqueuer(config: kit.Config) -> AsyncIterator[kit.Enqueue]:
    """DBOS's SQL enqueue (dbos_enqueue) on one connection, a batch a statement."""
    conn = await psycopg.AsyncConnection.connect(kit.conninfo(config), autocommit=True)
    async with conn:

        async def enqueue(jobs: list[kit.Job]) -> None:
            await conn.execute(sql("dbos_enqueue"), _enqueue_params(config, jobs))  # type: ignore[arg-type]

        yield enqueue


async def worker(config: kit.Config, work: kit.Work) -> None:
    """DBOS launched on a thread without an event loop, as its own programs do: its
    workflows then run on its background loop, and its blocking calls block no loop."""
    await asyncio.to_thread(_work, config, work)


def _work(config: kit.Config, work: kit.Work) -> None:
    from dbos import DBOS

    refuse_pickles()
    DBOS(config=_dbos_config(config, work.out))
    held = _register_workflow(work)
    DBOS.launch()
    try:
        slots = 1 if work.hold else config["concurrency"]
        queue = DBOS.register_queue(QUEUE, **_queue_options(config, slots), limiter=_closed())
        _wait_for_queue_thread()
        work.ready()
        if _started(work):
            queue.set_limiter(None)
            if work.hold:
                _grow_with_holds(queue, config, work, held)
        work.stop.wait()
    finally:
        # Its outcome is written after a workflow returns: wait for the last ones to land.
        DBOS.destroy(destroy_registry=True, workflow_completion_timeout_sec=COMPLETION_WAIT_S)


def _executor_id(config: kit.Config) -> str:
    """ "Must be set to a unique value for each process" without its Conductor (its queue
    tutorial): a fleet's members each run a worker process. By the pid, so that a worker
    started again is a new executor; with the option `executor_id` = "per_process", by
    the worker process's number (and the run's schema), so that it is the same executor
    again and recovers the workflows it left pending."""
    host = socket.gethostname()
    if config["options"].get("executor_id") == "per_process":
        return f"{APPLICATION}-{host}-{config['schema']}-{config.get('process', 0)}"
    return f"{APPLICATION}-{host}-{os.getpid()}"


def _dbos_config(config: kit.Config, out: kit.Out) -> Any:
    from dbos._serialization import DBOSPortableJSON

    return {
        "name": APPLICATION,
        "system_database_engine": _engine(config, out),
        "dbos_system_schema": config["schema"],
        "executor_id": _executor_id(config),
        # Its INFO lines are per launch (executor, version, queues), none per workflow.
        "log_level": "WARNING",
        # The serialization enqueue_workflow writes: a row without one is read as JSON too.
        "serializer": DBOSPortableJSON,
    }


def _register_workflow(work: kit.Work) -> list[int]:
    """The workflow every job runs; the count of held jobs (a plan capture's) it keeps."""
    from dbos import DBOS

    held = [0]

    @DBOS.workflow(name=WORKFLOW)
    async def harness_job(n: int, t: int, ms: float) -> None:
        workflow = DBOS.workflow_id or ""
        if work.hold:
            held[0] += 1
            await work.hold_job()
        else:
            work.begin(int(n), int(t), workflow)
            if ms > 0:
                await asyncio.sleep(ms / 1000)
        work.job(int(n), int(t), workflow)

    return held


def _started(work: kit.Work) -> bool:
    """Until `start` (True) or a stop that comes first (False)."""
    while not (work.start.is_set() or work.stop.is_set()):
        time.sleep(POLL_S)
    return not work.stop.is_set()


def _wait_for_queue_thread() -> None:
    """DBOS starts a queue's worker thread when its queue lister next sees the queue."""
    deadline = time.monotonic() + QUEUE_THREAD_TIMEOUT_S
    name = f"queue-worker-{QUEUE}"
    while not any(thread.name == name for thread in threading.enumerate()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"DBOS started no worker thread for queue {QUEUE}")
        time.sleep(POLL_S)


def _grow_with_holds(queue: Any, config: kit.Config, work: kit.Work, held: list[int]) -> None:
    """A plan capture's worker: one more slot each time a fetched job is held, so that
    each fetch claims one job with the jobs before it still running (DBOS claims every
    free slot at once)."""
    slots = 1
    while not work.stop.is_set() and slots < config["concurrency"]:
        if held[0] >= slots:
            slots += 1
            queue.set_worker_concurrency(slots)
            if _mapping(config) == "partitioned":
                queue.set_partition_worker_concurrency(slots)
        time.sleep(POLL_S)


def ledger(config: kit.Config) -> Iterator[kit.Record]:
    return kit.ledger_records(config, sql("dbos_ledger"), {"queue": QUEUE})


if __name__ == "__main__":
    kit.serve(sys.modules[__name__])
