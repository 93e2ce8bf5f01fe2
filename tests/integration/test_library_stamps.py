"""A library's ledger reads its own tables' moments, each now() of a transaction: a fetch
whose transaction began before a job was deferred, and claimed it, stamps a start
before the deferral. The books fail a job whose moments are out of order: the ledger
takes such a start as the deferral (a wait of 0). Made to happen here, step by step,
with procrastinate's own schema and functions; `make test` once failed its books on it
(procrastinate_lock_per_tenant, a busy machine)."""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterator

import psycopg
import pytest

from harness.queues.adapters.python import kit
from harness.queues.contract.queue import connection_of
from harness.server.connections import connect
from harness.server.kinds import Server
from harness.server.schema import own_schema
from harness.sqlfiles import parse_blocks

pytest.importorskip("procrastinate", reason="make venv installs the extra `libraries`")

ADAPTER = importlib.resources.files("harness.queues.adapters.procrastinate")
SCHEMA = "stamps_procrastinate"


@pytest.fixture
def procrastinate(server: Server) -> Iterator[kit.Config]:
    """procrastinate's own schema (its schema.sql) in a schema of the test's; the config
    an adapter's ledger role gets for it."""
    schema_sql = importlib.resources.files("procrastinate.sql").joinpath("schema.sql")
    with own_schema(server.dsn, SCHEMA), connect(server.dsn, schema=SCHEMA) as conn:
        conn.execute(schema_sql.read_text(encoding="utf-8"))  # type: ignore[arg-type]
        yield {"connection": connection_of(server.dsn).model_dump(), "schema": SCHEMA}


def defer(conn: psycopg.Connection[tuple[object, ...]], n: int) -> None:
    conn.execute(
        "insert into procrastinate_jobs (queue_name, task_name, args) "
        "values ('q', 'harness_job', jsonb_build_object('n', %s::int, 't', 1))",
        (n,),
    )


def test_a_fetch_begun_before_the_deferral_is_read_as_a_wait_of_zero(
    procrastinate: kit.Config,
) -> None:
    dsn = kit.conninfo(procrastinate)
    with psycopg.connect(dsn, autocommit=True) as deferrer, psycopg.connect(dsn) as fetcher:
        (worker,) = fetcher.execute("select procrastinate_register_worker_v1()").fetchone()  # type: ignore[misc]
        fetcher.commit()
        fetcher.execute("select now()")  # the fetch's transaction begins: its now() is set
        defer(deferrer, 1)  # deferred after that, committed before the fetch's query
        fetched = fetcher.execute(
            "select id from procrastinate_fetch_job_v2(array['q'], %s)", (worker,)
        ).fetchone()
        fetcher.commit()
        assert fetched is not None and fetched[0] is not None
        deferrer.execute("select procrastinate_finish_job_v1(%s, 'succeeded', false)", fetched)
        defer(deferrer, 2)  # never started
        events = dict(
            deferrer.execute(
                "select type::text, at from procrastinate_events where job_id = %s", fetched
            ).fetchall()
        )
    assert events["started"] < events["deferred"]  # procrastinate's own stamps
    statement = parse_blocks(
        ADAPTER.joinpath("procrastinate.sql").read_text(encoding="utf-8"), "procrastinate.sql"
    )["procrastinate_ledger"].sql
    records = {record.job: record for record in kit.ledger_records(procrastinate, statement)}
    done, waiting = records[1], records[2]
    assert done.state == "done" and done.started_at == events["deferred"] == done.enqueued_at
    assert done.enqueued_at <= done.started_at <= done.finished_at  # type: ignore[operator]
    assert waiting.state == "waiting" and waiting.started_at is None
