"""saq through its own code: its `PostgresQueue` (its tables made by its own migrations,
`connect`), its `enqueue` (many at once as its `map` does: `asyncio.gather` over
enqueues), its `Worker` with `concurrency` = the scenario's workers, on its psycopg pool,
every connection in the run's schema (search_path).

Mappings of tenants onto its knobs:
  one_queue   every job in one queue, no group
  group_key   each job's `group_key` is its tenant: "Only one job per group can be active
              at any time" (saq's Job docstring)
  processes   one queue, its Worker in as many processes as the machine has cores (saq's
              `--workers`), the scenario's workers dealt among them

Its dequeue takes up to as many jobs as the process has tasks waiting, in `priority,
scheduled` order (scheduled: whole seconds), skipping the groups with an active job; its
workers wake on LISTEN/NOTIFY (`saq:<queue>`, notified by every enqueue) and on a 1 s
`schedule` timer. The queue is named after the run's schema, so its channel and the rows
of its tables are the run's own, and its advisory locks' first key (saq_lock_keyspace) is
drawn from the schema's name.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import psycopg

from harness.queues.base import (
    Program,
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
from harness.server.connections import session_name

if TYPE_CHECKING:  # saq is imported where it runs: the catalog lists it uninstalled too
    from saq.types import Context

Mapping = Literal["one_queue", "group_key", "processes"]
MAPPINGS: dict[str, Mapping] = {  # strategy name -> mapping
    "saq": "one_queue",
    "saq_tuned": "processes",
    "saq_group_key": "group_key",
}
TASK = "harness_job"
ENQUEUE_CHUNK = 1_000  # enqueues gathered at once (its pool has up to 20 connections)


@dataclass(frozen=True)
class Spec(common.PythonSpec):
    mapping: Mapping


def _queue(spec: Spec) -> Any:
    """saq's queue on a pool made as saq makes its own (`from_url`), in the run's schema,
    which saq opens, sizes (4 to 20) and closes."""
    from psycopg_pool import AsyncConnectionPool
    from saq.queue.postgres import PostgresQueue

    pool = AsyncConnectionPool(
        common.schema_conninfo(spec, application_name=session_name()),
        check=AsyncConnectionPool.check_connection,
        open=False,
        configure=captures.pool_configure(spec.plans_file) if spec.plans_file else None,
    )
    return PostgresQueue(
        pool=pool,
        name=spec.site.schema,
        saq_lock_keyspace=zlib.crc32(spec.site.schema.encode()) & 0x7FFFFFFF,
        manage_pool_lifecycle=True,
    )


async def _enqueue_jobs(queue: Any, spec: Spec, jobs: list[common.Job]) -> None:
    """Many jobs at once, as saq's `map` enqueues them. Its per-job timeout (10 s by
    default) is off: the harness's timeout_s bounds a run, and a plan capture holds its
    jobs for as long as it lasts."""
    grouped = spec.mapping == "group_key"
    for first in range(0, len(jobs), ENQUEUE_CHUNK):
        await asyncio.gather(
            *(
                queue.enqueue(
                    TASK,
                    n=n,
                    t=t,
                    ms=ms,
                    group_key=str(t) if grouped else None,
                    timeout=0,
                    ttl=0,  # kept: the books read every finished job from saq_jobs
                )
                for n, t, ms in jobs[first : first + ENQUEUE_CHUNK]
            )
        )


@asynccontextmanager
async def _connected(spec: Spec) -> AsyncIterator[Any]:
    """saq's queue, connected: `connect` also makes its tables (its migrations)."""
    queue = _queue(spec)
    await queue.connect()
    try:
        yield queue
    finally:
        await queue.disconnect()


async def _install(spec: Spec) -> None:
    async with _connected(spec):
        pass  # its tables, made by `connect`, and nothing else


def enqueuer_main(index: int, spec: Spec, signals: Signals) -> None:
    common.run_enqueuer(index, signals, spec.schedule, lambda: _sending(spec))


@asynccontextmanager
async def _sending(spec: Spec) -> AsyncIterator[common.Enqueue]:
    async with _connected(spec) as queue:
        yield partial(_enqueue_jobs, queue, spec)


def worker_main(index: int, spec: Spec, signals: Signals) -> None:
    run_program(index, signals, lambda report: asyncio.run(_work(index, spec, signals, report)))


async def _work(index: int, spec: Spec, signals: Signals, report: WorkerReport) -> None:
    from saq import Worker

    # Its stop cancels the tasks still waiting for a job, with a warning each time.
    logging.getLogger("saq").setLevel(logging.ERROR)

    async def harness_job(ctx: Context, *, n: int, t: int, ms: float) -> None:
        if spec.hold:
            signals.holding[index] = n
            await common.wait_event(signals.stop)
        elif ms > 0:
            await asyncio.sleep(ms / 1000)

    async def finished(ctx: Context) -> None:
        """The task log, once saq has written the job complete (its after_process hook
        runs after the finish): the run ends when every job is, and no later."""
        job = ctx["job"]
        if job.status == "complete" and not spec.hold:
            kwargs = job.kwargs or {}
            run = TaskRun(kwargs["n"], kwargs["t"], str(job.key))
            common.record_run(report, signals, index, run)

    async with _connected(spec) as queue:
        worker = Worker(
            queue,
            functions=[(TASK, harness_job)],
            concurrency=spec.concurrency,
            after_process=finished,
        )
        worker.SIGNALS = []  # the harness ends its processes; Ctrl-C is the runner's
        signals.ready[index] = 1
        await common.wait_event(signals.start)
        if spec.hold:
            await asyncio.to_thread(common.await_turn, signals, index)
        running = asyncio.create_task(worker.start())
        await common.wait_event(signals.stop)
        await worker.stop()
        await running


def processes(workers: int) -> list[int]:
    """saq_tuned: the workers dealt among as many processes as there are cores."""
    return common.shares(workers, os.cpu_count() or 1)


class SaqQueue(LibraryQueue):
    label = "saq"
    ledger_block = "saq_ledger"
    fetch_marker = "SET status = 'active'"  # its dequeue, among a capture's statements

    def __init__(self, name: str, mapping: str, site: Site, inputs: RunInputs) -> None:
        super().__init__(name, site, inputs, Spec.of(site, inputs, mapping))

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        return worker_main, enqueuer_main

    def workers(self, count: int) -> list[Program]:
        shares = processes(count) if self.spec.mapping == "processes" else [count]
        return [
            Program("worker", worker_main, replace(self.spec, concurrency=share), f"saq-{slot}")
            for slot, share in enumerate(shares)
        ]

    def capture_workers(self, count: int, plans_file: str) -> list[Program]:
        """One process per fetch, each with one task: saq's dequeue takes as many jobs as
        tasks wait, so one task makes each fetch take one job."""
        spec = replace(self.spec, concurrency=1, plans_file=plans_file)
        return [
            Program("worker", worker_main, spec, f"saq-capture-{slot}") for slot in range(count)
        ]

    def install(self, conn: psycopg.Connection[Any]) -> None:
        asyncio.run(_install(self.spec))

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        common.load_through(_sending(self.spec), common.backlog_jobs(self.inputs, rows))
        common.analyze(conn)

    def provenance(self) -> dict[str, Any]:
        tuned = self.spec.mapping == "processes"
        return {
            **({TUNED: {"processes": "one per core, the workers shared"}} if tuned else {}),
            LIBRARY: "saq",
            "version": importlib.metadata.version("saq"),
            "driver": "PostgresQueue on psycopg_pool.AsyncConnectionPool (4 to 20 connections)",
            "mapping": self.spec.mapping,
            "settings": {
                "concurrency": "the scenario's workers"
                if self.spec.mapping != "processes"
                else f"the scenario's workers in up to {os.cpu_count()} processes",
                "wake_up": "LISTEN/NOTIFY (poll_interval 0, its default)",
                "timers_s": {"schedule": 1, "sweep": 60, "abort": 1, "worker_info": 10},
                "group_key": "tenant" if self.spec.mapping == "group_key" else None,
                "job_timeout_s": 0,
                "job_ttl_s": 0,
            },
        }


common.register_programs("saq", Spec, worker_main, enqueuer_main)


def entries() -> list[QueueEntry]:
    return common.library_entries(
        dict(MAPPINGS), SaqQueue, (PythonPackages(("saq", "psycopg_pool"), "libraries"),)
    )
