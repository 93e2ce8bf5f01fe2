"""A horizon on the real server: its sampler's figures against a table whose dead tuples
are made on purpose, its held phase's readers, and a short run end to end."""

from __future__ import annotations

import csv
import json
import multiprocessing
import signal
from pathlib import Path

import pandas as pd
import psycopg
import pytest

from harness.queues.base import Site
from harness.run.horizon import HorizonSampler
from harness.run.long_transaction import Holder, place_pgstattuple, release_pgstattuple
from harness.run.scenario_run import RunOptions
from harness.scenario.model import Horizon
from harness.server.kinds import Server
from tests.conftest import harness_cli
from tests.integration.conftest import run_yaml
from tests.integration.test_cli_runs import start_run
from tests.integration.test_long_transaction import wait_for

TINY = """
name: horizon-tiny
seed: 7
strategies: [fifo]
workers: 2
repetitions: 1
timeout_s: 60
horizon:
  duration_s: 12
  warmup_s: 1
  held: {from_s: 7, for_s: 2.5, readers: 2}
  sample_s: 1
  window_s: 3
  explain_every_s: 2
  explain_for_s: 1.5
tenant_groups:
  - {name: busy, tenants: 2, arrival: poisson, rate_per_s: 25, window_s: 12, duration_ms: 1}
  - {name: quiet, tenants: 20, arrival: poisson, rate_per_s: 15, window_s: 12, duration_ms: 1}
"""

HORIZON = Horizon.model_validate(
    {
        "duration_s": 600,
        "warmup_s": 0,
        "held": {"from_s": 0, "for_s": 600, "readers": 2},
        "sample_s": 1,
        "window_s": 10,
    }
)


def test_the_sampler_counts_the_dead_tuples_made_on_purpose(queue: psycopg.Connection) -> None:
    """1,000 rows, 400 of them deleted, with autovacuum off on the table: the sampler's
    dead tuples (the statistics', flushed by the deleting session) are 400, its live
    600; pgstattuple's dead share is that of the 400 deleted rows' bytes; the table's
    size is pg_relation_size's; its index is sampled beside it."""
    queue.execute("create table made (id int primary key, pad text)")
    queue.execute("alter table made set (autovacuum_enabled = off)")
    queue.execute("insert into made select g, repeat('x', 100) from generate_series(1, 1000) g")
    queue.execute("delete from made where id <= 400")
    # an adapter's ledger in the run's schema (graphile-worker's finished jobs): the
    # harness's own, never the queue's size or rows
    queue.execute("create table harness_ledger (id int primary key)")
    queue.execute("insert into harness_ledger select generate_series(1, 5000)")
    queue.execute("select pg_stat_force_next_flush()")
    queue.commit()
    with psycopg.connect(queue.info.dsn, autocommit=True) as conn:
        where = place_pgstattuple(conn)
        assert where is not None  # the embedded 17.10 build ships contrib's pgstattuple
        conn.execute(f"set search_path to queue_test, {where}")
        sampler = HorizonSampler(conn, HORIZON, ["queue_test"], pgstattuple=True)
        sampler.tick(0.0)
        sampler.tick(1.0)
    release_pgstattuple(queue.info.dsn)
    rows = pd.DataFrame(sampler.record.relations)
    made = rows[(rows["relation"] == "made") & (rows["t_s"] == 1.0)].iloc[0]
    assert (made["live"], made["dead"]) == (600, 400)
    size = queue.execute("select pg_relation_size('made')").fetchone()
    assert size is not None and made["bytes"] == size[0]
    index = rows[(rows["relation"] == "made_pkey") & (rows["t_s"] == 1.0)].iloc[0]
    assert index["kind"] == "index" and index["table"] == "made" and index["bytes"] > 0
    assert not rows["relation"].str.startswith("harness_").any()
    assert set(rows.loc[rows["kind"] == "table", "relation"]) >= {"made"}
    series = sampler.record.series[-1]
    assert series["live"] == rows.loc[(rows["t_s"] == 1.0), "live"].sum() < 5000
    assert series["dead"] >= 400 and series["wal_bytes"] > 0 and series["oldest_xmin_age"] >= 0
    assert 0 <= series["notify_usage"] <= 1
    assert [row["t_s"] for row in sampler.record.waits] == sorted(
        row["t_s"] for row in sampler.record.waits
    )
    boundary = pd.DataFrame(sampler.record.pgstattuple)  # the start's boundary: once
    assert list(boundary["boundary"].unique()) == ["start->held"]
    assert "harness_ledger" not in set(boundary["relation"])
    share = boundary[boundary["relation"] == "made"]["dead_percent"].iloc[0]
    # 400 of 1,000 rows of one width: 40 % of the tuples' bytes, which fill about 87 % of
    # each page (the rest: page and line-pointer headers, the last page's free space)
    assert 30 < share < 40


def test_the_held_phase_readers_each_hold_a_snapshot(queue: psycopg.Connection) -> None:
    """Two readers (the holder and one more), each with an xmin, both gone at the end."""
    start = multiprocessing.get_context("spawn").Event()
    site = Site(queue.info.dsn, "queue_test")
    with Holder(site, HORIZON.hold(), start, horizon=HORIZON) as holder:
        start.set()
        wait_for(lambda: holder.record.began_at is not None)
        wait_for(lambda: len(holder.record.horizon.series) >= 2)  # type: ignore[union-attr]
        held = queue.execute(
            "select count(*) from pg_stat_activity where backend_xmin is not null "
            "and state = 'idle in transaction' and datname = current_database()"
        ).fetchone()
        assert held is not None and held[0] == 2
    assert holder.record.cut_short
    series = holder.record.horizon.series  # type: ignore[union-attr]
    assert all(row["phase"] == "held" for row in series)
    assert max(row["oldest_xmin_age"] for row in series) >= 0


def test_a_short_horizon_runs_end_to_end(server: Server, tmp_path: Path) -> None:
    """12 s of FIFO through the four phases: books balanced; the series sampled every
    second with no gap over two intervals; the held phase's readers pin the oldest xmin
    above anything the steady phase saw; the dequeue explained every 2 s; per-window
    waits, the drift and its verdict derived, and the report and results.json have them."""
    rendered = run_yaml(server, tmp_path, TINY, RunOptions(plots=False))
    run = rendered.folder.path
    (entry,) = rendered.document.repetitions
    assert (rendered.document.status, entry.books) == ("complete", "balanced")
    series = pd.read_csv(run / "horizon.csv")
    assert series["t_s"].diff().max() <= 2
    assert list(dict.fromkeys(series["phase"])) == ["warmup", "steady", "held", "recovery"]
    by_phase = series.groupby("phase")["oldest_xmin_age"].max()
    assert by_phase["held"] > by_phase["steady"]
    relations = pd.read_csv(run / "horizon-relations.csv")
    assert {"jobs", "jobs_pkey", "queue_tenants"} <= set(relations["relation"])
    fetches = pd.read_csv(run / "fetch-plans.csv")
    assert len(fetches) >= 6 and fetches["at_s"].diff().max() <= 3
    # the node that read the most of its own: FIFO's index (on empty tables, LockRows)
    assert fetches["top_node"].mode()[0] == "Index Scan using jobs_queued_fifo on jobs"
    windows = pd.read_csv(run / "horizon-windows.csv")
    assert set(windows["tenant_class"]) == {"busy", "quiet", "all"}
    assert windows.groupby("tenant_class")["jobs"].sum()["all"] == entry.jobs
    drift = pd.read_csv(run / "horizon-drift.csv")
    assert drift["verdict"].iloc[0] in {"stable", "growing", "recovering"}
    assert drift["size_last"].iloc[0] >= drift["size_first"].iloc[0] > 0
    assert drift["sample_gaps"].iloc[0] == 0 and drift["samples"].iloc[0] == len(series)
    over = rendered.document.metadata["host"]["over_the_run"]
    assert 0 < over["cpu_busy_share"] <= 1  # the run's own work at least
    assert "Horizon: drift over a long steady run" in (run / "report.html").read_text()
    assert "horizon: dead tuples, peak" in (run / "results.json").read_text()


@pytest.mark.thorough  # the stretch itself: tests/unit/test_horizon_input.py
def test_duration_stretches_a_horizon_and_the_run_keeps_what_ran(
    server: Server, tmp_path: Path
) -> None:
    """--duration 14 on the 12 s scenario: the phases scaled by 14/12, the streams and
    the timeout 2 s longer, the run folder's scenario.yaml what ran."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    results = tmp_path / "results"
    options = ["--dsn", server.dsn, "--results-dir", str(results), "--no-plots"]
    done = harness_cli("run", str(path), "--duration", "14", *options, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = (results / "latest" / "scenario.yaml").read_text()
    assert ran.startswith("# harness run --duration 14:")
    series = pd.read_csv(results / "latest" / "horizon.csv")
    # past the unstretched 12 s: the last sample, the holder's as the repetition ends,
    # within a sample (1 s) of 14 s on its clock (13.99 s with another test beside it)
    assert series["t_s"].max() >= 14 - 1
    assert series.loc[series["phase"] == "held", "t_s"].min() >= 7 * 14 / 12 - 1


LIBRARY = TINY.replace("name: horizon-tiny", "name: horizon-tiny-library").replace(
    "strategies: [fifo]", "strategies: [procrastinate]"
)


@pytest.mark.libraries
def test_a_librarys_short_horizon_samples_its_own_tables_and_fetch(
    server: Server, tmp_path: Path
) -> None:
    """procrastinate for 12 s: its own tables and indexes sampled, its fetch explained
    by auto_explain in its workers' sessions only while the gate was open (1.5 s every
    2 s, from 0), books balanced, and a verdict."""
    rendered = run_yaml(server, tmp_path, LIBRARY, RunOptions(plots=False))
    run = rendered.folder.path
    (entry,) = rendered.document.repetitions
    assert (rendered.document.status, entry.books) == ("complete", "balanced")
    relations = pd.read_csv(run / "horizon-relations.csv")
    assert "procrastinate_jobs" in set(relations["relation"])
    assert set(relations["kind"]) == {"table", "index"}
    fetches = pd.read_csv(run / "fetch-plans.csv")
    assert len(fetches) > 0
    # each plan within a gate's window (its arrival: up to a poll after the close)
    assert ((fetches["at_s"] % 2) <= 1.5 + 0.5).all(), fetches["at_s"].tolist()
    drift = pd.read_csv(run / "horizon-drift.csv")
    assert drift["verdict"].iloc[0] in {"stable", "growing", "recovering"}


CUT = (
    TINY.replace("name: horizon-tiny", "name: horizon-cut")
    .replace(
        """  duration_s: 12
  warmup_s: 1
  held: {from_s: 7, for_s: 2.5, readers: 2}
  sample_s: 1
  window_s: 3""",
        """  duration_s: 20
  warmup_s: 1
  held: {from_s: 14, for_s: 3, readers: 2}
  sample_s: 1
  window_s: 2""",
    )
    .replace("window_s: 12, duration_ms", "window_s: 20, duration_ms")
)


def test_an_interrupted_horizon_keeps_its_samples_and_its_report_renders(
    server: Server, tmp_path: Path
) -> None:
    """A 20 s horizon sent Ctrl-C 6 s into its steady phase (seen in horizon.csv, which
    fills as it is sampled): exit 130, run.json interrupted with the repetition cut and
    its latest sample; horizon.csv every second to the cut (the holder's last sample, at
    the interrupt); the drift over the steady phase's whole windows before the cut; and
    `harness report` draws the horizon up to it."""
    assert "duration_s: 20" in CUT and "held: {from_s: 14" in CUT
    run = start_run(tmp_path, CUT, "run", "--dsn", server.dsn)
    latest = tmp_path / "results" / "latest"
    try:
        wait_for(lambda: _sampled_to(latest / "horizon.csv") >= 6, timeout_s=60)
    finally:
        run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=90)
    assert run.returncode == 130, stderr
    assert stderr.strip().startswith("interrupted") and "Traceback" not in stderr
    document = json.loads((latest / "run.json").read_text())
    assert (document["status"], document["repetitions"]) == ("interrupted", [])
    assert document["metadata"]["host"]["over_the_run"]["load_average_end"] is not None
    cut = document["cut"]
    assert (cut["strategy"], cut["workers"], cut["repetition"]) == ("fifo", 2, 1)
    series = pd.read_csv(latest / "horizon.csv")
    assert cut["rows"]["horizon.csv"] == len(series)
    assert series["t_s"].iloc[0] < 1 and series["t_s"].diff().max() <= 2
    assert cut["last_sample_s"] == series["t_s"].max() >= 6
    assert set(series["phase"]) <= {"warmup", "steady"}  # cut before the held phase
    assert (latest / "horizon-relations.csv").exists() and (latest / "bloat.csv").exists()
    assert not (latest / "jobs.csv").exists()  # no repetition's books were checked
    reported = harness_cli("report", str(latest.resolve()), timeout=120)
    assert reported.returncode == 0, reported.stdout + reported.stderr
    drift = pd.read_csv(latest / "horizon-drift.csv")
    (row,) = drift.itertuples()
    assert row.cut_s == cut["last_sample_s"] and row.verdict in {"stable", "growing"}
    # the steady phase's whole 2 s windows from 1 s before the cut: first and last sampled
    steady_to = 1 + 2 * ((cut["last_sample_s"] - 1) // 2)
    assert f"drift over the steady phase to {steady_to:g} s, no end, no p99" in row.why
    assert row.size_first > 0 and row.size_last > 0
    page = (latest / "report.html").read_text()
    assert "Horizon: dead tuples, size, p99 wait and fetch buffers over time" in page
    assert (latest / "horizon.png").exists()


def _sampled_to(path: Path) -> float:
    """The latest t_s horizon.csv holds so far (0 before its first row)."""
    if not path.exists():
        return 0.0
    lines = path.read_text().splitlines()
    try:
        return float(next(csv.DictReader(lines[:1] + lines[-1:]))["t_s"])
    except (StopIteration, ValueError, TypeError):  # no row yet, or one half written
        return 0.0
