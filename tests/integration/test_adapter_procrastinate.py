"""procrastinate through its adapter (harness/queues/adapters/procrastinate/): its lock
per tenant keeps a tenant to one running job, from the moments of its own events table,
and its captured fetch with the large tenant's job held walks that tenant's backlog.
`libraries`: make test-libraries."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from psycopg import connect, sql

from harness.queues.base import Site
from harness.queues.catalog import catalog
from harness.run.repetition import Repetition, run_repetition
from harness.run.scenario_run import RunOptions
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.server.kinds import Server
from harness.server.schema import own_schema
from tests.integration.conftest import Quiet, run_yaml

pytestmark = pytest.mark.libraries
pytest.importorskip("procrastinate", reason="make venv installs the extra `libraries`")

NOISY = {
    "name": "procrastinate-lock",
    "workers": 3,
    "strategies": ["procrastinate_lock_per_tenant"],
    "repetitions": 1,
    "poll_interval_ms": 10,
    "timeout_s": 60,
    "tenant_cap": 1,
    "tenant_groups": [
        {"name": "large", "tenants": 1, "jobs_per_tenant": 20, "duration_ms": 10},
        {"name": "small", "tenants": 3, "jobs_per_tenant": 3, "duration_ms": 10},
    ],
}
EVENTS_BY_TENANT = """
select (jobs.args ->> 't')::int, events.type::text
  from procrastinate_events as events
  join procrastinate_jobs as jobs on jobs.id = events.job_id
 where events.type in ('started', 'succeeded')
 order by events.id"""
LARGE = 2_000
SKEWED = {
    "name": "procrastinate-fetches",
    "strategies": ["procrastinate", "procrastinate_lock_per_tenant"],
    "backlog": {
        "groups": [
            {"name": "large", "tenants": 1, "jobs_per_tenant": LARGE},
            {"name": "small", "tenants": 3, "jobs_per_tenant": 1},
        ]
    },
    "explain": {"repeat": 2},
}


def test_a_lock_per_tenant_runs_one_job_of_a_tenant_at_a_time(server: Server) -> None:
    """Each job's lock is its tenant: no two jobs of a tenant overlap, while three workers
    had work. The order is procrastinate's own events table in the order of its ids, not
    of their stamps: a stamp is now() of its transaction, and a fetch that began before
    the tenant's last job finished, and took the next one after, stamps its start before
    that finish (seen once in CI). An id is drawn when its event is written, and the fetch
    writes its `started` only after it saw the finish committed: ids order them truly."""
    name = "procrastinate_lock_per_tenant"
    inputs = RunInputs.of(Scenario.model_validate(NOISY))
    site = Site(server.dsn, "procrastinate_lock")
    queue = catalog()[name].make(site, inputs)
    with own_schema(site.dsn, site.schema):
        result = run_repetition(queue, site, inputs, Repetition(name, 3, 1), Quiet())
        with connect(site.dsn) as conn:
            conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(site.schema)))
            events = conn.execute(EVENTS_BY_TENANT).fetchall()
    assert result.books == "balanced"
    order: dict[int, list[str]] = defaultdict(list)
    for tenant, kind in events:
        order[tenant].append(kind)
    assert sum(len(kinds) for kinds in order.values()) == 2 * (20 + 3 * 3)
    for kinds in order.values():
        assert kinds == ["started", "succeeded"] * (len(kinds) // 2)


def test_the_lock_makes_each_later_fetch_walk_the_large_tenants_backlog(
    server: Server, tmp_path: Path
) -> None:
    """With the large tenant's first job held (its lock taken), every later fetch passes
    over that tenant's queued jobs, each refused by the `NOT EXISTS` over its lock: many
    times the buffers of the one queue's fetch, which takes the head of its index."""
    outcome = run_yaml(
        server, tmp_path, yaml.safe_dump(SKEWED), RunOptions(timed=False, plots=False)
    )
    runs = outcome.tables.runs
    assert runs is not None
    buffers = runs.groupby("strategy")["shared_buffers"]
    assert buffers.min()["procrastinate_lock_per_tenant"] > LARGE
    assert buffers.max()["procrastinate"] < 100


def test_the_stalled_retry_takes_up_a_dead_workers_job_and_the_ledger_only_its_own(
    server: Server,
) -> None:
    """procrastinate_recovery's promise (procrastinate.toml): a job `doing` under a worker
    whose heartbeat is over 30 s old is retried by its how-to's task (its body,
    `retry_stalled`: the run's periodic deferral every 10th minute is not waited for);
    the task's own jobs are no harness jobs, and the ledger leaves them out."""
    from harness.queues.adapters.procrastinate import procrastinate_adapter as adapter
    from harness.queues.contract.queue import connection_of

    config = {
        "schema": "procrastinate_stalled",
        "connection": connection_of(server.dsn).model_dump(),
        "mapping": "one_queue_stalled_retried",
        "options": {"retry_stalled_cron": "*/10 * * * *"},
        "poll_interval_ms": 10,
    }
    with own_schema(server.dsn, config["schema"]):
        adapter.install(config)
        states = asyncio.run(_stalled_then_retried(adapter, config))
        ledger = list(adapter.ledger(config))
    assert states == ["doing", 0, "doing", 1, "todo"]
    assert [(record.job, record.state) for record in ledger] == [(1, "waiting")]


async def _stalled_then_retried(adapter: Any, config: dict[str, Any]) -> list[Any]:
    """One harness job taken by a worker whose last heartbeat is 20 s old (not yet
    stalled), then 40 s old (stalled); a job of the retry task itself beside it."""
    async with adapter._opened(config) as app:
        adapter._register_stalled_retry(app, config["options"]["retry_stalled_cron"])
        await app.job_manager.batch_defer_jobs_async([adapter._job(config, (1, 1, 0.0))])
        await app.configure_task(adapter.STALLED_TASK).defer_async(timestamp=0)
        conn = app.connector
        (worker,) = await conn.execute_query_all_async(
            "insert into procrastinate_workers (last_heartbeat) "
            "values (now() - interval '20 seconds') returning id"
        )
        await conn.execute_query_async(
            "update procrastinate_jobs set status = 'doing', worker_id = %(worker)s "
            "where task_name = 'harness_job'",
            worker=worker["id"],
        )
        status = "select status from procrastinate_jobs where task_name = 'harness_job'"
        seen: list[Any] = [(await conn.execute_query_one_async(status))["status"]]
        seen.append(await adapter.retry_stalled(app))
        await conn.execute_query_async(
            "update procrastinate_workers set last_heartbeat = now() - interval '40 seconds'"
        )
        seen.append((await conn.execute_query_one_async(status))["status"])
        seen.append(await adapter.retry_stalled(app))
        seen.append((await conn.execute_query_one_async(status))["status"])
    return seen
