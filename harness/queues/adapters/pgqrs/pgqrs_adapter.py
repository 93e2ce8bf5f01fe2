"""pgqrs (the pgqrs wheel: Python over pgqrs's Rust core) through its own code, as an
adapter of the contract (docs/adapters.md): its migrations (`admin(store).install()`) in
the run's schema (its Config's `schema`: each of its sessions sets search_path to it),
its queues (`store.queue`), its batch enqueue (`enqueue_batch` of a producer), and its
worker loop: a consumer (`store.consumer`, a worker row of its own) per slot, each
running pgqrs's poll loop (`dequeue().worker(consumer).poll_interval(ms).handle(h)
.poll(store)`), which dequeues, runs the handler, archives the message, and polls again
when the queue is empty; the adapter stops it the way its docs say, by interrupting the
consumer (`consumer.interrupt()`), after which the loop ends with "worker interrupted".

Its dequeue (`dequeue_many`, 30 s of visibility timeout in 0.15.3's code) is one UPDATE
of the oldest visible messages of the consumer's queue (`ORDER BY enqueued_at ... FOR
UPDATE SKIP LOCKED`) that have no consumer yet, which it sets to its own.

Mappings of tenants onto its knobs (pgqrs.toml):
  one_queue           every job on the queue "harness", a consumer per worker slot, one
                      message a dequeue (its builder's default batch)
  one_queue_batched   the same, `batch_size` messages a dequeue (`handle_batch`), worked
                      in turn and archived together (`archive_many`)
  queue_per_tenant    a queue per tenant ("tenant-<t>"), and a consumer per queue (a
                      pgqrs consumer serves one queue): the worker slots dealt over the
                      queues, one each at least, so more than the slots where there are
                      more tenants (said in `unlike_the_scenario`)

Every mapping turns its enqueue rate limit off (its default takes 1,000 messages a
second with a burst of 50, so that a batch of more than 50 is refused), as pgqrs's own
benchmark does. pgqrs stamps enqueued_at and dequeued_at with its process's clock: a
trigger installed with its tables writes the server's (pgqrs.sql). Its driver (sqlx)
keeps the server's notices to itself: a plan capture's worker connects through the
relay (python/notice_relay.py).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from harness.queues.adapters.python import kit, notice_relay

QUEUE = "harness"
PER_TENANT = {"one_queue": False, "one_queue_batched": False, "queue_per_tenant": True}
DEQUEUE_VT_S = 30  # Consumer::dequeue_many's visibility timeout (pgqrs 0.15.3, workers.rs)
POOL = 16  # its Config's max_connections by default
INTERRUPTED = "worker interrupted"  # how its poll loop ends once its consumer is interrupted
SQL = kit.sql_blocks(Path(__file__).with_name("pgqrs.sql"))


def sql(block: str) -> str:
    return SQL[block].sql


@dataclass(frozen=True)
class Setup:
    """How a mapping runs pgqrs: its queues, the queue of each consumer, messages a
    dequeue, its poll interval."""

    per_tenant: bool
    tenants: tuple[int, ...]
    slots: int
    batch: int
    poll_ms: int

    @classmethod
    def of(cls, config: kit.Config) -> Setup:
        return cls(
            per_tenant=PER_TENANT[config["mapping"]],
            tenants=tuple(config["tenants"]),
            slots=config["concurrency"],
            batch=int(config["options"].get("batch_size", 1)),
            poll_ms=max(1, round(config["poll_interval_ms"])),
        )

    @property
    def queues(self) -> list[str]:
        return [queue_of(tenant) for tenant in self.tenants] if self.per_tenant else [QUEUE]

    def queue_for(self, tenant: int) -> str:
        return queue_of(tenant) if self.per_tenant else QUEUE

    @property
    def consumer_queues(self) -> list[str]:
        """Each consumer's queue: the slots dealt over the queues, at least one each."""
        queues = self.queues
        counts = kit.shares(max(self.slots, len(queues)), len(queues))
        return [queue for queue, count in zip(queues, counts, strict=True) for _ in range(count)]


def queue_of(tenant: int) -> str:
    return f"tenant-{tenant}"


async def _store(config: kit.Config, relay: str | None = None) -> Any:
    """pgqrs's store on the run's schema, its enqueue rate limit off (through a plan
    capture's relay)."""
    import pgqrs

    settings = pgqrs.Config(notice_relay.sqlx_url(config, relay), schema=config["schema"])
    settings.max_enqueue_per_second = None
    settings.max_enqueue_burst = None
    return await pgqrs.connect_with(settings)


# -- the roles ---------------------------------------------------------------------------


def versions(config: kit.Config) -> kit.Said:
    setup = Setup.of(config)
    return kit.Said(
        versions={"pgqrs": importlib.metadata.version("pgqrs")},
        settings={
            "driver": "pgqrs's own (Rust: sqlx) in the pgqrs wheel",
            "schema": "the run's (its Config's schema)",
            "enqueue": "enqueue_batch of a producer per queue (INSERT ... unnest)",
            "enqueue_rate_limit": "off (max_enqueue_per_second None), as its benchmark runs",
            "queues": "one per tenant" if setup.per_tenant else "one, 'harness'",
            "consumers": "one per worker slot, each slot's queue's, at least one per queue",
            "loop": "dequeue().worker(consumer).poll(): handle_batch"
            if setup.batch > 1
            else "dequeue().worker(consumer).poll(): handle",
            "batch_size": setup.batch,
            "poll_interval_ms": setup.poll_ms,
            "visibility_timeout_s": DEQUEUE_VT_S,
            "max_connections": POOL,
            "server_clock_trigger": True,
        },
        unlike_the_scenario=departures(setup),
    )


def departures(setup: Setup) -> list[str]:
    """A queue per tenant runs a consumer per queue, more than the workers if need be (the
    versions role is not told the workers: a run may sweep them)."""
    if not setup.per_tenant:
        return []
    return [
        f"runs a consumer per tenant's queue, {len(setup.queues)} of them (a pgqrs consumer "
        "serves one queue): as many jobs at once as tenants with work, more than the "
        "scenario's workers where they are fewer"
    ]


def install(config: kit.Config) -> None:
    """Its migrations and queues, then the trigger that stamps with the server's clock."""
    asyncio.run(_install(config, Setup.of(config)))
    with psycopg.connect(kit.conninfo(config), autocommit=True) as conn:
        conn.execute(sql("pgqrs_server_clock"))  # type: ignore[arg-type]


async def _install(config: kit.Config, setup: Setup) -> None:
    import pgqrs

    store = await _store(config)
    await pgqrs.admin(store).install()
    for queue in setup.queues:
        await store.queue(queue)


@asynccontextmanager
async def enqueuer(config: kit.Config) -> AsyncIterator[kit.Enqueue]:
    """`enqueue_batch`, a batch a call per queue, through a producer per queue."""
    import pgqrs

    setup = Setup.of(config)
    store = await _store(config)
    producers: dict[str, Any] = {}

    async def enqueue(jobs: list[kit.Job]) -> None:
        for queue, payloads in _by_queue(setup, jobs).items():
            if queue not in producers:
                producers[queue] = await store.producer(queue)
            await pgqrs.enqueue_batch(producers[queue], payloads)

    yield enqueue


def _by_queue(setup: Setup, jobs: list[kit.Job]) -> dict[str, list[dict[str, Any]]]:
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for number, tenant, ms in jobs:
        payload = {"n": number, "t": tenant, "ms": ms}
        by_queue.setdefault(setup.queue_for(tenant), []).append(payload)
    return by_queue


async def worker(config: kit.Config, work: kit.Work) -> None:
    """Its consumers registered before the clock, their poll loops started at the start,
    interrupted at the stop (each loop ends after its running handler)."""
    setup = Setup.of(config)
    with notice_relay.relayed(config, work.out.plan) as relay:
        store = await _store(config, relay)
        consumers = [await store.consumer(queue) for queue in setup.consumer_queues]
        work.ready()
        await work.started()
        crew = Crew(setup, work)
        loops = [asyncio.ensure_future(crew.consume(store, c, k)) for k, c in enumerate(consumers)]
        try:
            await work.stopped(loops)
        finally:
            await crew.interrupt(consumers, loops)


class Crew:
    """The consumers' poll loops and their handlers; at the stop, each loop that started
    interrupted, and a plan capture's held jobs let go only then (a handler that returns
    sooner would let its loop dequeue again)."""

    def __init__(self, setup: Setup, work: kit.Work) -> None:
        self.setup, self.work = setup, work
        self.started: set[int] = set()
        self.interrupted = asyncio.Event()

    async def consume(self, store: Any, consumer: Any, slot: int) -> None:
        import pgqrs

        if self.work.hold:
            await self.work.turn(slot)
        if self.work.stop.is_set():
            return
        self.started.add(slot)
        loop = pgqrs.dequeue().worker(consumer).batch(self.setup.batch)
        loop = loop.poll_interval(self.setup.poll_ms)
        loop = loop.handle_batch(self.many) if self.setup.batch > 1 else loop.handle(self.one)
        try:
            await loop.poll(store)
        except pgqrs.PgqrsError as error:
            if not (self.work.stop.is_set() and INTERRUPTED in str(error)):
                raise

    async def one(self, message: Any) -> None:
        await self.many([message])

    async def many(self, messages: list[Any]) -> None:
        """The dequeue's messages worked in turn; pgqrs archives them once this returns."""
        if self.work.hold:
            await asyncio.gather(*(self.work.hold_job() for _ in messages))
            await self.interrupted.wait()
            return
        for message in messages:
            job = message.payload
            self.work.begin(job["n"], job["t"], str(message.id))
        for message in messages:
            job = message.payload
            if job["ms"] > 0:
                await asyncio.sleep(job["ms"] / 1000)
            self.work.job(job["n"], job["t"], str(message.id))

    async def interrupt(self, consumers: list[Any], loops: Sequence[asyncio.Future[None]]) -> None:
        for slot in sorted(self.started):
            await _interrupt(consumers[slot], loops[slot])
        self.interrupted.set()
        await asyncio.gather(*loops)


async def _interrupt(consumer: Any, loop: asyncio.Future[None]) -> None:
    """Its consumer interrupted, once its loop is polling (pgqrs interrupts only a
    polling worker), unless the loop has ended."""
    import pgqrs

    while not loop.done():
        try:
            await consumer.interrupt()
            return
        except pgqrs.PgqrsError:
            await asyncio.sleep(kit.POLL_S)


def ledger(config: kit.Config) -> Iterator[kit.Record]:
    return kit.ledger_records(config, sql("pgqrs_ledger"))


if __name__ == "__main__":
    kit.serve(sys.modules[__name__])
