"""Tenant isolation on the real server: the policy denies by default, SET leaks through a
pool, SET LOCAL does not; PgBouncer where it is installed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from harness.experiments.isolation import (
    AppRole,
    IsolationSettings,
    PlannedJob,
    PoolKind,
    PoolResult,
    app_role,
    plan_jobs,
    reset_tables,
    run_isolation,
    run_job,
)
from harness.server.kinds import Server
from harness.server.pgbouncer import unavailable_reason
from harness.server.schema import own_schema
from tests.integration.test_cli_runs import alive, children_of, wait_for_line
from tests.integration.test_embedded import postgres_processes

# One server connection shared by two workers: transactions run one at a time, jobs are
# claimed in id order, so which job inherits which tenant follows from the seed alone.
SERIAL = IsolationSettings(jobs=60, tenants=4, unset_share=0.3, workers=2, pool_size=1, seed=7)
SCHEMA = "isolation_policy_test"


def session_leaks(plan: list[PlannedJob]) -> tuple[int, int]:
    """Under SET on one connection: (jobs that run as the previous job's other tenant,
    jobs without tenant before any tenant was set)."""
    last: int | None = None
    leaks = denied = 0
    for job in plan:
        if job.sets_tenant:
            last = job.tenant_id
        elif last is None:
            denied += 1
        elif last != job.tenant_id:
            leaks += 1
    return leaks, denied


def by_mode(results: list[PoolResult]) -> dict[str, dict[str, int]]:
    return {str(result.mode): result.counts() for result in results}


def assert_set_leaks_set_local_does_not(results: list[PoolResult]) -> None:
    counts = by_mode(results)
    leaks, denied_before_first = session_leaks(plan_jobs(SERIAL))
    unset = sum(not job.sets_tenant for job in plan_jobs(SERIAL))
    assert leaks > 0  # the seed gives leaks to find
    assert counts["set"]["leaks_seen"] == leaks
    assert counts["set"]["leaks_written"] == leaks
    assert counts["set"]["denied"] == denied_before_first
    assert counts["set_local"]["without_tenant"] == unset
    assert counts["set_local"]["leaks_seen"] == 0
    assert counts["set_local"]["other_rows_read"] == 0
    assert counts["set_local"]["leaks_written"] == 0
    assert counts["set_local"]["denied"] == unset


@pytest.fixture
def role(server: Server) -> Iterator[AppRole]:
    """The harness's app role over tables with two tenants' rows, written as the owner."""
    with own_schema(server.dsn, SCHEMA), app_role(server.dsn, SCHEMA) as created:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            reset_tables(conn, SCHEMA, created.name, plan_jobs(SERIAL))
            conn.execute("insert into tenant_notes values (1, 1, 'one'), (2, 2, 'two')")
        yield created


def test_no_tenant_set_sees_nothing_and_writes_nothing(role: AppRole) -> None:
    with psycopg.connect(role.dsn, autocommit=True) as conn:
        assert conn.execute("select count(*) from tenant_notes").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("insert into tenant_notes (job_id, body) values (9, 'x')")


def test_set_local_ends_with_its_transaction(role: AppRole) -> None:
    with psycopg.connect(role.dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("set local app.tenant_id = '1'")
            assert conn.execute("select tenant_id from tenant_notes").fetchall() == [(1,)]
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("insert into tenant_notes values (2, 9, 'for tenant 2')")
        # The setting now exists in the session as '': still denied, not an error.
        assert conn.execute("select count(*) from tenant_notes").fetchone() == (0,)


def test_the_app_role_is_bound_by_the_policy(server: Server, role: AppRole) -> None:
    with psycopg.connect(server.dsn) as conn:
        attributes = conn.execute(
            "select rolsuper, rolbypassrls from pg_roles where rolname = %s", (role.name,)
        ).fetchone()
        forced = conn.execute(
            "select relrowsecurity, relforcerowsecurity from pg_class where oid = %s::regclass",
            (f"{SCHEMA}.tenant_notes",),
        ).fetchone()
    assert attributes == (False, False)
    assert forced == (True, True)


def test_a_missing_grant_fails_the_job_rather_than_passing_for_a_denial(
    server: Server, role: AppRole
) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("revoke insert on {}.tenant_notes from {}").format(
                sql.Identifier(SCHEMA), sql.Identifier(role.name)
            )
        )
    refused = pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied")
    with psycopg.connect(role.dsn, autocommit=True) as conn, refused:
        run_job(conn, "set_local")


def test_psycopg_pool_set_leaks_set_local_does_not(server: Server) -> None:
    assert_set_leaks_set_local_does_not(run_isolation(server.dsn, SERIAL, ["psycopg"]))


def test_pgbouncer_set_leaks_set_local_does_not(server: Server) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    assert_set_leaks_set_local_does_not(run_isolation(server.dsn, SERIAL, ["pgbouncer"]))


def test_an_unavailable_pool_is_reported_skipped(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("harness.server.pgbouncer.pgbouncer_binary", lambda: None)
    pools: list[PoolKind] = ["pgbouncer"]
    (result,) = run_isolation(server.dsn, SERIAL, pools)
    assert result.mode is None
    assert result.skipped is not None and "not installed" in result.skipped


def test_command_leaves_no_role_and_writes_its_folder(server: Server, tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "isolation",
            "--jobs",
            "40",
            "--pool",
            "psycopg",
            "--strict",
            "--dsn",
            server.dsn,
            "--results-dir",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "SET LOCAL" in done.stdout
    (folder,) = (results / "isolation").iterdir()
    document = json.loads((folder / "isolation.json").read_text())
    assert (document["format_version"], document["status"]) == (2, "complete")
    assert document["set_local_leaked"] is False
    assert document["metadata"]["postgres"]["server_version_num"] >= 170000
    assert len((folder / "jobs.csv").read_text().splitlines()) == 1 + 2 * 40
    with psycopg.connect(server.dsn) as conn:
        left = conn.execute(
            "select rolname from pg_roles where rolname like 'harness_app_%' "
            "union all select nspname from pg_namespace where nspname like 'harness_%'"
        ).fetchall()
    assert left == []


def descendants(parent: int) -> set[int]:
    found, stack = set(), [parent]
    while stack:
        children = children_of(stack.pop())
        found.update(children)
        stack += children
    return found


# About 1.5 s per mode here (quiet; longer under load): a signal 0.3 s after SET is done
# lands inside SET LOCAL.
ISOLATION_JOBS = 1500


def start_isolation(tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "harness", "isolation", "--jobs", str(ISOLATION_JOBS)),
            *("--pool", "all", "--results-dir", str(tmp_path / "results")),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def interrupted(run: subprocess.Popen[str], sig: int, tmp_path: Path) -> dict:
    """Send the signal, wait for the end: exit 130, one line, no process of the run left.
    The folder's isolation.json."""
    started = descendants(run.pid)
    run.send_signal(sig)
    stdout, stderr = run.communicate(timeout=90)
    assert run.returncode == 130, stdout + stderr
    assert stderr.strip().startswith("interrupted")
    assert "Traceback" not in stderr
    deadline = time.monotonic() + 30  # a liveness bound: test_cli_runs.left_behind
    while (left := [pid for pid in started if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == []
    (folder,) = (tmp_path / "results" / "isolation").iterdir()
    document: dict = json.loads((folder / "isolation.json").read_text())
    assert (document["status"], document["format_version"]) == ("interrupted", 2)
    assert "This run was interrupted" in (folder / "isolation.md").read_text()
    return document


@pytest.mark.parametrize(
    "sig",
    [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.thorough)],
    ids=["ctrl-c", "sigterm"],
)
def test_an_interrupted_isolation_keeps_what_it_measured_marked_interrupted(
    tmp_path: Path, sig: int
) -> None:
    """Ctrl-C or SIGTERM while SET LOCAL is measured, SET done: exit 130, the folder kept
    with SET's counts and jobs, no server or pool process left (PgBouncer included: the
    pool is asked for by --pool all, and skipped where it is not installed)."""
    run = start_isolation(tmp_path)
    wait_for_line(run, f"psycopg_pool, SET: {ISOLATION_JOBS:,} jobs")
    time.sleep(0.3)
    assert descendants(run.pid), "the server should be running now"
    document = interrupted(run, sig, tmp_path)
    assert [(r["pool"], r["mode"], r["jobs"]) for r in document["results"]] == [
        ("psycopg", "set", ISOLATION_JOBS)
    ]
    folder = tmp_path / "results" / "isolation" / document["run_id"]
    rows = (folder / "jobs.csv").read_text().splitlines()
    assert len(rows) == 1 + ISOLATION_JOBS
    assert all(row.startswith("psycopg,set,") for row in rows[1:])
    data_dir = document["metadata"]["provider"]["data_dir"]
    assert postgres_processes(data_dir) == []
    assert not Path(data_dir).exists()


def test_an_isolation_interrupted_while_the_server_starts_keeps_its_folder(
    tmp_path: Path,
) -> None:
    """The folder is made before the server starts: a Ctrl-C then leaves it, marked."""
    run = start_isolation(tmp_path)
    wait_for_line(run, "Starting PostgreSQL")
    document = interrupted(run, signal.SIGINT, tmp_path)
    assert document["results"] == []
    assert "postgres" not in document["metadata"]  # what needs no server is recorded
    assert document["metadata"]["host"]["cpu_count"] >= 1
