"""awa (the awa-pg wheel: Python over awa's Rust runtime) through its own code, as an
adapter of the contract (docs/adapters.md): its migrations (`migrate`, then
`awa.storage_auto_finalize_if_fresh`, the post-migrate step its docs give external
tooling, so that the queue storage is active before the first worker), its COPY enqueue
(`enqueue_many_copy`), its worker runtime (`AsyncClient.start`) with the worker's slots,
and an async handler that sleeps the job's duration.

awa keeps everything in a schema of its own named `awa` (its migrations write `awa.` into
every statement): it cannot be confined to the run's schema, so its manifest declares it
(`outside_schemas`), and the harness refuses to run where one exists that it did not
make, makes it afresh with every repetition and drops it at the end.

Mappings of tenants onto its knobs (awa.toml):
  one_queue        every job on the queue "harness", `max_workers` = the worker's slots
  weighted_queues  a queue per tenant, each `weight` = its tenant's (config `weights`), in
                   awa's weighted mode (`global_max_workers` = the worker's slots,
                   `min_workers` 0): workers shared by weighted fair share among the
                   queues with work
and the options `poll_interval_ms` (its dispatchers' poll, else the scenario's) and
`max_connections_per_queue`, `max_connections_base` (its pool, its docs' rule
`num_queues * 4 + 20`; else its default of 10).

Its worker runtime runs a dispatcher per queue, woken by LISTEN/NOTIFY on `awa:<queue>`,
by a slot its queue frees, and by its poll. Each dispatcher holds a connection of its own
for its LISTEN: a queue per tenant needs a connection per tenant, and the install refuses
a mapping the server has too few connections for. The queues are paused at install
(`pause_queue`) and resumed at the start, so the runtime starts before the clock and
claims nothing before it. Its driver (sqlx) keeps the server's notices to itself: a plan
capture's worker connects through a relay that hands them over
(python/notice_relay.py).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from harness.queues.adapters.python import kit, notice_relay

KIND = "harness_job"
QUEUE = "harness"
DEFAULT_POOL = 10  # AsyncClient's max_connections
# Connections its runtime holds beyond one per queue (each dispatcher's LISTEN), measured:
# 25 with 11 queues, 65 with 50 (a pool of 80; with 100 queues no pool the server allows
# sufficed and its start took 90 s).
RUNTIME_CONNECTIONS = 16
# awa prunes finished jobs with its queue ring, at its own pace: a rotation a second over
# 16 slots (queue_storage_queue_rotate_interval_ms, its default, left as it is). The task
# log carries each job's moments, for the jobs pruned before the ledger reads its tables.
ROTATE_MS = 1000
WEIGHTED = {
    "one_queue": False,
    "one_queue_tuned": False,
    "weighted_queues": True,
    "weighted_queues_tuned": True,
}
SQL = kit.sql_blocks(Path(__file__).with_name("awa.sql"))


def sql(block: str) -> str:
    return SQL[block].sql


@dataclass
class HarnessJob:
    """A job's arguments as awa stores them (JSON): the harness's number, tenant, ms."""

    n: int
    t: int
    ms: float


@dataclass(frozen=True)
class Setup:
    """How a mapping runs awa: its queues and their weights, its poll and its pool."""

    weighted: bool
    tenants: tuple[int, ...]
    weights: tuple[int, ...]
    slots: int
    poll_ms: int
    own_poll_ms: float | None  # the options' poll, where they set one (tuned)
    pool_rule: tuple[int, int] | None  # max_connections per queue, and beyond them
    hold: bool

    @classmethod
    def of(cls, config: kit.Config) -> Setup:
        options = config["options"]
        own_poll = options.get("poll_interval_ms")
        per_queue, base = (options.get(f"max_connections_{k}") for k in ("per_queue", "base"))
        tenants = tuple(config["tenants"])
        return cls(
            weighted=WEIGHTED[config["mapping"]],
            tenants=tenants,
            weights=tuple(config.get("weights") or [1] * len(tenants)),
            slots=config["concurrency"],
            poll_ms=max(1, round(own_poll if own_poll is not None else config["poll_interval_ms"])),
            own_poll_ms=own_poll,
            pool_rule=(int(per_queue), int(base)) if per_queue is not None else None,
            hold=bool(config.get("hold")),
        )

    @property
    def queues(self) -> list[str]:
        return [queue_of(tenant) for tenant in self.tenants] if self.weighted else [QUEUE]

    def queue_for(self, tenant: int) -> str:
        return queue_of(tenant) if self.weighted else QUEUE

    @property
    def pool(self) -> int:
        """awa's default pool, or its docs' rule, `num_queues * 4 + 20`, where the options
        give it (with the default 10 the dispatchers' listeners hold every connection of
        11 queues' pool, and an enqueue times out)."""
        if self.pool_rule is None:
            return DEFAULT_POOL
        per_queue, base = self.pool_rule
        return len(self.queues) * per_queue + base

    def refused(self, free_connections: int) -> str | None:
        """Why its runtime cannot run on a server with that many connections left."""
        queues = len(self.queues)
        needed = queues + RUNTIME_CONNECTIONS
        if needed <= free_connections:
            return None
        return (
            f"awa's runtime holds a connection per queue (each dispatcher's LISTEN): a queue "
            f"per tenant, {queues} of them, needs about {needed} connections "
            f"(its docs size the pool at {queues * 4 + 20}), and the server has "
            f"{free_connections} left (max_connections)"
        )


def queue_of(tenant: int) -> str:
    return f"tenant-{tenant}"


@asynccontextmanager
async def _client(
    config: kit.Config, relay: str | None = None, pool: int = DEFAULT_POOL
) -> AsyncIterator[Any]:
    """awa's client on the run's server (through a plan capture's relay), closed after."""
    import awa

    client = awa.AsyncClient(notice_relay.sqlx_url(config, relay), max_connections=pool)
    try:
        yield client
    finally:
        await client.close()


def _connect(config: kit.Config) -> psycopg.Connection[Any]:
    return psycopg.connect(kit.conninfo(config), autocommit=True)


# -- the roles ---------------------------------------------------------------------------


def versions(config: kit.Config) -> kit.Said:
    setup = Setup.of(config)
    return kit.Said(
        versions={"awa-pg": importlib.metadata.version("awa-pg")},
        settings=_said_settings(setup),
        unlike_the_scenario=departures(setup, config["poll_interval_ms"]),
    )


def _said_settings(setup: Setup) -> dict[str, Any]:
    workers = "global_max_workers" if setup.weighted else "max_workers"
    return {
        "driver": "awa's own (Rust: sqlx) in the awa-pg wheel",
        "schema": "awa (fixed by its migrations; made and dropped by the run)",
        "enqueue": "enqueue_many_copy (COPY into its queue storage)",
        "queues": "one per tenant, each weight = its tenant group's weight:"
        if setup.weighted
        else "one, 'harness'",
        workers: "the scenario's workers",
        "poll_interval_ms": setup.poll_ms,
        "max_connections": setup.pool,
        "queue_storage_queue_rotate_interval_ms": f"{ROTATE_MS} (its default)",
    }


def departures(setup: Setup, asked_ms: float) -> list[str]:
    """A mapping that polls at awa's own interval, whatever the scenario asks."""
    own_ms = setup.own_poll_ms
    if own_ms is None or asked_ms >= own_ms:
        return []
    return [
        f"polls every {own_ms / 1000:g} s, not every {asked_ms:g} ms as the scenario asks "
        "(awa's own poll, as its maintainers run it: a NOTIFY on every enqueue and a "
        "slot its queue frees wake its dispatchers)"
    ]


def install(config: kit.Config) -> str | None:
    """Its migrations and its queues, paused; refused where the server has too few
    connections left for its dispatchers."""
    setup = Setup.of(config)
    with _connect(config) as conn:
        found = conn.execute(sql("free_connections")).fetchone()  # type: ignore[arg-type]
        refused = setup.refused(int(found[0]) if found else 0)
        if refused is not None:
            return refused
        asyncio.run(_install(config, setup, conn))
    return None


async def _install(config: kit.Config, setup: Setup, conn: psycopg.Connection[Any]) -> None:
    async with _client(config) as client:
        await client.migrate()
        conn.execute(sql("awa_activate"))  # type: ignore[arg-type]
        for queue in setup.queues:
            await client.pause_queue(queue, paused_by="tenant-queue-bench")


@asynccontextmanager
async def enqueuer(config: kit.Config) -> AsyncIterator[kit.Enqueue]:
    """`enqueue_many_copy`, a batch a call, each job on its tenant's queue."""
    setup = Setup.of(config)
    async with _client(config) as client:

        async def enqueue(jobs: list[kit.Job]) -> None:
            await client.enqueue_many_copy(
                [HarnessJob(number, tenant, ms) for number, tenant, ms in jobs],
                kind=KIND,
                opts=[{"queue": setup.queue_for(tenant)} for _, tenant, _ in jobs],
            )

        yield enqueue


async def worker(config: kit.Config, work: kit.Work) -> None:
    """Its runtime started before the clock, its queues resumed at the start, shut down
    (running jobs drained) at the stop."""
    setup = Setup.of(config)
    with notice_relay.relayed(config, work.out.plan) as relay:
        async with _client(config, relay, setup.pool) as client:
            await _serve(setup, work, client)


async def _serve(setup: Setup, work: kit.Work, client: Any) -> None:
    @client.task(HarnessJob, kind=KIND, queue=setup.queues[0])
    async def harness_job(job: Any) -> None:
        """Its work, and the run's moments for the task log: awa's `created_at` (now() of
        the enqueue's COPY), and the handler's start and end on the worker's clock (the
        server's where both run on one machine), which the books take for a job awa has
        pruned before its ledger is read; the ledger's own moments for the rest."""
        args = job.args
        if work.hold:
            await work.hold_job()
            return
        began = datetime.now(UTC)
        work.begin(args.n, args.t, str(job.id))
        if args.ms > 0:
            await asyncio.sleep(args.ms / 1000)
        work.job(
            args.n,
            args.t,
            str(job.id),
            enqueued_at=datetime.fromisoformat(job.created_at),
            started_at=began,
            finished_at=datetime.now(UTC),
        )

    await client.start(_queue_configs(setup), **_start_options(setup))
    work.ready()
    await work.started()
    for queue in setup.queues:
        await client.resume_queue(queue)
    await work.stopped()
    await client.shutdown()


def _queue_configs(setup: Setup) -> list[dict[str, Any]]:
    """One queue with the worker's slots, or a queue per tenant by weight; in a plan
    capture each claim takes one job (`claim_batch_size` 1), so that each fetch is one."""
    batch = {"claim_batch_size": 1} if setup.hold else {}
    if not setup.weighted:
        return [{"name": QUEUE, "max_workers": setup.slots, **batch}]
    weights = zip(setup.tenants, setup.weights, strict=True)
    return [{"name": queue_of(tenant), "weight": weight, **batch} for tenant, weight in weights]


def _start_options(setup: Setup) -> dict[str, Any]:
    options: dict[str, Any] = {"poll_interval_ms": setup.poll_ms}
    if setup.weighted:
        options["global_max_workers"] = setup.slots
    return options


def ledger(config: kit.Config) -> Iterator[kit.Record]:
    """awa's view of its jobs, its tables analyzed first, as autovacuum would in time: the
    view over its partitions took 30-45 s for 20,000 jobs in four queues on tables without
    statistics, 0.5 s with them."""
    with _connect(config) as conn:
        for (statement,) in conn.execute(sql("awa_analyze_tables")).fetchall():  # type: ignore[arg-type]
            conn.execute(statement)
    return kit.ledger_records(config, sql("awa_ledger"), {"kind": KIND})


if __name__ == "__main__":
    kit.serve(sys.modules[__name__])
