"""Tenant isolation without a database: the plan, the counts, the table, PgBouncer's file."""

from __future__ import annotations

from pathlib import Path

from harness.experiments.isolation import (
    TABLE_HEADERS,
    IsolationSettings,
    JobOutcome,
    PoolResult,
    blocks,
    markdown,
    plan_jobs,
    set_tenant,
    table_rows,
)
from harness.server.pgbouncer import Login, config_text, login_for
from tests.conftest import harness_cli


def outcome(tenant: int, sets: bool, other_rows: int, written: int | None) -> JobOutcome:
    return JobOutcome(1, tenant, sets, written, other_rows, other_rows, written)


def test_the_plan_follows_the_seed_alone() -> None:
    settings = IsolationSettings(jobs=1000, tenants=5, unset_share=0.2, seed=3)
    plan = plan_jobs(settings)
    assert plan == plan_jobs(settings)
    assert plan != plan_jobs(IsolationSettings(jobs=1000, tenants=5, unset_share=0.2, seed=4))
    assert [job.job_id for job in plan] == list(range(1, 1001))
    assert {job.tenant_id for job in plan} == {1, 2, 3, 4, 5}
    assert 150 < sum(not job.sets_tenant for job in plan) < 250


def test_no_unset_share_means_every_job_sets_its_tenant() -> None:
    assert all(job.sets_tenant for job in plan_jobs(IsolationSettings(unset_share=0.0)))


def test_a_job_is_classified_from_what_it_saw_and_wrote() -> None:
    own = outcome(tenant=1, sets=True, other_rows=0, written=1)
    inherited = outcome(tenant=1, sets=False, other_rows=3, written=2)
    denied = outcome(tenant=1, sets=False, other_rows=0, written=None)
    assert (own.leak_seen, own.leak_written, own.denied) == (False, False, False)
    assert (inherited.leak_seen, inherited.leak_written, inherited.denied) == (True, True, False)
    assert (denied.leak_seen, denied.leak_written, denied.denied) == (False, False, True)
    result = PoolResult("psycopg", "set", [own, inherited, denied])
    assert result.counts() == {
        "jobs": 3,
        "without_tenant": 2,
        "leaks_seen": 1,
        "other_rows_read": 3,
        "leaks_written": 1,
        "denied": 1,
    }
    assert result.leaked


def test_the_table_shows_a_skipped_pool_with_its_reason() -> None:
    results = [
        PoolResult("psycopg", "set_local", [outcome(2, False, 0, None)]),
        PoolResult("pgbouncer", None, skipped="pgbouncer is not installed"),
    ]
    rows = table_rows(results)
    assert rows[0] == ["psycopg_pool", "SET LOCAL", "1", "1", "0", "0", "0", "1"]
    assert rows[1][:3] == [
        "PgBouncer (transaction mode)",
        "-",
        "skipped: pgbouncer is not installed",
    ]
    assert all(len(row) == len(TABLE_HEADERS) for row in rows)
    assert "| psycopg_pool | SET LOCAL |" in markdown(IsolationSettings(), results)


def test_the_tenant_is_set_by_set_or_set_local_as_a_literal() -> None:
    assert "set app.tenant_id = '7'" in set_tenant("set", 7).as_string(None)
    assert "set local app.tenant_id = '7'" in set_tenant("set_local", 7).as_string(None)


def test_the_policy_denies_by_default() -> None:
    policy = blocks()["policy"].sql
    assert "nullif(current_setting('app.tenant_id', true), '')::int" in policy
    assert "with check" in policy


def test_pgbouncer_pools_transactions_on_a_unix_socket_only(tmp_path: Path) -> None:
    login = login_for("host=/tmp/pg port=5432 dbname=bench user=app password=pw")
    assert login == Login(user="app", password="pw", dbname="bench", host="/tmp/pg", port="5432")
    text = config_text(login, tmp_path, pool_size=2)
    assert "pool_mode = transaction" in text
    assert "default_pool_size = 2" in text
    assert "listen_addr =\n" in text
    assert f"unix_socket_dir = {tmp_path}" in text


def test_an_unknown_pool_is_exit_2_before_any_server_starts() -> None:
    done = harness_cli("isolation", "--pool", "odbc")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --pool: unknown pool 'odbc'")
    assert "Starting PostgreSQL" not in done.stdout
