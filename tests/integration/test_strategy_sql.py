"""The strategies' SQL against the article's schema in a real PostgreSQL 17."""

from __future__ import annotations

import psycopg
import pytest

from harness.queues.sql.claim import Claimed, ClaimSql, claim, complete
from harness.queues.sql.session import Plain, Prepared, Session
from harness.queues.sql.strategies import Strategy
from harness.server.connections import connect

PARAMS = {"tenant_cap": 2**31 - 1}


def take(session: Session, strategy: Strategy) -> tuple[int, int] | None:
    claimed = claim(session, ClaimSql.of(strategy), PARAMS)
    return None if claimed is None else (claimed.job_id, claimed.tenant_id)


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
    with connect(server.dsn, schema="queue_test") as w:
        claimed = [take(Prepared(w), fifo) for _ in range(4)]
    assert claimed == [(1, 1), (2, 1), (3, 1), (4, 2)]
    assert queue.execute(
        "select count(*) from jobs where status = 'running' and started_at is not null"
    ).fetchone() == (4,)


def test_round_robin_alternates_tenants(server, queue, strategies) -> None:
    rr = strategies["round_robin"]
    fill(queue, rr, [1, 1, 1, 2, 2])
    with connect(server.dsn, schema="queue_test") as w:
        session = Prepared(w)
        tenants = [take(session, rr)[1] for _ in range(5)]  # type: ignore[index]
        assert take(session, rr) is None
    assert tenants == [1, 2, 1, 2, 1]


@pytest.mark.parametrize("transport", [Plain, Prepared])
def test_both_transports_run_the_same_claim(server, queue, strategies, transport) -> None:
    """Pipelined through libpq or statement by statement through psycopg: the same jobs in
    the same order, the same rows changed."""
    rr = strategies["round_robin"]
    fill(queue, rr, [1, 1, 2, 3, 3])
    with connect(server.dsn, schema="queue_test") as w:
        session = transport(w)
        claimed = [take(session, rr) for _ in range(6)]
    assert claimed[-1] is None
    assert sorted(claimed[:-1]) == [(1, 1), (2, 1), (3, 2), (4, 3), (5, 3)]  # type: ignore[type-var]
    assert len({job[1] for job in claimed[:3]}) == 3  # type: ignore[index]  # each tenant once
    assert claimed[3:5] in ([(2, 1), (5, 3)], [(5, 3), (2, 1)])  # then those with more work
    served = queue.execute("select count(*) from queue_tenants where last_served > '-infinity'")
    assert served.fetchone() == (3,)


def test_a_held_claim_keeps_its_transaction_until_complete(server, queue, strategies) -> None:
    """`-- claim: hold`: the job's row stays locked until complete commits."""
    hold = strategies["fifo_hold"]
    fill(queue, hold, [1, 2])
    with connect(server.dsn, schema="queue_test") as w:
        session = Prepared(w)
        claimed = claim(session, ClaimSql.of(hold), PARAMS)
        assert isinstance(claimed, Claimed)
        assert w.info.transaction_status.name == "INTRANS"
        running = queue.execute("select count(*) from jobs where status = 'running'")
        assert running.fetchone() == (0,)  # not committed yet: the other session sees it queued
        complete(session, ClaimSql.of(hold), PARAMS, claimed.job_id)
        assert w.info.transaction_status.name == "IDLE"
    assert queue.execute("select status from jobs where id = 1").fetchone() == ("done",)


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
        assert take(Prepared(worker), rr) == (2, 1)
        holder.rollback()


def test_complete_marks_done_once(server, queue, strategies) -> None:
    fifo = strategies["fifo"]
    fill(queue, fifo, [1])
    with connect(server.dsn, schema="queue_test") as w:
        session = Prepared(w)
        job, _ = take(session, fifo)  # type: ignore[misc]
        complete(session, ClaimSql.of(fifo), PARAMS, job)
        with pytest.raises(RuntimeError, match="complete updated 0 rows"):
            complete(session, ClaimSql.of(fifo), PARAMS, job)
    row = queue.execute("select status, started_at <= finished_at from jobs").fetchone()
    assert row == ("done", True)
