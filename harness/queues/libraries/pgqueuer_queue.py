"""pgqueuer through its own code: its install (`Queries.install`), its bulk enqueue
(`Queries.enqueue` with lists), its `QueueManager.run` with `max_concurrent_tasks` = the
scenario's workers, on its asyncpg driver (its psycopg driver waits for notifications
on its one connection, for up to a second at a time, and its queries wait behind that:
36 jobs of 5 ms took 17 s with it). Every object is in the run's schema
(`DBSettings.db_schema`) and its NOTIFY channel is named after the run's schema, so a
pgqueuer elsewhere on the server hears nothing of it.

Mappings of tenants onto its knobs:
  one_entrypoint         every job to the entrypoint "harness"
  entrypoint_per_tenant  each tenant an entrypoint, all registered on the worker
  concurrency_limit      an entrypoint per tenant, each `concurrency_limit` = tenant_cap

Its dequeue merges the registered entrypoints into one `priority DESC, id` order; the
limit is enforced in SQL (a slot per running job). It wakes on its trigger's NOTIFY and
re-polls after `dequeue_timeout` (here the scenario's poll interval).

The `_tuned` mappings run as its docs and its benchmark (tools/benchmark.py) do: on
uvloop (its `pgq run`), with its default batch of 10 and up to five QueueManagers on
connections of their own; under a concurrency limit with a batch of 1, which frees a
capped slot at each completion rather than every 0.1 s (docs/real-queues.md).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
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
from harness.results.document import LIBRARY, TUNED
from harness.scenario.inputs import RunInputs
from harness.scenario.workload import BacklogRows

Mapping = Literal["one_entrypoint", "entrypoint_per_tenant", "concurrency_limit"]
MAPPINGS: dict[str, Mapping] = {  # strategy name -> mapping
    "pgqueuer": "one_entrypoint",
    "pgqueuer_entrypoint_per_tenant": "entrypoint_per_tenant",
    "pgqueuer_concurrency_limit": "concurrency_limit",
}
TUNED_MAPPINGS: dict[str, Mapping] = {  # its docs' and its benchmark's settings
    "pgqueuer_tuned": "one_entrypoint",
    "pgqueuer_concurrency_limit_tuned": "concurrency_limit",
}
ENTRYPOINT = "harness"
TUNED_BATCH = 10  # its own default batch_size, and its benchmark's
TUNED_MANAGERS = 5  # tools/benchmark.py --dequeue: QueueManagers, each its own connection


@dataclass(frozen=True)
class Spec(common.PythonSpec):
    mapping: Mapping
    cap: TenantCap = 1  # concurrency_limit: each entrypoint's
    tuned: bool = False

    @property
    def manager_caps(self) -> list[int]:
        """Each QueueManager's max_concurrent_tasks: the process's workers, over one
        manager, or tuned over as many as its benchmark runs (5) while each keeps room for
        a full batch twice (pgqueuer's rule)."""
        managers = min(TUNED_MANAGERS, self.concurrency // (2 * TUNED_BATCH)) if self.tuned else 1
        return common.shares(self.concurrency, max(1, managers))

    def batch_size(self, cap: int) -> int:
        """pgqueuer refuses max_concurrent_tasks below twice batch_size. Tuned: its default
        batch of 10 ("increase it when jobs are short-lived"), or 1 under a concurrency
        limit (a slot is freed when the completion buffer flushes, every batch_size
        completions: "decrease it ... for finer concurrency control")."""
        if self.plans_file is not None:
            return 1
        if self.tuned:
            return 1 if self.mapping == "concurrency_limit" else min(TUNED_BATCH, cap // 2)
        return max(1, cap // 2)

    @property
    def entrypoints(self) -> list[str]:
        if self.mapping == "one_entrypoint":
            return [ENTRYPOINT]
        return [f"tenant-{tenant}" for tenant in self.tenants]

    def entrypoint(self, tenant: int) -> str:
        return ENTRYPOINT if self.mapping == "one_entrypoint" else f"tenant-{tenant}"


def _settings(spec: Spec) -> Any:
    """Its names in the run's schema, its channel the run's own. The environment too: some
    of its modules read the process-wide settings rather than the ones passed in."""
    os.environ["PGQUEUER_SCHEMA"] = spec.site.schema
    os.environ["PGQUEUER_CHANNEL"] = f"{spec.site.schema}_pgqueuer"
    from pgqueuer.domain.settings import DBSettings, db_settings
    from pgqueuer.domain.types import Channel

    db_settings.cache_clear()
    return DBSettings(db_schema=spec.site.schema, channel=Channel(f"{spec.site.schema}_pgqueuer"))


async def _queries(spec: Spec) -> tuple[Any, Any]:
    import asyncpg  # type: ignore[import-untyped]  # it ships no type hints
    from pgqueuer.adapters.persistence import qb
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    settings = _settings(spec)
    arguments = asyncpg_arguments(spec.site.dsn)
    if spec.plans_file is not None:
        arguments["server_settings"] = captures.EXPLAIN_SETTINGS
    conn = await asyncpg.connect(**arguments)
    if spec.plans_file is not None:
        path = spec.plans_file
        conn.add_log_listener(lambda _, message: captures.append_notice(path, message.message))
    queries = Queries(
        AsyncpgDriver(conn),
        qbe=qb.QueryBuilderEnvironment(settings),
        qbq=qb.QueryQueueBuilder(settings),
        qbs=qb.QuerySchedulerBuilder(settings),
    )
    return conn, queries


def asyncpg_arguments(dsn: str) -> dict[str, Any]:
    """The DSN as asyncpg takes it (keywords; it reads URLs, not libpq's key=value form);
    its `ssl` takes libpq's sslmode names, its `passfile` libpq's password file."""
    names = {"host": "host", "port": "port", "user": "user", "password": "password"}
    names |= {"dbname": "database", "sslmode": "ssl", "passfile": "passfile"}
    arguments = common.dsn_keywords(dsn, names)
    arguments.setdefault("database", None)
    return arguments


@asynccontextmanager
async def _connected(spec: Spec) -> AsyncIterator[Any]:
    """pgqueuer's Queries on a connection of their own, closed after."""
    conn, queries = await _queries(spec)
    try:
        yield queries
    finally:
        await conn.close()


async def _install(spec: Spec) -> None:
    async with _connected(spec) as queries:
        await queries.install(create_schema=False)


async def _enqueue_jobs(queries: Any, spec: Spec, jobs: list[common.Job]) -> None:
    await queries.enqueue(
        [spec.entrypoint(tenant) for _, tenant, _ in jobs],
        [json.dumps({"n": n, "t": t, "ms": ms}).encode() for n, t, ms in jobs],
        [0] * len(jobs),
    )


@asynccontextmanager
async def _sending(spec: Spec) -> AsyncIterator[common.Enqueue]:
    async with _connected(spec) as queries:
        yield partial(_enqueue_jobs, queries, spec)


def enqueuer_main(index: int, spec: Spec, signals: Signals) -> None:
    common.run_enqueuer(index, signals, spec.schedule, lambda: _sending(spec))


def worker_main(index: int, spec: Spec, signals: Signals) -> None:
    def body(report: WorkerReport) -> None:
        work = _work(index, spec, signals, report)
        if spec.tuned:
            import uvloop  # a dependency of pgqueuer's, whose `pgq run` runs on it

            uvloop.run(work)
        else:
            asyncio.run(work)

    run_program(index, signals, body)


async def _work(index: int, spec: Spec, signals: Signals, report: WorkerReport) -> None:
    fetches = common.FetchTimes()

    async def task(job: Any) -> None:
        payload = json.loads(job.payload)
        if spec.hold:
            await common.wait_event(signals.stop)
        elif payload["ms"] > 0:
            await asyncio.sleep(payload["ms"] / 1000)
        job_id = str(job.id)
        run = TaskRun(payload["n"], payload["t"], job_id, claim_ms=fetches.claim_ms(job_id))
        common.record_run(report, signals, index, run)

    managers = [await _manager(spec, task, fetches) for _ in spec.manager_caps]
    signals.ready[index] = 1
    await common.wait_event(signals.start)
    running = [
        asyncio.create_task(manager.run(**_run_options(spec, cap)))
        for (_, manager), cap in zip(managers, spec.manager_caps, strict=True)
    ]
    await common.wait_event(signals.stop)
    for _, manager in managers:
        manager.shutdown.set()
    await asyncio.gather(*running)
    for conn, _ in managers:
        await conn.close()


async def _manager(spec: Spec, task: Any, fetches: common.FetchTimes) -> tuple[Any, Any]:
    """A QueueManager on a connection of its own, every entrypoint registered, its
    dequeue timed (the claim latency)."""
    from pgqueuer.qm import QueueManager

    conn, queries = await _queries(spec)
    queries.dequeue = fetches.wrap(queries.dequeue, lambda jobs: [str(job.id) for job in jobs])
    manager = QueueManager(queries, channel=_settings(spec).channel)
    # Its re-poll while work is known to be queued (0.1 s), no longer than the scenario's.
    manager.min_dequeue_poll_interval = timedelta(seconds=min(0.1, spec.poll_interval_s))
    limit = spec.cap if spec.mapping == "concurrency_limit" else 0
    for name in spec.entrypoints:
        manager.entrypoint(name, concurrency_limit=limit)(task)
    return conn, manager


def _run_options(spec: Spec, cap: int) -> dict[str, Any]:
    return {
        "dequeue_timeout": timedelta(seconds=spec.poll_interval_s),
        "batch_size": spec.batch_size(cap),
        "max_concurrent_tasks": cap,
        # Folding the log into statistics on a timer would mark the rows the ledger reads.
        "log_aggregation_interval": timedelta(0),
    }


class PgqueuerQueue(LibraryQueue):
    label = "pgqueuer"
    ledger_block = "pgqueuer_ledger"
    fetch_marker = "SET status = 'picked'"  # its fetch, among a capture's

    def __init__(
        self, name: str, mapping: str, site: Site, inputs: RunInputs, tuned: bool = False
    ) -> None:
        cap = inputs.scenario.tenant_cap or 1
        super().__init__(name, site, inputs, Spec.of(site, inputs, mapping, cap=cap, tuned=tuned))

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        return worker_main, enqueuer_main

    def capture_concurrency(self, fetches: int) -> int:
        """pgqueuer takes at least twice its batch size: the batch is 1, the tasks twice
        the fetches."""
        return 2 * fetches

    def install(self, conn: psycopg.Connection[Any]) -> None:
        asyncio.run(_install(self.spec))

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        self.spec = self.spec.serving(self.inputs, rows)
        common.load_through(_sending(self.spec), common.backlog_jobs(self.inputs, rows))
        common.analyze(conn)

    def provenance(self) -> dict[str, Any]:
        provenance = {
            LIBRARY: "pgqueuer",
            "version": importlib.metadata.version("pgqueuer"),
            "driver": "AsyncpgDriver (one asyncpg connection per QueueManager)",
            "mapping": self.spec.mapping,
            "settings": {
                "queue_managers": self._managers(),
                "max_concurrent_tasks": "the scenario's workers, shared by the managers",
                "batch_size": self._batch(),
                "event_loop": "uvloop" if self.spec.tuned else "asyncio",
                "dequeue_timeout_s": self.spec.poll_interval_s,
                "min_dequeue_poll_interval_s": min(0.1, self.spec.poll_interval_s),
                "concurrency_limit": self.spec.cap
                if self.spec.mapping == "concurrency_limit"
                else 0,
                "listen_notify": "always (its trigger's NOTIFY on the run's own channel)",
                "log_aggregation_interval_s": 0,
            },
        }
        if self.spec.tuned:
            provenance[TUNED] = {
                "batch_size": self._batch(),
                "queue_managers": self._managers(),
                "event_loop": "uvloop",
            }
        return provenance

    def _batch(self) -> str:
        if not self.spec.tuned:
            return "max(1, workers // 2) (at most half of max_concurrent_tasks)"
        if self.spec.mapping == "concurrency_limit":
            return "1"
        return f"{TUNED_BATCH}, at most half a manager's max_concurrent_tasks"

    def _managers(self) -> str:
        if not self.spec.tuned:
            return "1"
        return f"workers // {2 * TUNED_BATCH}, 1 to {TUNED_MANAGERS}, one connection each"


common.register_programs("pgqueuer", Spec, worker_main, enqueuer_main)


def entries() -> list[QueueEntry]:
    requires = (PythonPackages(("pgqueuer", "asyncpg"), "libraries"),)
    tuned = partial(PgqueuerQueue, tuned=True)
    return [
        *common.library_entries(dict(MAPPINGS), PgqueuerQueue, requires),
        *common.library_entries(dict(TUNED_MAPPINGS), tuned, requires),
    ]
