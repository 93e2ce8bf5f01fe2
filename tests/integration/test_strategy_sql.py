"""The strategies' SQL against the article's schema in a real PostgreSQL 17."""

from __future__ import annotations

import psycopg
import pytest

from harness.queues.sql.strategies import Strategy
from harness.queues.sql.worker import Prepared, WorkerSpec, claim, complete
from harness.run.repetition import worker_spec
from harness.server.kinds import Server


def spec(server: Server, strategy: Strategy) -> WorkerSpec:
    return worker_spec(server.dsn, "queue_test", strategy, 10, 0, {})


def fill(queue: psycopg.Connection, strategy: Strategy, tenants: list[int]) -> None:
    params = {
        "tenant_ids": tenants,
        "weights": [1] * len(tenants),
        "priorities": [0] * len(tenants),
    }
    queue.execute(strategy.sql("enqueue"), params)


def test_enqueue_registers_each_tenant_once(queue, strategies) -> None:
    fill(queue, strategies["fifo"], [1, 1, 2])
    fill(queue, strategies["fifo"], [2, 3])
    assert queue.execute("select count(*) from jobs").fetchone() == (5,)
    tenants = queue.execute("select tenant_id, last_served::text from queue_tenants order by 1")
    assert tenants.fetchall() == [(1, "-infinity"), (2, "-infinity"), (3, "-infinity")]


def test_fifo_claims_in_id_order_whoever_the_tenant(server, queue, strategies) -> None:
    fifo = strategies["fifo"]
    fill(queue, fifo, [1, 1, 1, 2])
    with psycopg.connect(server.dsn, autocommit=True, options="-c search_path=queue_test") as w:
        claimed = [claim(Prepared(w), spec(server, fifo)) for _ in range(4)]
    assert claimed == [(1, 1), (2, 1), (3, 1), (4, 2)]
    assert queue.execute(
        "select count(*) from jobs where status = 'running' and started_at is not null"
    ).fetchone() == (4,)


def test_round_robin_alternates_tenants(server, queue, strategies) -> None:
    rr = strategies["round_robin"]
    fill(queue, rr, [1, 1, 1, 2, 2])
    with psycopg.connect(server.dsn, autocommit=True, options="-c search_path=queue_test") as w:
        session = Prepared(w)
        tenants = [claim(session, spec(server, rr))[1] for _ in range(5)]  # type: ignore[index]
        assert claim(session, spec(server, rr)) is None
    assert tenants == [1, 2, 1, 2, 1]


def test_a_locked_job_skips_that_job_not_the_tenant(server, queue, strategies) -> None:
    """The lock sits in the sub-select: a large tenant keeps every worker busy."""
    rr = strategies["round_robin"]
    fill(queue, rr, [1, 1, 1])
    options = "-c search_path=queue_test"
    with (
        psycopg.connect(server.dsn, options=options) as holder,
        psycopg.connect(server.dsn, autocommit=True, options=options) as worker,
    ):
        held = holder.execute(rr.sql("dequeue")).fetchone()  # transaction stays open
        assert held == (1, 1)
        assert claim(Prepared(worker), spec(server, rr)) == (2, 1)
        holder.rollback()


def test_complete_marks_done_once(server, queue, strategies) -> None:
    fifo = strategies["fifo"]
    fill(queue, fifo, [1])
    with psycopg.connect(server.dsn, autocommit=True, options="-c search_path=queue_test") as w:
        session = Prepared(w)
        job, _ = claim(session, spec(server, fifo))  # type: ignore[misc]
        complete(session, spec(server, fifo), job)
        with pytest.raises(RuntimeError, match="complete updated 0 rows"):
            complete(session, spec(server, fifo), job)
    row = queue.execute("select status, started_at <= finished_at from jobs").fetchone()
    assert row == ("done", True)
