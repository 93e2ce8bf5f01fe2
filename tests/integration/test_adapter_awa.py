"""awa's adapter beyond what the catalog-wide tests check: its refusal of a queue per
tenant the server has no connections for (at install, and so as a capture's skip), the
relay that hands its sessions' notices over, and what its mappings' options and the
config make of its queues, poll, pool and queue ring."""

from __future__ import annotations

import asyncio
import importlib.util
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from harness.queues.adapters.awa import awa_adapter as adapter
from harness.queues.adapters.awa.awa_adapter import Setup, queue_of
from harness.queues.adapters.python import notice_relay
from harness.queues.base import Site
from harness.queues.contract import jobs
from harness.queues.contract.manifest import load_adapters
from harness.queues.contract.process import run_role
from harness.queues.contract.protocol import Connection, Installed, Refused
from harness.queues.contract.queue import ContractSpec, connection_of, recorded
from harness.run.scenario_run import RunOptions
from harness.server.connections import connect
from harness.server.kinds import Server
from harness.server.schema import own_schema, recreate
from tests.integration.conftest import run_yaml, worked

AWA = load_adapters()["awa"]
CONNECTION = Connection(host="/run/pg", port=5433, user="u", password="p@ss", dbname="d")
NO_AWA = pytest.mark.skipif(
    importlib.util.find_spec("awa") is None,
    reason="awa-pg ships wheels only (Linux x86_64/aarch64 with glibc, macOS) and none is "
    "installed here: pip install 'tenant-queue-bench[libraries]' where one exists",
)


def config(mapping: str, tenants: int = 3, **more: Any) -> dict[str, Any]:
    """A config as the harness hands it to the adapter, with its mapping's options."""
    ids = tuple(range(1, tenants + 1))
    spec = ContractSpec(
        AWA, mapping, Site("", "tqb_test"), 10.0, concurrency=4, tenants=ids, weights=ids
    )
    return {**spec.config("worker", CONNECTION).model_dump(by_alias=True), **more}


def _awa_schema(server: Server) -> bool:
    with connect(server.dsn) as conn:
        return conn.execute("select to_regnamespace('awa') is not null").fetchone() == (True,)


def test_its_install_refuses_a_queue_per_tenant_the_server_has_no_connections_for(
    server: Server,
) -> None:
    """Its runtime holds a connection per queue: 200 tenants' queues on a server of 100
    connections are refused with the reason, before anything of awa is made."""
    tenants = tuple(range(1, 201))
    site = Site(server.dsn, "tqb_test_awa_refused")
    spec = ContractSpec(AWA, "weighted_queues", site, 10.0, tenants=tenants, weights=tenants)
    with own_schema(server.dsn, site.schema):
        _, ended = run_role(AWA, spec.config("install"), (Installed, Refused))
    assert isinstance(ended, Refused)
    assert "a queue per tenant, 200 of them, needs about 216 connections" in ended.reason
    assert "its docs size the pool at 820" in ended.reason
    assert not _awa_schema(server)


def test_one_queue_needs_few_connections_whatever_the_tenants() -> None:
    assert Setup.of(config("one_queue", tenants=10_000)).refused(20) is None
    assert Setup.of(config("weighted_queues", tenants=4)).refused(20) is None
    assert Setup.of(config("weighted_queues", tenants=5)).refused(20) is not None


PLANS = {
    "name": "awa-plans",
    "workers": 2,
    "strategies": ["fifo", "awa_weighted_queues"],
    "repetitions": 1,
    "poll_interval_ms": 10,
    "timeout_s": 20,
    "tenant_cap": 1,
    "backlog": {
        "groups": [
            {"name": "large", "tenants": 1, "jobs_per_tenant": 200},
            {"name": "small", "tenants": 3, "jobs_per_tenant": 1},
            {"name": "idle", "tenants": 200, "jobs_per_tenant": 0},
        ]
    },
    "explain": {"repeat": 1},
}


@NO_AWA
def test_a_capture_its_install_refuses_is_skipped_saying_why(
    server: Server, tmp_path: Path
) -> None:
    """The refusal as a capture's skip reason (harness explain): the others are captured;
    nothing of awa is made."""
    outcome = run_yaml(
        server, tmp_path, yaml.safe_dump(PLANS), RunOptions(timed=False, plots=False)
    )
    plans = outcome.tables.plans
    assert plans is not None
    by_strategy = plans.set_index("strategy")
    assert by_strategy.loc["fifo", "skipped"] == ""
    skipped = str(by_strategy.loc["awa_weighted_queues", "skipped"])
    assert "a queue per tenant, 204 of them, needs about 220 connections" in skipped
    assert not _awa_schema(server)


def test_the_relay_copies_a_session_and_hands_over_its_notices(
    server: Server, tmp_path: Path
) -> None:
    """A driver that keeps notices to itself (awa's) is given the relay as its server: the
    session goes through unchanged, and every notice's message reaches the harness."""
    got: list[str] = []
    relay = notice_relay.Relay(server.dsn, got.append, str(tmp_path / "relay"))
    relay.start()
    try:
        through = psycopg.conninfo.make_conninfo(
            server.dsn, host=relay.folder, port=notice_relay.PORT, sslmode="disable"
        )
        with psycopg.connect(through, autocommit=True) as conn:
            conn.execute("set client_min_messages = notice")
            conn.execute("do $$ begin raise notice 'relayed %', 42; end $$")
            assert conn.execute("select 7").fetchone() == (7,)
    finally:
        relay.close()
    assert got == ["relayed 42"]
    assert not Path(relay.folder).exists()


def test_a_capture_connects_through_the_relay_with_auto_explain() -> None:
    url = notice_relay.sqlx_url(config("one_queue", explain_options="-c a.b=on"), "/tmp/x/relay")
    assert url.startswith("postgres://u:p%40ss@localhost/d?")
    assert "host=%2Ftmp%2Fx%2Frelay&port=5432" in url and "sslmode=disable" in url
    assert "options=-c%20a.b%3Don" in url
    assert "host=%2Frun%2Fpg&port=5433" in notice_relay.sqlx_url(config("one_queue"))


def test_each_tenants_queue_takes_its_weight_from_the_config() -> None:
    setup = Setup.of(config("weighted_queues", tenants=3, weights=[5, 1, 2]))
    queues = adapter._queue_configs(setup)
    assert [(q["name"], q["weight"]) for q in queues] == [
        ("tenant-1", 5),
        ("tenant-2", 1),
        ("tenant-3", 2),
    ]
    assert adapter._start_options(setup)["global_max_workers"] == 4


def test_its_queue_ring_rotates_at_its_own_pace_whatever_the_run_lasts() -> None:
    """The worker leaves awa's rotation of its queue ring at its default (a second), and
    says so: what it keeps of finished jobs is awa's."""
    setup = Setup.of(config("one_queue", timeout_s=7200.0))
    assert "queue_storage_queue_rotate_interval_ms" not in adapter._start_options(setup)
    said = adapter.versions(config("one_queue", timeout_s=7200.0)).settings
    assert said["queue_storage_queue_rotate_interval_ms"] == "1000 (its default)"


@NO_AWA
def test_the_books_hold_the_jobs_awa_has_pruned_by_their_runs(server: Server) -> None:
    """awa prunes its finished jobs as its queue ring rotates (a second a slot, its
    default): the jobs the ledger reads before are the same jobs, at the same moments, as
    the task log's; once awa has pruned every one, the books find each job once from the
    task log alone, its enqueue awa's and its moments in order."""
    schema = "tqb_test_awa_pruned"
    spec = ContractSpec(AWA, "one_queue", Site(server.dsn, schema), 60.0, concurrency=2)
    config = spec.config("worker", connection_of(server.dsn)).model_dump(by_alias=True)
    batch = [(n, 1 + n % 2, 1.0) for n in range(1, 9)]
    with own_schema(server.dsn, schema, outside=("awa",)) as owned:
        with connect(server.dsn) as conn:  # as a repetition makes them: awa's marked
            recreate(conn, schema, outside=("awa",))
        report, found = worked(spec, batch, lambda: (list(adapter.ledger(config)), _pruned(server)))
        assert found is not None
        before = {record.id: record for record in found[0]}
        after = recorded(spec)
    runs = {run.library_id: run for run in report.task_runs}
    assert sorted(run.job for run in runs.values()) == list(range(1, 9))
    for key, record in before.items():  # read before the ring pruned them: the same moments
        run = runs[key]
        assert record.state == "done" and run.enqueued_at == record.enqueued_at
        assert record.started_at is not None and run.started_at is not None
        assert record.started_at <= run.started_at  # its claim, then its handler
    assert found[1] and after == []
    assert owned.left is None and not _awa_schema(server)  # nothing left for the next test
    ledger = jobs.ledger_of(after, [report])
    assert sorted((r.job_id, r.tenant_id, r.status) for r in ledger.records) == [
        (n, t, "done") for n, t, _ in batch
    ]
    assert all(
        r.enqueued_at is not None
        and r.started_at is not None
        and r.finished_at is not None
        and r.enqueued_at <= r.started_at <= r.finished_at
        for r in ledger.records
    )


def _pruned(server: Server, within_s: float = 90.0) -> bool:
    """Whether awa's view holds none of its finished jobs (its ring rotated past their
    segment) within `within_s`."""
    deadline = time.monotonic() + within_s
    with connect(server.dsn) as conn:
        while time.monotonic() < deadline:
            found = conn.execute("select count(*) from awa.jobs where state = 'completed'")
            if found.fetchone() == (0,):
                return True
            time.sleep(0.5)
    return False


def test_tuned_it_polls_at_its_own_200_ms_and_says_so() -> None:
    tuned = Setup.of(config("one_queue_tuned", tenants=11))
    assert (tuned.poll_ms, tuned.pool) == (200, 24)
    assert adapter.departures(tuned, 10.0) == [
        "polls every 0.2 s, not every 10 ms as the scenario asks (awa's own poll, as its "
        "maintainers run it: a NOTIFY on every enqueue and a slot its queue frees wake its "
        "dispatchers)"
    ]
    assert adapter.departures(tuned, 500.0) == []
    default = Setup.of(config("one_queue", tenants=11))
    assert (default.poll_ms, default.pool, adapter.departures(default, 10.0)) == (10, 10, [])
    assert Setup.of(config("weighted_queues", tenants=11)).pool == 64


@NO_AWA
def test_the_ledger_reads_a_job_in_an_open_claim_as_running(server: Server) -> None:
    """awa 0.6's `awa.jobs` view does not show a job claimed and not yet closed as
    running (awa#422): the ledger reads the claim tables beside it. Three jobs enqueued
    through awa, each tenant's on its own queue; two claimed by awa's own claim function
    as its dispatcher calls it (one with a deadline: a row of lease_claims; one without:
    an item of a compact lease_claim_batches row), neither completed, as a killed worker
    leaves them: running, with their numbers and tenants; the third still waiting."""
    schema = "tqb_test_awa_claims"
    spec = ContractSpec(
        AWA, "weighted_queues", Site(server.dsn, schema), 30.0, tenants=(1, 2, 3), weights=(1, 1, 1)
    )
    config = spec.config("worker", connection_of(server.dsn)).model_dump(by_alias=True)
    with own_schema(server.dsn, schema, outside=("awa",)) as owned:
        with connect(server.dsn) as conn:  # as a repetition makes them: awa's marked
            recreate(conn, schema, outside=("awa",))
        assert adapter.install(config) is None
        asyncio.run(_enqueued_and_resumed(config, [(1, 1, 5.0), (2, 2, 5.0), (3, 3, 5.0)]))
        claimed = [_claimed(server, queue_of(1), 30.0), _claimed(server, queue_of(2), 0.0)]
        with connect(server.dsn) as conn:
            row_local = conn.execute("select count(*) from awa.lease_claims").fetchone()
            compact = conn.execute("select count(*) from awa.lease_claim_batches").fetchone()
        ledger = sorted((r.job, r.tenant, r.state) for r in adapter.ledger(config))
    assert [len(rows) for rows in claimed] == [1, 1]
    assert (row_local, compact) == ((1,), (1,))
    assert ledger == [(1, 1, "running"), (2, 2, "running"), (3, 3, "waiting")]
    assert owned.left is None and not _awa_schema(server)  # nothing left for the next test


def _claimed(server: Server, queue: str, deadline_s: float) -> list[tuple[int]]:
    """A job of `queue` claimed by awa's claim function, as its dispatcher calls it."""
    with connect(server.dsn) as conn:
        return conn.execute(
            "select job_id from awa.claim_ready_runtime(%s, 1, %s, 0)", (queue, deadline_s)
        ).fetchall()


async def _enqueued_and_resumed(config: dict[str, Any], jobs: list[tuple[int, int, float]]) -> None:
    async with adapter.enqueuer(config) as enqueue:
        await enqueue(jobs)
    async with adapter._client(config) as client:
        for queue in Setup.of(config).queues:  # paused at install, resumed at the start
            await client.resume_queue(queue)
