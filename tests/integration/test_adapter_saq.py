"""saq through its adapter (harness/queues/adapters/saq/): what its group_key does to a
job without a group, and its plan capture, one Worker of concurrency 1 per fetch taking
turns inside the one adapter process. `libraries`: make test-libraries."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
import yaml

from harness.queues.base import Site
from harness.queues.contract import jobs
from harness.queues.contract.manifest import load_adapters
from harness.queues.contract.queue import ContractSpec, connection_of, recorded
from harness.run.scenario_run import RunOptions
from harness.server.kinds import Server
from harness.server.schema import own_schema
from tests.integration.conftest import run_yaml, worked

pytestmark = pytest.mark.libraries
saq_job = pytest.importorskip("saq.job", reason="saq: make venv installs the extra `libraries`")
saq_adapter = pytest.importorskip("harness.queues.adapters.saq.saq_adapter")
saq_worker = pytest.importorskip("saq.worker")
saq_postgres = pytest.importorskip("saq.queue.postgres")

SAQ = load_adapters()["saq"]
LARGE = 2_000  # the large tenant's queued jobs: more than an enqueue's chunk
SKEWED = {
    "name": "saq-fetches",
    "strategies": ["saq", "saq_group_key"],
    "backlog": {
        "groups": [
            {"name": "large", "tenants": 1, "jobs_per_tenant": LARGE},
            {"name": "small", "tenants": 3, "jobs_per_tenant": 1},
        ]
    },
    "explain": {"repeat": 3},
}


@pytest.fixture(scope="module")
def skewed(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Any:
    directory = tmp_path_factory.mktemp("saq-fetches")
    return run_yaml(server, directory, yaml.safe_dump(SKEWED), RunOptions(timed=False, plots=False))


def _fetched_rows(outcome: Any, strategy: str) -> list[int]:
    """The jobs each of the later captured fetches took (its UPDATE's rows)."""
    saved = outcome.folder.path / "explain" / "backlog" / f"{strategy}.json"
    plans = json.loads(saved.read_text())["plans"]
    return [plan[0]["Plan"]["Actual Rows"] for plan in plans]


def _runs(outcome: Any, strategy: str) -> Any:
    runs = outcome.tables.runs
    assert runs is not None
    return runs[runs["strategy"] == strategy]


@pytest.mark.parametrize("strategy", ["saq", "saq_group_key"])
def test_each_captured_fetch_takes_one_job(skewed: Any, strategy: str) -> None:
    """saq's dequeue takes as many jobs as its queue has tasks waiting: the capture's
    Workers of one task each, started in turn, make every fetch take one job."""
    assert _fetched_rows(skewed, strategy) == [1, 1, 1]


def test_the_later_fetches_run_with_the_earlier_jobs_active(skewed: Any) -> None:
    """The Workers take turns: once the large tenant's first job is held, each later
    group_key dequeue walks past that tenant's queued jobs (`group_key NOT IN` the active
    groups) to a small tenant's; a fetch that ran before it would remove none."""
    runs = _runs(skewed, "saq_group_key")
    # saq stamps `scheduled` in whole seconds and the adapter enqueues a chunk at once:
    # the large jobs of the small ones' second may sit after them in its index.
    assert (runs["rows_removed"] >= LARGE - saq_adapter.ENQUEUE_CHUNK).all()
    plain = _runs(skewed, "saq")
    assert (plain["rows_removed"] == 0).all()


def test_group_key_holds_back_jobs_without_a_group(server: Server) -> None:
    """saq's dequeue skips `group_key NOT IN (the active groups)`: for a job without a
    group that is NULL, never true, while any grouped job is active. The ungrouped job
    waits for the grouped one to finish although a task is free."""
    config = {
        "schema": "saq_starved",
        "connection": connection_of(server.dsn).model_dump(),
        "mapping": "group_key",
    }
    with own_schema(server.dsn, config["schema"]):
        taken = asyncio.run(_dequeues(config))
    assert taken == ["grouped", None, "ungrouped"]


async def _dequeues(config: dict[str, Any]) -> list[str | None]:
    """A grouped job dequeued (active), an ungrouped one enqueued behind it: what the next
    dequeue gets while the first is active, and once it is finished."""
    async with saq_adapter._connected(config) as queue:
        await queue.enqueue("task", key="grouped", group_key="1")
        first = await queue.dequeue(timeout=1)
        assert first is not None
        await queue.enqueue("task", key="ungrouped")
        while_active = await queue.dequeue(timeout=1.5)
        await first.finish(saq_job.Status.COMPLETE)
        after = await queue.dequeue(timeout=1.5)
    return [job.key if job else None for job in (first, while_active, after)]


def test_a_stop_whose_cancellation_a_notification_swallows_still_ends(server: Server) -> None:
    """A notification that reaches the Worker's listening dequeue together with the
    stop's cancellation: on Python 3.11 `wait_for` returns the notification and drops the
    cancellation, and saq's stop would wait for that dequeue for ever. The adapter's stop
    cancels it again and the Worker ends."""
    config = {
        "schema": "saq_stop",
        "connection": connection_of(server.dsn).model_dump(),
        "mapping": "one_queue",
    }
    with own_schema(server.dsn, config["schema"]):
        again = asyncio.run(_stopped_as_notified(config))
    expected = 1 if sys.version_info < (3, 12) else 0
    assert again == expected


async def _stopped_as_notified(config: dict[str, Any]) -> int:
    async with saq_adapter._connected(config) as queue:

        async def noop(ctx: Any) -> None:
            return None

        worker = saq_worker.Worker(queue, functions=[("noop", noop)], concurrency=2)
        worker.SIGNALS = []
        running = asyncio.create_task(worker.start())
        while not queue._listener._subscriptions.get(saq_postgres.DEQUEUE):
            await asyncio.sleep(0.05)  # one of its dequeues is listening
        queue._listener.publish(saq_postgres.DEQUEUE, saq_postgres.DEQUEUE)
        again = await asyncio.wait_for(saq_adapter.stop_bounded(worker, recancel_s=0.5), 60)
        await asyncio.wait_for(running, 60)
    return again


@pytest.mark.parametrize(("retries", "after"), [(1, "aborted"), (2, "queued")])
def test_a_dead_workers_job_past_its_timeout_is_swept_as_its_retries_say(
    server: Server, retries: int, after: str
) -> None:
    """What the manifests promise of saq (saq.toml `recovery`, and `saq_recovery`'s): a
    job whose worker is gone stays active until it is past its timeout (10 s, as the
    adapter enqueues it); then a sweep aborts it, or, with retries 2, queues it again.
    The job's start is backdated 20 s rather than waited for, as saq's sweep runs only
    every 60 s; the abort's wait for a worker that will never answer is cut to 0.1 s."""
    config = {
        "schema": f"saq_swept_{retries}",
        "connection": connection_of(server.dsn).model_dump(),
        "mapping": "one_queue",
        "options": {"retries": retries},
    }
    with own_schema(server.dsn, config["schema"]):
        swept, status = asyncio.run(_swept(config))
    assert (swept, status) == (1, after)


async def _swept(config: dict[str, Any]) -> tuple[int, str]:
    async with saq_adapter._connected(config) as queue:
        await saq_adapter._enqueue_jobs(queue, False, [(1, 1, 0.0)], config["options"]["retries"])
        held = await queue.dequeue(timeout=5)  # as a worker's dequeue: active, started
        assert held is not None and held.timeout == 10
        held.attempts += 1  # as its Worker.process counts the run it begins
        await held.update()
        assert await queue.sweep(abort=0.1) == []  # within its timeout: not stuck
        held.started -= 20_000  # ms: its worker died 20 s ago
        await held.update()
        swept = await queue.sweep(abort=0.1)
        found = await queue.job(held.key)
        assert found is not None
    return len(swept), found.status.value


def test_the_books_hold_the_jobs_saqs_sweep_has_deleted_by_their_runs(server: Server) -> None:
    """saq keeps a finished job for its ttl (600 s, its default) and its sweep deletes it
    after: the task log carries each job's moments as saq_jobs held them, and once its
    sweep has deleted every one (their expiry brought forward rather than waited for),
    the books find each job once from the task log alone, at the same moments."""
    schema = "tqb_test_saq_swept_done"
    spec = ContractSpec(SAQ, "one_queue", Site(server.dsn, schema), 60.0, concurrency=2)
    batch = [(n, 1 + n % 2, 1.0) for n in range(1, 9)]
    with own_schema(server.dsn, schema):
        report, _ = worked(spec, batch)
        before = recorded(spec)
        config = spec.config("worker", connection_of(server.dsn)).model_dump(by_alias=True)
        kept_s, deleted = asyncio.run(_expired_and_swept(config))
        after = recorded(spec)
    assert [record.state for record in before] == ["done"] * len(batch)
    assert kept_s == [600] * len(batch) and deleted == len(batch) and after == []
    runs = {run.library_id: run for run in report.task_runs}
    for record in before:
        moments = (runs[record.id].enqueued_at, runs[record.id].started_at)
        assert moments == (record.enqueued_at, record.started_at)
        assert runs[record.id].finished_at == record.finished_at
    ledger = jobs.ledger_of(after, [report])
    assert sorted((r.job_id, r.tenant_id, r.status) for r in ledger.records) == [
        (n, t, "done") for n, t, _ in batch
    ]


async def _expired_and_swept(config: dict[str, Any]) -> tuple[list[int], int]:
    """Each finished job's ttl as saq kept it, and how many its own sweep deleted once
    their expiry is brought to the past (its sweep runs every 60 s)."""
    async with saq_adapter._connected(config) as queue:
        async with queue.pool.connection() as conn:
            found = await conn.execute(
                "select key from saq_jobs where queue = %s and status = 'complete'", (queue.name,)
            )
            keys = [key for (key,) in await found.fetchall()]
        kept_s = []
        for key in keys:
            job = await queue.job(key)
            assert job is not None
            kept_s.append(job.ttl)
            await queue.update(job, expire_at=1)  # epoch seconds: long past
        await queue.sweep()
        async with queue.pool.connection() as conn:
            left = await conn.execute(
                "select count(*) from saq_jobs where queue = %s", (queue.name,)
            )
            remaining = await left.fetchone()
    assert remaining is not None
    return kept_s, len(keys) - int(remaining[0])
