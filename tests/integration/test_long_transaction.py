"""A long transaction on the real server: it holds the horizon, and a run records it."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg

from harness.queues.base import Site
from harness.queues.sql.strategies import Strategy
from harness.run.long_transaction import Holder
from harness.run.scenario_run import RunOptions
from harness.scenario.model import LongTransaction
from harness.server.kinds import Server
from tests.conftest import harness_cli
from tests.integration.conftest import run_yaml
from tests.integration.test_adapters import FIXTURES, ON_PATH


def wait_for(condition, timeout_s: float = 10) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def dead_after_vacuum(conn: psycopg.Connection) -> int:
    """VACUUM reports the dead versions it was not allowed to remove as n_dead_tup."""
    conn.execute("vacuum jobs")
    row = conn.execute(
        "select n_dead_tup from pg_stat_user_tables where relid = 'jobs'::regclass"
    ).fetchone()
    assert row is not None
    return int(row[0])


def claim_and_complete(conn: psycopg.Connection, jobs: int) -> None:
    conn.execute("insert into jobs (tenant_id) select 1 from generate_series(1, %s)", (jobs,))
    conn.execute("update jobs set status = 'running', started_at = clock_timestamp()")
    conn.execute("update jobs set status = 'done', finished_at = clock_timestamp()")


def test_the_holder_keeps_the_horizon_until_it_ends(queue: psycopg.Connection) -> None:
    start = multiprocessing.get_context("spawn").Event()
    hold = LongTransaction(from_s=0, for_s=600, sample_ms=50)
    with Holder(Site(queue.info.dsn, "queue_test"), hold, start) as holder:
        start.set()
        wait_for(lambda: holder.record.began_at is not None)
        xmin = queue.execute(
            "select backend_xmin from pg_stat_activity where pid = %s", (holder.pid,)
        ).fetchone()
        assert xmin is not None and xmin[0] is not None
        claim_and_complete(queue, 100)
        assert dead_after_vacuum(queue) == 200  # both updates' old versions, all kept
        wait_for(lambda: len(holder.record.samples) >= 2)
    assert holder.record.cut_short  # ended by the context, before its 600 s
    assert dead_after_vacuum(queue) == 0
    during = [s for s in holder.record.samples if s["phase"] == "during"]
    assert during and all(s["holder_xmin_age"] is not None for s in during)


def test_the_sampled_dequeue_walks_the_versions_the_hold_keeps(
    queue: psycopg.Connection, strategies: dict[str, Strategy]
) -> None:
    """The holder's samples explain the strategy's dequeue: 5,000 of a tenant's jobs
    claimed and completed while the horizon is held leave their queued versions, and the
    dequeue of the one job queued behind them walks past each (67 buffers here, against
    4 before them). A fixed amount of churn, in the test's own statements: in a run, how
    many jobs churn during the hold, and so how many more buffers the dequeue reads,
    depends on how fast the machine is (at load 8 a run's dequeue read no more buffers
    during its hold than in its first sample)."""
    start = multiprocessing.get_context("spawn").Event()
    hold = LongTransaction(from_s=0, for_s=600, sample_ms=20)
    dequeue = strategies["round_robin"].sql("dequeue")
    queue.execute("insert into queue_tenants (tenant_id) values (1)")
    with Holder(Site(queue.info.dsn, "queue_test"), hold, start, dequeue) as holder:
        start.set()
        before = next_sample(holder, phase="during")
        claim_and_complete(queue, 5000)
        queue.execute("insert into jobs (tenant_id) values (1)")
        held = next_sample(holder, phase="during")
    assert held["dequeue_buffers"] > 10 * before["dequeue_buffers"] > 0, (before, held)


def next_sample(holder: Holder, phase: str) -> dict[str, Any]:
    """The first sample the holder takes from now on, in `phase`."""
    taken = len(holder.record.samples)
    wait_for(lambda: len(holder.record.samples) > taken + 1)
    sample = holder.record.samples[taken + 1]  # begun after this call: sees what came before
    assert sample["phase"] == phase, sample
    return sample


def test_vacuum_after_runs_once_the_hold_ends(queue: psycopg.Connection) -> None:
    start = multiprocessing.get_context("spawn").Event()
    hold = LongTransaction(from_s=0, for_s=0.2, sample_ms=50, vacuum_after=True)
    with Holder(Site(queue.info.dsn, "queue_test"), hold, start) as holder:
        start.set()
        wait_for(lambda: any(s["phase"] == "after" for s in holder.record.samples))
    assert holder.record.vacuumed and not holder.record.cut_short
    after = [s for s in holder.record.samples if s["phase"] == "after"]
    assert after[0]["jobs_vacuums"] == 1


SCENARIO = """\
name: bloat
strategies: [round_robin]
workers: 2
repetitions: 1
poll_interval_ms: 2
timeout_s: 60
long_transaction: {from_s: 0.5, for_s: 1.5, sample_ms: 100}
tenant_groups:
  - {name: churning, tenants: 5, jobs_per_tenant: 2, duration_ms: 1, repeat: 60,
     every_s: 0.05}
"""


def test_a_run_records_the_hold_and_the_dead_versions_it_left(
    server: Server, tmp_path: Path
) -> None:
    outcome = run_yaml(server, tmp_path, SCENARIO, RunOptions())  # its figures too
    run = outcome.folder.path
    window = outcome.document.repetitions[0].long_transaction
    assert window is not None and not window["cut_short"]
    samples = pd.read_csv(run / "bloat.csv")
    assert list(dict.fromkeys(samples["phase"])) == ["before", "during", "after"]
    held = samples["phase"] == "during"
    assert samples.loc[held, "holder_xmin_age"].notna().all()
    assert samples.loc[~held, "holder_xmin_age"].isna().all()
    last_held = samples[held].iloc[-1]
    jobs = pd.read_csv(run / "jobs.csv", parse_dates=["started_at"])
    began, sampled = pd.Timestamp(window["began_at"]), pd.Timestamp(last_held["at"])
    # Every job claimed in the hold left its queued version dead; the margin leaves out
    # claims whose transaction may not have committed when the sample was taken.
    claimed = jobs["started_at"].between(began, sampled - pd.Timedelta(seconds=0.2)).sum()
    assert claimed > 50
    assert last_held["jobs_dead_versions"] >= claimed
    # The sampled dequeue's cost in every sample (what the hold does to it, by how much
    # churn the machine managed: test_the_sampled_dequeue_walks_the_versions_the_hold_keeps)
    assert samples["dequeue_buffers"].notna().all() and samples["dequeue_ms"].notna().all()
    # Once the horizon moves on, page pruning reclaims what the hold kept.
    assert samples["jobs_dead_versions"].iloc[-1] < last_held["jobs_dead_versions"]
    assert outcome.tables.bloat is not None and len(outcome.tables.bloat) == 1
    assert (run / "bloat-summary.csv").exists() and (run / "bloat.png").exists()
    assert "Long transaction and bloat" in (run / "summary.md").read_text()
    assert "Long transaction and bloat" in (run / "report.html").read_text()


def test_a_librarys_tables_are_sampled_as_one(queue: psycopg.Connection) -> None:
    """A library's queue: every table of its schemas, whatever their names, summed. Two
    tables' 100 rows each updated twice while the horizon is held leave 400 dead
    versions (pgstattuple), and 200 live rows; vacuum_after vacuums them all."""
    queue.execute("create schema if not exists lib_hold")
    for table in ("lib_hold.first", "lib_hold.second"):
        queue.execute(f"drop table if exists {table}")
        queue.execute(f"create table {table} (id int primary key, n int)")
        queue.execute(f"insert into {table} select i, 0 from generate_series(1, 100) i")
    start = multiprocessing.get_context("spawn").Event()
    hold = LongTransaction(from_s=0, for_s=600, sample_ms=50, vacuum_after=True)
    site = Site(queue.info.dsn, "queue_test")
    with Holder(site, hold, start, schemas=("lib_hold",)) as holder:
        start.set()
        wait_for(lambda: holder.record.began_at is not None)
        for _ in range(2):
            for table in ("lib_hold.first", "lib_hold.second"):
                queue.execute(f"update {table} set n = n + 1")
        seen = len(holder.record.samples)
        wait_for(lambda: len(holder.record.samples) >= seen + 2)
    last = holder.record.samples[-1]
    assert last["phase"] == "during" and last["jobs_dead_versions"] == 400
    assert last["tenants_dead_versions"] is None and last["tenants_live"] is None
    assert last["dequeue_buffers"] is None  # a library's fetch is not the harness's to run
    queue.execute("drop schema lib_hold cascade")


# The same churn through the fixture adapter's queue (a library's, its tables its own)
LIBRARY_SCENARIO = SCENARIO.replace("name: bloat\n", "name: bloat-library\n").replace(
    "strategies: [round_robin]", "strategies: [pyqueue]"
)


def test_a_librarys_run_records_the_hold_over_its_own_tables(
    server: Server, tmp_path: Path
) -> None:
    """The fixture adapter's queue (tests/fixtures/adapters/pyqueue: its claim and its
    finish each update the job) under a held snapshot: every job it claimed in the hold
    left at least its claimed version dead in its own table, sampled as the library's."""
    path = tmp_path / "bloat.yaml"
    path.write_text(LIBRARY_SCENARIO)
    results = tmp_path / "results"
    options = ["--adapters-dir", str(FIXTURES), "--dsn", server.dsn, "--results-dir", str(results)]
    done = harness_cli("run", str(path), *options, "--no-plots", timeout=180, env=ON_PATH)
    assert done.returncode == 0, done.stdout + done.stderr
    run = (results / "latest").resolve()
    samples = pd.read_csv(run / "bloat.csv")
    assert list(dict.fromkeys(samples["phase"])) == ["before", "during", "after"]
    held = samples["phase"] == "during"
    assert samples.loc[held, "holder_xmin_age"].notna().all()
    assert samples["dequeue_buffers"].isna().all()  # pyqueue's claim runs inside pyqueue
    last_held = samples[held].iloc[-1]
    windows = pd.read_json(run / "run.json", typ="series")["repetitions"]
    window = windows[0]["long_transaction"]
    jobs = pd.read_csv(run / "jobs.csv", parse_dates=["started_at"])
    began, sampled = pd.Timestamp(window["began_at"]), pd.Timestamp(last_held["at"])
    claimed = jobs["started_at"].between(began, sampled - pd.Timedelta(seconds=0.2)).sum()
    assert claimed > 20
    assert last_held["jobs_dead_versions"] >= claimed
    assert "Long transaction and bloat" in (run / "report.html").read_text()
