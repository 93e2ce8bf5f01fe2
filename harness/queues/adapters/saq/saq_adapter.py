"""saq through its own code, as an adapter of the contract (docs/adapters.md): its
`PostgresQueue` (its tables made by its own migrations, `connect`), its `enqueue` (many
at once as its `map` does: `asyncio.gather` over enqueues), its `Worker` with
`concurrency` = the process's share of the scenario's workers, on its psycopg pool,
every connection in the run's schema (search_path).

Mappings of tenants onto its knobs (saq.toml):
  one_queue   every job in one queue, no group
  group_key   each job's `group_key` is its tenant: "Only one job per group can be active
              at any time" (saq's Job docstring)
  processes   one queue; the manifest runs its Worker in a process per core (saq's
              `--workers`), the scenario's workers dealt among them
  one_queue_retried
              one queue, each job enqueued with `retries` (the option): a job its sweep
              finds without its worker's lock is retried rather than aborted

Its dequeue takes up to as many jobs as the queue has tasks waiting, in `priority,
scheduled` order (scheduled: whole seconds), skipping the groups with an active job; its
workers wake on LISTEN/NOTIFY (`saq:<queue>`, notified by every enqueue) and on a 1 s
`schedule` timer. The queue is named after the run's schema, so its channel and the rows
of its tables are the run's own, and its advisory locks' first key (saq_lock_keyspace) is
drawn from the schema's name.

In a plan capture each fetch is one Worker of concurrency 1 on a queue of its own (one
task waiting: each dequeue takes one job), started once the Workers before it hold
their jobs.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import sys
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import psycopg
from psycopg_pool import AsyncConnectionPool
from saq import Worker
from saq.queue.postgres import PostgresQueue
from saq.types import Context, PartialTimersDict

from harness.queues.adapters.python import kit

TASK = "harness_job"
ENQUEUE_CHUNK = 1_000  # enqueues gathered at once (its pool has up to 20 connections)
SQL = kit.sql_blocks(Path(__file__).with_name("saq.sql"))


def _grouped(config: kit.Config) -> bool:
    return bool(config["mapping"] == "group_key")


def _retries(config: kit.Config) -> int:
    """Each job's `retries`: its default, 1 (a swept job is aborted), or the option's."""
    return int(config["options"].get("retries", 1))


def _queue(config: kit.Config, out: kit.Out | None) -> PostgresQueue:
    """saq's queue on a pool made as saq makes its own (`from_url`), in the run's schema,
    which saq opens, sizes (4 to 20) and closes; in a capture, its plans sent to `out`."""
    pool = AsyncConnectionPool(
        kit.conninfo(config),
        check=AsyncConnectionPool.check_connection,
        open=False,
        configure=kit.pool_configure(out) if out is not None else None,
    )
    schema = config["schema"]
    return PostgresQueue(
        pool=pool,
        name=schema,
        saq_lock_keyspace=zlib.crc32(schema.encode()) & 0x7FFFFFFF,
        manage_pool_lifecycle=True,
    )


@asynccontextmanager
async def _connected(
    config: kit.Config, out: kit.Out | None = None
) -> AsyncIterator[PostgresQueue]:
    """saq's queue, connected: `connect` also makes its tables (its migrations). The
    server is reached once before: its pool would retry a failing connection for 30 s
    before it says why."""
    async with await psycopg.AsyncConnection.connect(kit.conninfo(config)):
        pass
    queue = _queue(config, out)
    await queue.connect()
    try:
        yield queue
    finally:
        await queue.disconnect()


# -- the roles ---------------------------------------------------------------------------


def versions(config: kit.Config) -> kit.Said:
    return kit.Said(
        versions={"saq": importlib.metadata.version("saq")},
        settings={
            "driver": "PostgresQueue on psycopg_pool.AsyncConnectionPool (4 to 20 connections)",
            "concurrency": "the scenario's workers, dealt among the processes its manifest runs",
            "wake_up": "LISTEN/NOTIFY (poll_interval 0, its default)",
            "timers_s": {"schedule": 1, "sweep": 60, "abort": 1, "worker_info": 10},
            "group_key": "tenant" if _grouped(config) else None,
            "retries": _retries(config),
            "job_timeout_s": "10 (its default; none for a plan capture's held jobs)",
            "job_ttl_s": "600 (its default: its sweep deletes a finished job 600 s after)",
        },
    )


def install(config: kit.Config) -> None:
    asyncio.run(_install(config))


async def _install(config: kit.Config) -> None:
    async with _connected(config):
        pass  # its tables, made by `connect`, and nothing else


@asynccontextmanager
async def enqueuer(config: kit.Config) -> AsyncIterator[kit.Enqueue]:
    async with _connected(config) as queue:

        async def enqueue(jobs: list[kit.Job]) -> None:
            await _enqueue_jobs(queue, _grouped(config), jobs, _retries(config))

        yield enqueue


async def _enqueue_jobs(
    queue: PostgresQueue, grouped: bool, jobs: list[kit.Job], retries: int = 1
) -> None:
    """Many jobs at once, as saq's `map` enqueues them, with its per-job timeout at its
    default (10 s): past it, a job is `stuck`, and stuck is what its sweep recovers (a
    job whose worker died is swept only so). A plan capture's workers hold their jobs
    past it: `_worker_of` exempts them."""
    for first in range(0, len(jobs), ENQUEUE_CHUNK):
        await asyncio.gather(
            *(
                queue.enqueue(
                    TASK,
                    n=n,
                    t=t,
                    ms=ms,
                    group_key=str(t) if grouped else None,
                    retries=retries,
                )
                for n, t, ms in jobs[first : first + ENQUEUE_CHUNK]
            )
        )


async def worker(config: kit.Config, work: kit.Work) -> None:
    """Its Worker (a Worker per fetch in a plan capture) from the start to the stop."""
    # Its stop cancels the tasks still waiting for a job, with a warning each time.
    logging.getLogger("saq").setLevel(logging.ERROR)
    async with AsyncExitStack() as stack:
        workers = await _workers(stack, config, work)
        work.ready()
        await work.started()
        running = [asyncio.create_task(_run(slot, w, work)) for slot, w in enumerate(workers)]
        await work.stopped(running)
        for each in workers:
            await stop_bounded(each)
        await asyncio.gather(*running)


RECANCEL_S = 10.0  # within the kit's STUCK_S (20 s) and the harness's bound (30 s)


async def stop_bounded(saq_worker: Worker[Context], recancel_s: float = RECANCEL_S) -> int:
    """saq's `Worker.stop`, with each of its tasks still running `recancel_s` later
    cancelled again; returns how many were.

    Its stop cancels its tasks and, with no shutdown grace (its default), waits for them
    without a bound (`asyncio.wait_for(gather, 0)`). On Python 3.11 `wait_for` drops a
    cancellation that arrives together with its result (bpo-42130, bpo-43389; 3.12 made
    `wait_for` anew): when a notification reaches a dequeue waiting on LISTEN as the stop
    cancels it, the dequeue goes on listening, and with `dequeue_timeout` 0 (its default)
    it never stops (saq#197). A second cancellation ends it as the first would have."""
    tasks = list(saq_worker.tasks)
    stopping = asyncio.ensure_future(saq_worker.stop())
    again = 0
    while not (await asyncio.wait({stopping}, timeout=recancel_s))[0]:
        late = [task for task in tasks if not task.done()]
        again += len(late)
        for task in late:
            task.cancel()
    stopping.result()
    if again:
        sys.stderr.write(
            f"saq_adapter: {again} task(s) still running {recancel_s:g} s after saq's "
            "Worker.stop, cancelled again (a cancellation lost in asyncio.wait_for)\n"
        )
    return again


async def _workers(
    stack: AsyncExitStack, config: kit.Config, work: kit.Work
) -> list[Worker[Context]]:
    """One Worker of all the process's slots; in a capture, one of concurrency 1 per
    fetch, each on a queue of its own, as a process of saq's would be."""
    slots = config["concurrency"]
    shares = [1] * slots if work.hold else [slots]
    out = work.out if config.get("explain_options") else None  # a capture's, a timed run's
    found: list[Worker[Context]] = []
    for share in shares:
        queue = await stack.enter_async_context(_connected(config, out))
        found.append(_worker_of(queue, share, work))
    return found


def moment(epoch_ms: int) -> datetime | None:
    """One of a saq job's moments (epoch milliseconds, 0 where it has none), as the
    ledger reads it from saq_jobs: the task log carries them, for the jobs saq's sweep
    deletes (its ttl) before the ledger reads its table."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC) if epoch_ms else None


def _worker_of(queue: PostgresQueue, concurrency: int, work: kit.Work) -> Worker[Context]:
    async def harness_job(ctx: Context, *, n: int, t: int, ms: float) -> None:
        if work.hold:
            await work.hold_job()
        else:
            work.begin(n, t, str(ctx["job"].key))
            if ms > 0:
                await asyncio.sleep(ms / 1000)

    async def finished(ctx: Context) -> None:
        """The task log, once saq has written the job complete (its after_process hook
        runs after the finish): the run ends when every job is, and no later."""
        job = ctx["job"]
        if job.status == "complete" and not work.hold:
            kwargs = job.kwargs or {}
            work.job(
                kwargs["n"],
                kwargs["t"],
                str(job.key),
                enqueued_at=moment(job.queued),
                started_at=moment(job.started),
                finished_at=moment(job.completed),
            )

    async def held_past_its_timeout(ctx: Context) -> None:
        """A plan capture's job is held until the stop: no timeout cuts it (saq reads the
        job's timeout after this hook)."""
        ctx["job"].timeout = 0

    saq_worker: Worker[Context] = Worker(
        queue,
        functions=[(TASK, harness_job)],
        concurrency=concurrency,
        before_process=held_past_its_timeout if work.hold else None,
        after_process=finished,
        # a capture's sweep would abort its held jobs once past their timeout: it sweeps
        # once, at the start, and not again within a day
        # (saq's PartialTimersDict inherits its keys as required: a cast says it)
        timers=cast(PartialTimersDict, {"sweep": 86_400}) if work.hold else None,
    )
    saq_worker.SIGNALS = []  # the harness ends its processes; Ctrl-C is the runner's
    return saq_worker


async def _run(slot: int, saq_worker: Worker[Context], work: kit.Work) -> None:
    """A Worker until the stop; in a capture, started once the slots before it hold
    their jobs, so that its one fetch runs with theirs running."""
    if work.hold:
        await work.turn(slot)
    if not work.stop.is_set():
        await saq_worker.start()


def ledger(config: kit.Config) -> Iterator[kit.Record]:
    return kit.ledger_records(config, SQL["saq_ledger"].sql)


if __name__ == "__main__":
    kit.serve(sys.modules[__name__])
