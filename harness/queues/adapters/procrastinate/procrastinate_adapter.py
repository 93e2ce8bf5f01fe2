"""procrastinate through its own code, as an adapter of the contract (docs/adapters.md):
its schema (`apply_schema_async`), its bulk defer (`batch_defer_jobs_async`), its `Worker`
with `concurrency` = the process's share of the scenario's workers, on the psycopg
connector, every connection in the run's schema (search_path).

Mappings of tenants onto its knobs (procrastinate.toml):
  one_queue, one_queue_tuned  every job in the queue "harness"
  lock_per_tenant             each job's `lock` is its tenant: at most one running job
                              per tenant
  queue_per_tenant            each tenant a queue; the worker reads all of them
                              (`queues=[...]`)
  one_queue_stalled_retried   one queue, and its how-to's periodic task that retries
                              the stalled jobs of workers without a heartbeat (the
                              option `retry_stalled_cron`: when it is deferred)
and the option `pool_spare`: the connections its pool keeps beyond the concurrency.

Its fetch (`procrastinate_fetch_job_v2`, plpgsql) takes one job per round trip in
`priority DESC, id` order; the worker wakes on LISTEN/NOTIFY and polls every
`fetch_job_polling_interval` (5 s by default, here the scenario's poll interval). Its
worker fetches one job at a time while it has a free slot, and the fetch itself marks
the job `doing`: in a plan capture, fetch k runs with the k - 1 jobs before it held
without the adapter taking turns.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import procrastinate
import psycopg
from procrastinate import jobs
from procrastinate.worker import Worker

from harness.queues.adapters.python import kit

TASK = "harness_job"
STALLED_TASK = "retry_stalled_jobs"  # its how-to's name for the periodic task
QUEUE = "harness"
# Its docs: the pool needs as many connections as the concurrency, plus one, for short
# jobs (the LISTEN connection is apart); the mappings at its defaults keep one more.
DEFAULT_POOL_SPARE = 2
SQL = kit.sql_blocks(Path(__file__).with_name("procrastinate.sql"))


@asynccontextmanager
async def _opened(config: kit.Config, **pool: Any) -> AsyncIterator[procrastinate.App]:
    """Its app on a pool of the run's connections, open. The server is reached once
    before: a pool that cannot connect retries for 30 s before it says why."""
    conninfo = kit.conninfo(config)
    async with await psycopg.AsyncConnection.connect(conninfo):
        pass
    connector = procrastinate.PsycopgConnector(conninfo=conninfo, **pool)
    app = procrastinate.App(connector=connector)
    async with app.open_async():
        yield app


def _pool_spare(config: kit.Config) -> int:
    return int(config["options"].get("pool_spare", DEFAULT_POOL_SPARE))


def _queue_of(config: kit.Config, tenant: int) -> str:
    return f"tenant-{tenant}" if config["mapping"] == "queue_per_tenant" else QUEUE


def _lock_of(config: kit.Config, tenant: int) -> str | None:
    return f"tenant-{tenant}" if config["mapping"] == "lock_per_tenant" else None


def _job(config: kit.Config, job: kit.Job) -> jobs.Job:
    number, tenant, ms = job
    return jobs.Job(
        queue=_queue_of(config, tenant),
        lock=_lock_of(config, tenant),
        queueing_lock=None,
        task_name=TASK,
        task_kwargs={"n": number, "t": tenant, "ms": ms},
    )


# -- the roles ---------------------------------------------------------------------------


def versions(config: kit.Config) -> kit.Said:
    return kit.Said(
        versions={"procrastinate": importlib.metadata.version("procrastinate")},
        settings={
            "driver": "PsycopgConnector (psycopg_pool.AsyncConnectionPool)",
            "concurrency": "the scenario's workers, dealt among the processes its manifest runs",
            "listen_notify": True,
            "fetch_job_polling_interval_s": config["poll_interval_ms"] / 1000,
            "pool_max_size": f"concurrency + {_pool_spare(config)}",
            "retry_stalled_cron": config["options"].get("retry_stalled_cron"),
        },
    )


def install(config: kit.Config) -> None:
    asyncio.run(_install(config))


async def _install(config: kit.Config) -> None:
    async with _opened(config, min_size=1, max_size=1) as app:
        await app.schema_manager.apply_schema_async()


@asynccontextmanager
async def enqueuer(config: kit.Config) -> AsyncIterator[kit.Enqueue]:
    """`batch_defer_jobs_async`, a batch a call, on a pool of one connection."""
    async with _opened(config, min_size=1, max_size=1) as app:

        async def defer(batch: list[kit.Job]) -> None:
            await app.job_manager.batch_defer_jobs_async([_job(config, job) for job in batch])

        yield defer


async def worker(config: kit.Config, work: kit.Work) -> None:
    """Its Worker from the start to the stop; each run of the task reported with its
    fetch's time."""
    concurrency = config["concurrency"]
    pool: dict[str, Any] = {"min_size": 1, "max_size": concurrency + _pool_spare(config)}
    if config.get("explain_options"):  # a plan capture, or a timed run's explained fetches
        pool["configure"] = kit.pool_configure(work.out)
    async with _opened(config, **pool) as app:
        _register_task(app, work, _timed_fetches(app))
        cron = config["options"].get("retry_stalled_cron")
        if cron is not None and not work.hold:
            _register_stalled_retry(app, str(cron))
        work.ready()
        await work.started()
        running_worker = Worker(app, **_worker_options(config))
        running = asyncio.create_task(running_worker.run())
        await work.stopped([running])  # its Worker stops itself when a side task fails
        running_worker.stop()
        await running


def _timed_fetches(app: procrastinate.App) -> kit.FetchTimes:
    """Its job manager's fetch, timed for each job it brings (the task's claim_ms)."""
    fetches = kit.FetchTimes()
    fetch = app.job_manager.fetch_job
    timed = fetches.wrap(fetch, lambda job: [str(job.id)] if job else [])
    app.job_manager.fetch_job = timed  # type: ignore[method-assign]
    return fetches


def _register_task(app: procrastinate.App, work: kit.Work, fetches: kit.FetchTimes) -> None:
    @app.task(name=TASK, pass_context=True)
    async def harness_job(context: Any, n: int, t: int, ms: float) -> None:
        if work.hold:
            await work.hold_job()
            return
        job_id = str(context.job.id)
        work.begin(n, t, job_id)
        if ms > 0:
            await asyncio.sleep(ms / 1000)
        work.job(n, t, job_id, claim_ms=fetches.claim_ms(job_id))


def _register_stalled_retry(app: procrastinate.App, cron: str) -> None:
    """Its how-to's task (docs, Retry stalled jobs), deferred as `cron` says: the jobs
    `doing` under a worker whose heartbeat is 30 s old or gone, retried. A worker reads
    every queue, so any takes it up; the ledger reads the harness's task's jobs only."""

    @app.periodic(cron=cron)
    @app.task(name=STALLED_TASK, queueing_lock=STALLED_TASK, pass_context=True, queue=QUEUE)
    async def retry_stalled_jobs(context: Any, timestamp: int) -> None:
        await retry_stalled(app)


async def retry_stalled(app: procrastinate.App) -> int:
    """The how-to task's body: each stalled job retried; how many were."""
    stalled = list(await app.job_manager.get_stalled_jobs())
    for job in stalled:
        await app.job_manager.retry_job(job)
    return len(stalled)


def _worker_options(config: kit.Config) -> dict[str, Any]:
    every_queue = [_queue_of(config, tenant) for tenant in config["tenants"]]
    return {
        "queues": every_queue if config["mapping"] == "queue_per_tenant" else None,
        "concurrency": config["concurrency"],
        "fetch_job_polling_interval": config["poll_interval_ms"] / 1000,
        "listen_notify": True,
        "install_signal_handlers": False,
        "wait": True,
    }


def ledger(config: kit.Config) -> Iterator[kit.Record]:
    return kit.ledger_records(config, SQL["procrastinate_ledger"].sql)


if __name__ == "__main__":
    kit.serve(sys.modules[__name__])
