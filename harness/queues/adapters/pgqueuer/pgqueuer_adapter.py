"""pgqueuer through its own code, as an adapter of the contract (docs/adapters.md): its
install (`Queries.install`), its bulk enqueue (`Queries.enqueue` with lists), its
`QueueManager.run` with `max_concurrent_tasks` = the worker's slots, on its asyncpg
driver (its psycopg driver waits for notifications on its one connection, for up to a
second at a time, and its queries wait behind that: 36 jobs of 5 ms took 17 s with it).
Every object is in the run's schema (`DBSettings.db_schema`) and its NOTIFY channel is
named after the run's schema, so a pgqueuer elsewhere on the server hears nothing of it.

Mappings of tenants onto its knobs (pgqueuer.toml):
  one_entrypoint         every job to the entrypoint "harness"
  entrypoint_per_tenant  each tenant an entrypoint, all registered on the worker
  concurrency_limit      an entrypoint per tenant, each `concurrency_limit` = tenant_cap

Its dequeue merges the registered entrypoints into one `priority DESC, id` order; the
limit is enforced in SQL (a slot per running job). It wakes on its trigger's NOTIFY and
re-polls after `dequeue_timeout` (here the scenario's poll interval).

The options of the `_tuned` mappings, as its docs and its benchmark (tools/benchmark.py)
run it: `event_loop` (uvloop, as its `pgq run`), `batch_size`, and `queue_managers` (at
most that many QueueManagers, each on a connection of its own and with at least
`tasks_per_manager` of the slots).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import shlex
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from harness.queues.adapters.python import kit

ENTRYPOINT = "harness"
MIN_DEQUEUE_POLL_S = 0.1  # its re-poll while work is known to be queued
SQL = kit.sql_blocks(Path(__file__).with_name("pgqueuer.sql"))
ENTRYPOINTS = {  # mapping -> how its jobs name their entrypoint
    "one_entrypoint": "one",
    "one_entrypoint_tuned": "one",
    "entrypoint_per_tenant": "per_tenant",
    "concurrency_limit": "limited",
    "concurrency_limit_tuned": "limited",
}


@dataclass(frozen=True)
class Setup:
    """How a mapping's worker runs pgqueuer: its entrypoints, each QueueManager's
    `max_concurrent_tasks` and batch, and its event loop."""

    entrypoints: str  # one, per_tenant, limited
    slots: int
    poll_s: float
    cap: int
    hold: bool
    event_loop: str = "asyncio"
    batch_option: int | None = None
    queue_managers: int = 1
    tasks_per_manager: int = 1

    @classmethod
    def of(cls, config: kit.Config) -> Setup:
        options, hold = config["options"], bool(config.get("hold"))
        return cls(
            entrypoints=ENTRYPOINTS[config["mapping"]],
            # pgqueuer takes at least twice its batch (1 in a capture): a capture's worker
            # has twice as many tasks as fetches.
            slots=config["concurrency"] * (2 if hold else 1),
            poll_s=config["poll_interval_ms"] / 1000,
            cap=config["cap"],
            hold=hold,
            event_loop=str(options.get("event_loop", "asyncio")),
            batch_option=options.get("batch_size"),
            queue_managers=int(options.get("queue_managers", 1)),
            tasks_per_manager=int(options.get("tasks_per_manager", 1)),
        )

    @property
    def manager_caps(self) -> list[int]:
        """Each QueueManager's max_concurrent_tasks: the slots, over as many managers as
        the options allow while each keeps `tasks_per_manager`."""
        managers = min(self.queue_managers, self.slots // self.tasks_per_manager)
        return kit.shares(self.slots, max(1, managers))

    def batch_size(self, cap: int) -> int:
        """pgqueuer refuses max_concurrent_tasks below twice batch_size: half a manager's
        tasks, or the option's batch where that fits; 1 in a capture, one job a fetch."""
        if self.hold:
            return 1
        if self.batch_option is None:
            return max(1, cap // 2)
        return max(1, min(int(self.batch_option), cap // 2))

    def entrypoint(self, tenant: int) -> str:
        return ENTRYPOINT if self.entrypoints == "one" else f"tenant-{tenant}"

    def names(self, tenants: list[int]) -> list[str]:
        return [ENTRYPOINT] if self.entrypoints == "one" else [f"tenant-{t}" for t in tenants]

    @property
    def limit(self) -> int:
        return self.cap if self.entrypoints == "limited" else 0


def _settings(config: kit.Config) -> Any:
    """Its names in the run's schema, its channel the run's own. The environment too: some
    of its modules read the process-wide settings rather than the ones passed in."""
    schema = config["schema"]
    os.environ["PGQUEUER_SCHEMA"] = schema
    os.environ["PGQUEUER_CHANNEL"] = f"{schema}_pgqueuer"
    from pgqueuer.domain.settings import DBSettings, db_settings
    from pgqueuer.domain.types import Channel

    db_settings.cache_clear()
    return DBSettings(db_schema=schema, channel=Channel(f"{schema}_pgqueuer"))


def asyncpg_arguments(config: kit.Config) -> dict[str, Any]:
    """The connection as asyncpg takes it (keywords: it reads no libpq key=value DSN); its
    `ssl` takes libpq's sslmode names; libpq's `options` (-c name=value) and the plan
    capture's auto_explain settings as its server_settings."""
    parts = config["connection"]
    names = {"host": "host", "port": "port", "user": "user", "password": "password"}
    names |= {"dbname": "database", "sslmode": "ssl"}
    arguments = {names[key]: parts[key] for key in names if parts.get(key) is not None}
    arguments.setdefault("database", None)
    settings = server_settings(parts.get("options"), config.get("explain_options"))
    if parts.get("application_name"):
        settings["application_name"] = parts["application_name"]
    if settings:
        arguments["server_settings"] = settings
    return arguments


def server_settings(*options: str | None) -> dict[str, str]:
    """libpq's `options` (`-c name=value`, `-cname=value`, `--name=value`) as a dict."""
    found: dict[str, str] = {}
    for words in (shlex.split(given) for given in options if given):
        flags = iter(words)
        for word in flags:
            setting = next(flags, "") if word == "-c" else word.removeprefix("-c")
            name, equals, value = setting.removeprefix("--").partition("=")
            if not equals or not word.startswith("-"):
                raise ValueError(f"libpq options: '{word}' is no -c name=value")
            found[name.replace("-", "_")] = value
    return found


async def _queries(config: kit.Config, work: kit.Work | None = None) -> tuple[Any, Any]:
    """pgqueuer's Queries on an asyncpg connection of their own; in a plan capture its
    plans forwarded (asyncpg hands notices to its log listeners)."""
    import asyncpg  # type: ignore[import-untyped]  # it ships no type hints
    from pgqueuer.adapters.persistence import qb
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    settings = _settings(config)
    conn = await asyncpg.connect(**asyncpg_arguments(config))
    if work is not None and config.get("explain_options"):
        out = work.out
        conn.add_log_listener(lambda _, message: out.plan(message.message))
    queries = Queries(
        AsyncpgDriver(conn),
        qbe=qb.QueryBuilderEnvironment(settings),
        qbq=qb.QueryQueueBuilder(settings),
        qbs=qb.QuerySchedulerBuilder(settings),
    )
    return conn, queries


@asynccontextmanager
async def _connected(config: kit.Config) -> AsyncIterator[Any]:
    """pgqueuer's Queries on a connection of their own, closed after."""
    conn, queries = await _queries(config)
    try:
        yield queries
    finally:
        await conn.close()


# -- the roles ---------------------------------------------------------------------------


def versions(config: kit.Config) -> kit.Said:
    setup = Setup.of(config)
    found = {name: importlib.metadata.version(name) for name in ("pgqueuer", "asyncpg")}
    if setup.event_loop == "uvloop":
        found["uvloop"] = importlib.metadata.version("uvloop")
    return kit.Said(versions=found, settings=_said_settings(setup))


def _said_settings(setup: Setup) -> dict[str, Any]:
    return {
        "driver": "AsyncpgDriver (one asyncpg connection per QueueManager)",
        "queue_managers": _managers_said(setup),
        "max_concurrent_tasks": "the scenario's workers, shared by the managers",
        "batch_size": _batch_said(setup),
        "event_loop": setup.event_loop,
        "dequeue_timeout_s": setup.poll_s,
        "min_dequeue_poll_interval_s": min(MIN_DEQUEUE_POLL_S, setup.poll_s),
        "concurrency_limit": setup.limit,
        "listen_notify": "always (its trigger's NOTIFY on the run's own channel)",
        "log_aggregation_interval_s": 0,
    }


def _batch_said(setup: Setup) -> str:
    if setup.batch_option is None:
        return "max(1, workers // 2) (at most half of max_concurrent_tasks)"
    if setup.batch_option == 1:
        return "1"
    return f"{setup.batch_option}, at most half a manager's max_concurrent_tasks"


def _managers_said(setup: Setup) -> str:
    if setup.queue_managers == 1:
        return "1"
    rule = f"workers // {setup.tasks_per_manager}, 1 to {setup.queue_managers}"
    return f"{rule}, one connection each"


def install(config: kit.Config) -> None:
    async def installing() -> None:
        async with _connected(config) as queries:
            await queries.install(create_schema=False)

    asyncio.run(installing())


@asynccontextmanager
async def enqueuer(config: kit.Config) -> AsyncIterator[kit.Enqueue]:
    """`Queries.enqueue` with lists, a batch a call, on one connection."""
    setup = Setup.of(config)
    async with _connected(config) as queries:

        async def enqueue(jobs: list[kit.Job]) -> None:
            await queries.enqueue(
                [setup.entrypoint(tenant) for _, tenant, _ in jobs],
                [json.dumps({"n": n, "t": t, "ms": ms}).encode() for n, t, ms in jobs],
                [0] * len(jobs),
            )

        yield enqueue


def event_loop(config: kit.Config) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The worker's event loop: uvloop where the options say (its `pgq run`'s)."""
    if Setup.of(config).event_loop != "uvloop" or config["role"] != "worker":
        return None
    import uvloop  # a dependency of pgqueuer's

    return uvloop.new_event_loop


async def worker(config: kit.Config, work: kit.Work) -> None:
    """Its QueueManagers, each on a connection of its own, every entrypoint registered,
    run from the start until the stop; then their connections closed."""
    setup = Setup.of(config)
    fetches = kit.FetchTimes()
    task = _task(work, fetches)
    managers = [await _manager(config, work, setup, task, fetches) for _ in setup.manager_caps]
    try:
        work.ready()
        await work.started()
        running = [
            asyncio.create_task(manager.run(**_run_options(setup, cap)))
            for (_, manager), cap in zip(managers, setup.manager_caps, strict=True)
        ]
        await work.stopped(running)
        for _, manager in managers:
            manager.shutdown.set()
        await asyncio.gather(*running)
    finally:
        for conn, _ in managers:
            await conn.close()


def _task(work: kit.Work, fetches: kit.FetchTimes) -> Callable[[Any], Any]:
    """The task of every entrypoint: the job's duration slept, its run reported with the
    dequeue that brought it; in a plan capture, the job held until the stop."""

    async def task(job: Any) -> None:
        if work.hold:
            await work.hold_job()
            return
        payload = json.loads(job.payload)
        job_id = str(job.id)
        if payload["ms"] > 0:
            await asyncio.sleep(payload["ms"] / 1000)
        work.job(payload["n"], payload["t"], job_id, claim_ms=fetches.claim_ms(job_id))

    return task


def _held_by(work: kit.Work) -> Callable[[Any], None] | None:
    """Each job its dequeue picked, said started: its QueueManager holds a batch picked
    ahead of its tasks (its heartbeat keeps them), and a worker killed holds them all.
    None in a plan capture, whose jobs are held to the end."""
    if work.hold:
        return None

    def held(jobs: Any) -> None:
        for job in jobs:
            payload = json.loads(job.payload)
            work.begin(payload["n"], payload["t"], str(job.id))

    return held


async def _manager(
    config: kit.Config, work: kit.Work, setup: Setup, task: Any, fetches: kit.FetchTimes
) -> tuple[Any, Any]:
    """A QueueManager on a connection of its own, every entrypoint registered, its
    dequeue timed (the claim latency)."""
    from pgqueuer.qm import QueueManager

    conn, queries = await _queries(config, work)
    queries.dequeue = fetches.wrap(
        queries.dequeue, lambda jobs: [str(job.id) for job in jobs], _held_by(work)
    )
    manager = QueueManager(queries, channel=_settings(config).channel)
    # Its re-poll while work is known to be queued, no longer than the scenario's poll.
    manager.min_dequeue_poll_interval = timedelta(seconds=min(MIN_DEQUEUE_POLL_S, setup.poll_s))
    for name in setup.names(config["tenants"]):
        manager.entrypoint(name, concurrency_limit=setup.limit)(task)
    return conn, manager


def _run_options(setup: Setup, cap: int) -> dict[str, Any]:
    return {
        "dequeue_timeout": timedelta(seconds=setup.poll_s),
        "batch_size": setup.batch_size(cap),
        "max_concurrent_tasks": cap,
        # Folding the log into statistics on a timer would mark the rows the ledger reads.
        "log_aggregation_interval": timedelta(0),
    }


def ledger(config: kit.Config) -> Iterator[kit.Record]:
    """pgqueuer_log's rows per job; a finished job's payload is gone with it, so its
    record names no job or tenant (the harness matches it to its run by pgqueuer's id)."""
    return kit.ledger_records(config, SQL["pgqueuer_ledger"].sql)


if __name__ == "__main__":
    kit.serve(sys.modules[__name__])
