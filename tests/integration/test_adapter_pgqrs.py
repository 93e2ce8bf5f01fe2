"""pgqrs's adapter beyond what the catalog-wide tests check: how its mappings deal the
worker slots over its queues, that its moments are the server's clock (pgqrs binds its
process's), and the library behaviour its manifest's recovery (`left`) rests on: a
dequeued message whose consumer is gone is not dequeued again when its visibility
timeout runs out, only once something releases that consumer's messages."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness.queues.adapters.pgqrs import pgqrs_adapter as adapter
from harness.queues.adapters.pgqrs.pgqrs_adapter import QUEUE, Setup
from harness.queues.base import Site
from harness.queues.contract.manifest import load_adapters
from harness.queues.contract.protocol import Connection
from harness.queues.contract.queue import ContractSpec, connection_of
from harness.server.connections import connect
from harness.server.kinds import Server
from harness.server.schema import own_schema

pgqrs = pytest.importorskip("pgqrs", reason="pgqrs: make venv installs the extra `libraries`")

PGQRS = load_adapters()["pgqrs"]
CONNECTION = Connection(host="/run/pg", port=5433, user="u", password="p@ss", dbname="d")


def config(
    mapping: str, tenants: int = 3, concurrency: int = 4, site: Site | None = None
) -> dict[str, Any]:
    """A config as the harness hands it to the adapter, with its mapping's options."""
    spec = ContractSpec(
        PGQRS,
        mapping,
        site or Site("", "tqb_test"),
        10.0,
        concurrency=concurrency,
        tenants=tuple(range(1, tenants + 1)),
    )
    connection = connection_of(site.dsn) if site else CONNECTION
    return spec.config("worker", connection).model_dump(by_alias=True)


def test_one_queue_has_a_consumer_per_slot_and_a_queue_per_tenant_one_per_queue() -> None:
    assert Setup.of(config("one_queue")).consumer_queues == [QUEUE] * 4
    assert Setup.of(config("one_queue_batched")).batch == 50
    dealt = Setup.of(config("queue_per_tenant", tenants=3, concurrency=4)).consumer_queues
    assert dealt == ["tenant-1", "tenant-1", "tenant-2", "tenant-3"]
    many = Setup.of(config("queue_per_tenant", tenants=11, concurrency=4)).consumer_queues
    assert many == [f"tenant-{t}" for t in range(1, 12)]


def test_only_a_queue_per_tenant_says_it_runs_beyond_the_workers() -> None:
    assert adapter.departures(Setup.of(config("one_queue", tenants=11))) == []
    (said,) = adapter.departures(Setup.of(config("queue_per_tenant", tenants=11)))
    assert "a consumer per tenant's queue, 11 of them" in said


def _moments(server: Server, schema: str) -> list[tuple[Any, ...]]:
    with connect(server.dsn) as conn:
        return conn.execute(
            f"select id, enqueued_at, dequeued_at, clock_timestamp() from {schema}.pgqrs_messages"
            " order by id"
        ).fetchall()


def test_its_moments_are_the_servers_clock_one_per_row(server: Server) -> None:
    """pgqrs stamps a batch with one moment of its process's clock; the adapter's trigger
    writes the server's, each row's own, and the first dequeue's likewise."""
    site = Site(server.dsn, "tqb_test_pgqrs_clock")
    settings = config("one_queue", site=site)
    with own_schema(server.dsn, site.schema):
        adapter.install(settings)
        asyncio.run(_enqueue_and_dequeue(settings, jobs=5, dequeued=2))
        rows = _moments(server, site.schema)
    enqueued = [row[1] for row in rows]
    assert len(rows) == 5 and enqueued == sorted(enqueued) and len(set(enqueued)) == 5
    dequeued = [row[2] for row in rows if row[2] is not None]
    assert len(dequeued) == 2 and all(moment > enqueued[-1] for moment in dequeued)
    assert all(row[2] is None or row[2] <= row[3] for row in rows)


async def _enqueue_and_dequeue(settings: dict[str, Any], jobs: int, dequeued: int) -> None:
    async with adapter.enqueuer(settings) as enqueue:
        await enqueue([(n, 1, 5.0) for n in range(1, jobs + 1)])
    store = await adapter._store(settings)
    consumer = await store.consumer(QUEUE)
    assert len(await consumer.dequeue(batch_size=dequeued)) == dequeued


def test_a_gone_consumers_message_waits_past_its_visibility_timeout(server: Server) -> None:
    """Dequeued with a visibility timeout of 1 s and never archived, the message is not
    dequeued by another consumer 1.5 s later: pgqrs's dequeue takes only messages that
    name no consumer. Released by its admin (by worker id), it is."""
    site = Site(server.dsn, "tqb_test_pgqrs_left")
    settings = config("one_queue", site=site)
    with own_schema(server.dsn, site.schema):
        adapter.install(settings)
        first, late, released = asyncio.run(_left_then_released(settings))
    assert (first, late, released) == ([1], [], [1])


async def _left_then_released(settings: dict[str, Any]) -> tuple[list[int], ...]:
    async with adapter.enqueuer(settings) as enqueue:
        await enqueue([(1, 1, 5.0)])
    store = await adapter._store(settings)
    gone, other = await store.consumer(QUEUE), await store.consumer(QUEUE)
    first = await gone.dequeue_many_with_delay(1, 1)
    await asyncio.sleep(1.5)
    late = await other.dequeue()
    await pgqrs.admin(store).release_worker_messages(gone.worker_id)
    released = await other.dequeue()
    return tuple([message.payload["n"] for message in got] for got in (first, late, released))
