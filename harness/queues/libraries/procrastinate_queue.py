"""procrastinate through its own code: its schema (`apply_schema_async`), its bulk defer
(`batch_defer_jobs_async`), its `Worker` with `concurrency` = the scenario's workers, on
the psycopg connector, every connection in the run's schema (search_path).

Mappings of tenants onto its knobs:
  one_queue         every job in the queue "harness"
  lock_per_tenant   each job's `lock` is its tenant: at most one running job per tenant
  queue_per_tenant  each tenant a queue; the worker reads all of them (`queues=[...]`)

Its fetch (`procrastinate_fetch_job_v2`, plpgsql) takes one job per round trip in
`priority DESC, id` order; the worker wakes on LISTEN/NOTIFY and polls every
`fetch_job_polling_interval` (5 s by default, here the scenario's poll interval).

`procrastinate_tuned` is the one queue as its docs recommend for throughput: several
worker processes (its "launch multiple workers, each using their own process"), each
with async concurrency and a pool of concurrency + 1 connections (docs/real-queues.md).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
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
from harness.results.document import LIBRARY, TUNED
from harness.scenario.inputs import RunInputs
from harness.scenario.workload import BacklogRows

Mapping = Literal["one_queue", "lock_per_tenant", "queue_per_tenant"]
MAPPINGS: dict[str, Mapping] = {  # strategy name -> mapping
    "procrastinate": "one_queue",
    "procrastinate_lock_per_tenant": "lock_per_tenant",
    "procrastinate_queue_per_tenant": "queue_per_tenant",
}
TUNED_MAPPINGS: dict[str, Mapping] = {"procrastinate_tuned": "one_queue"}  # its docs' settings
TASK = "harness_job"
QUEUE = "harness"
# Its docs: the pool needs as many connections as the concurrency, plus one, for short
# jobs (the LISTEN connection is apart); the default mapping keeps one spare more.
POOL_SPARE = {False: 2, True: 1}


@dataclass(frozen=True)
class Spec(common.PythonSpec):
    """procrastinate's programs need nothing beyond what every Python library's do."""

    mapping: Mapping
    tuned: bool = False


def tuned_processes(workers: int) -> int:
    """Its docs' first advice for throughput: more worker processes. One per processor,
    never more than the workers."""
    return min(workers, processors())


def processors() -> int:
    return os.cpu_count() or 1


def _app(spec: Spec, **pool: Any) -> Any:
    import procrastinate

    options = f"-c search_path={spec.site.schema}"
    if spec.plans_file is not None:
        options += " " + captures.explain_options()
        pool["configure"] = captures.pool_configure(spec.plans_file)
    connector = procrastinate.PsycopgConnector(
        conninfo=spec.site.dsn, kwargs={"options": options}, **pool
    )
    return procrastinate.App(connector=connector)


def _queue_of(spec: Spec, tenant: int) -> str:
    return f"tenant-{tenant}" if spec.mapping == "queue_per_tenant" else QUEUE


def _job(spec: Spec, job: common.Job) -> Any:
    from procrastinate import jobs

    number, tenant, ms = job
    return jobs.Job(
        queue=_queue_of(spec, tenant),
        lock=f"tenant-{tenant}" if spec.mapping == "lock_per_tenant" else None,
        queueing_lock=None,
        task_name=TASK,
        task_kwargs={"n": number, "t": tenant, "ms": ms},
    )


async def _install(spec: Spec) -> None:
    app = _app(spec, min_size=1, max_size=1)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


def enqueuer_main(index: int, spec: Spec, signals: Signals) -> None:
    common.run_enqueuer(index, signals, spec.schedule, lambda: _sending(spec))


@asynccontextmanager
async def _sending(spec: Spec) -> AsyncIterator[common.Enqueue]:
    app = _app(spec, min_size=1, max_size=1)
    async with app.open_async():

        async def defer(jobs: list[common.Job]) -> None:
            await app.job_manager.batch_defer_jobs_async([_job(spec, job) for job in jobs])

        yield defer


def worker_main(index: int, spec: Spec, signals: Signals) -> None:
    run_program(index, signals, lambda report: asyncio.run(_work(index, spec, signals, report)))


async def _work(index: int, spec: Spec, signals: Signals, report: WorkerReport) -> None:
    from procrastinate.worker import Worker

    app = _app(spec, min_size=1, max_size=spec.concurrency + POOL_SPARE[spec.tuned])
    fetches = common.FetchTimes()
    manager = app.job_manager
    manager.fetch_job = fetches.wrap(manager.fetch_job, lambda job: [str(job.id)] if job else [])

    @app.task(name=TASK, pass_context=True)
    async def harness_job(context: Any, n: int, t: int, ms: float) -> None:
        if spec.hold:
            await common.wait_event(signals.stop)
        elif ms > 0:
            await asyncio.sleep(ms / 1000)
        job_id = str(context.job.id)
        run = TaskRun(n, t, job_id, claim_ms=fetches.claim_ms(job_id))
        common.record_run(report, signals, index, run)

    async with app.open_async():
        signals.ready[index] = 1
        await common.wait_event(signals.start)
        worker = Worker(app, **_worker_options(spec))
        running = asyncio.create_task(worker.run())
        await common.wait_event(signals.stop)
        worker.stop()
        await running


def _worker_options(spec: Spec) -> dict[str, Any]:
    queues = (
        [_queue_of(spec, t) for t in spec.tenants] if spec.mapping == "queue_per_tenant" else None
    )
    return {
        "queues": queues,
        "concurrency": spec.concurrency,
        "fetch_job_polling_interval": spec.poll_interval_s,
        "listen_notify": True,
        "install_signal_handlers": False,
        "wait": True,
    }


class ProcrastinateQueue(LibraryQueue):
    label = "procrastinate"
    ledger_block = "procrastinate_ledger"
    fetch_marker = "FOR UPDATE OF jobs SKIP LOCKED"  # its fetch, among a capture's

    def __init__(
        self, name: str, mapping: str, site: Site, inputs: RunInputs, tuned: bool = False
    ) -> None:
        super().__init__(name, site, inputs, Spec.of(site, inputs, mapping, tuned=tuned))

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        return worker_main, enqueuer_main

    def processes(self, count: int) -> int:
        return tuned_processes(count) if self.spec.tuned else 1

    def install(self, conn: psycopg.Connection[Any]) -> None:
        asyncio.run(_install(self.spec))

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        self.spec = self.spec.serving(self.inputs, rows)
        common.load_through(_sending(self.spec), common.backlog_jobs(self.inputs, rows))
        common.analyze(conn)

    def provenance(self) -> dict[str, Any]:
        spare = POOL_SPARE[self.spec.tuned]
        provenance = {
            LIBRARY: "procrastinate",
            "version": importlib.metadata.version("procrastinate"),
            "connector": "PsycopgConnector (psycopg_pool.AsyncConnectionPool)",
            "mapping": self.spec.mapping,
            "settings": {
                "processes": "one per processor, at most the workers" if self.spec.tuned else 1,
                "concurrency": "the scenario's workers, shared by the processes",
                "listen_notify": True,
                "fetch_job_polling_interval_s": self.spec.poll_interval_s,
                "pool_max_size": f"concurrency + {spare}",
            },
        }
        if self.spec.tuned:
            provenance[TUNED] = {"processes": processors(), "pool_max_size": "concurrency + 1"}
        return provenance


common.register_programs("procrastinate", Spec, worker_main, enqueuer_main)


def entries() -> list[QueueEntry]:
    requires = (PythonPackages(("procrastinate",), "libraries"),)
    tuned = partial(ProcrastinateQueue, tuned=True)
    return [
        *common.library_entries(dict(MAPPINGS), ProcrastinateQueue, requires),
        *common.library_entries(dict(TUNED_MAPPINGS), tuned, requires),
    ]
