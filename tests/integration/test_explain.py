"""Plan captures on a small skewed backlog: deterministic figures only (buffers, shapes)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
import yaml

from harness.analysis.plans import (
    GROWS_WITH_BACKLOG,
    READS_BACKLOG,
    WALKS_GLOBAL_INDEX,
    PlanFigures,
)
from harness.queues.sql.strategies import load_strategies
from harness.run.captures import explain, requests
from harness.run.render import Rendered
from harness.run.scenario_run import RunOptions
from harness.scenario.model import Scenario
from harness.scenario.workload import backlog_rows
from harness.server.connections import connect
from harness.server.kinds import Server
from harness.server.schema import recreate
from tests.integration.conftest import run_yaml, sql_queue

SMALL_SKEW = """\
name: small-skew
strategies: [round_robin_by_id, round_robin_by_id_no_fifo_index, round_robin, fifo,
  round_robin_active]
backlog:
  groups:
    - {name: large, tenants: 1, jobs_per_tenant: 20000}
    - {name: small, tenants: 10, jobs_per_tenant: 1}
    - {name: idle, tenants: 200, jobs_per_tenant: 0}
  rotation: [idle, small, large]
explain:
  repeat: 2
  variants:
    - name: idle-200
    - name: active-only
      tenants: {idle: 0}
    - name: large-first
      tenants: {idle: 0}
      slow: [round_robin_by_id_no_fifo_index]
reference:
  source: test
  figures:
    - {label: trap / fixed buffers, metric: plan_shared_buffers, strategy: round_robin_by_id,
       versus: round_robin, variant: idle-200, value: 50, unit: x}
"""


@pytest.fixture(scope="module")
def outcome(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return run_yaml(server, tmp_path_factory.mktemp("skew"), SMALL_SKEW, RunOptions(timed=False))


def figures(outcome: Rendered, variant: str, strategy: str) -> PlanFigures:
    path = outcome.folder.path / "explain" / variant / f"{strategy}.json"
    document = json.loads(path.read_text())
    assert len(document["plans"]) == 2
    saved = document["figures"][-1]
    derived = ("total_ms", "shared_buffers")
    plan = PlanFigures(
        **{k: v for k, v in saved.items() if k not in derived},
    )
    return replace(plan, flags=tuple(plan.flags))


def test_the_trap_reads_far_more_buffers_than_the_fix(outcome) -> None:
    trap = figures(outcome, "idle-200", "round_robin_by_id")
    fixed = figures(outcome, "idle-200", "round_robin")
    assert trap.shared_buffers >= 50 * fixed.shared_buffers, (trap, fixed)
    assert trap.jobs_scan == "Index Scan using jobs_queued_fifo on jobs"
    # Each idle tenant walks all 20,010 queued jobs for nothing; the first small tenant
    # walks the large tenant's 20,000 and finds its job; the Limit stops there.
    assert trap.jobs_loops == 201
    # EXPLAIN reports the per-loop average, rounded: exact to within one row per loop.
    assert trap.rows_removed == pytest.approx(200 * 20010 + 20000, abs=201)
    assert WALKS_GLOBAL_INDEX in trap.flags


def test_the_fix_probes_the_per_tenant_index(outcome) -> None:
    fixed = figures(outcome, "idle-200", "round_robin")
    assert fixed.jobs_scan == "Index Scan using jobs_queued_tenant on jobs"
    assert fixed.outer_scan == "Index Scan using queue_tenants_last_served_idx on queue_tenants"
    assert fixed.rows_removed == 0
    assert fixed.flags == ()


def test_without_the_fifo_index_the_trap_walks_the_primary_key(outcome) -> None:
    trap = figures(outcome, "idle-200", "round_robin_by_id_no_fifo_index")
    assert trap.jobs_scan == "Index Scan using jobs_pkey on jobs"
    assert WALKS_GLOBAL_INDEX in trap.flags


def test_idle_tenants_cost_one_probe_each(outcome) -> None:
    busy = figures(outcome, "active-only", "round_robin")
    idle = figures(outcome, "idle-200", "round_robin")
    assert busy.jobs_loops == 1
    assert idle.jobs_loops == 201
    assert busy.shared_buffers < 20


def test_round_robin_active_probes_only_tenants_with_work(outcome) -> None:
    active = figures(outcome, "idle-200", "round_robin_active")
    assert active.jobs_loops == 1
    assert active.shared_buffers < 20
    assert figures(outcome, "idle-200", "round_robin").shared_buffers > 20 * active.shared_buffers


def test_slow_captures_are_skipped_and_said_so(outcome) -> None:
    plans = outcome.plans.set_index(["variant", "strategy"])
    assert plans.loc[("large-first", "round_robin_by_id_no_fifo_index"), "skipped"].startswith(
        "slow"
    )
    assert not (
        outcome.folder.path / "explain" / "large-first" / "round_robin_by_id_no_fifo_index.json"
    ).exists()


def test_the_run_folder_has_text_plans_a_table_and_a_plot(outcome) -> None:
    folder = outcome.folder.path
    text = (folder / "explain" / "idle-200" / "round_robin.txt").read_text()
    assert "Index Scan using jobs_queued_tenant on jobs" in text
    assert "Buffers: shared hit=" in text
    assert (folder / "plans.png").stat().st_size > 10_000
    assert "## Dequeue plans" in (folder / "summary.md").read_text()
    page = outcome.report.read_text()
    assert "id='explain'" in page and page.count("<details><summary>idle-200 / ") == 5
    assert page.count("src='data:image/png;base64,") == 1  # the plans chart
    assert not (folder / "jobs.csv").exists()
    reference = outcome.reference.iloc[0]
    assert reference["measured_low"] >= 50


def test_explain_analyze_leaves_the_table_unchanged(server: Server) -> None:
    strategies = load_strategies()
    with connect(server.dsn, schema="unchanged") as conn:
        conn.execute("create schema if not exists unchanged")
        scenario = _scenario()
        rows = backlog_rows(scenario, scenario.backlog)  # type: ignore[arg-type]
        for name in ("round_robin", "fifo"):
            queue = sql_queue(server, strategies[name], "unchanged", SMALL_SKEW)
            recreate(conn, "unchanged")
            queue.install(conn)
            queue.load_backlog(conn, rows)
            before = _state(conn)
            explain(conn, queue.dequeue_sql(), "json", {})
            explain(conn, queue.dequeue_sql(), "text", {})
            assert _state(conn) == before
        conn.execute("drop schema unchanged cascade")


def _scenario() -> Scenario:
    return Scenario.model_validate(yaml.safe_load(SMALL_SKEW))


def _state(conn: psycopg.Connection) -> tuple:
    jobs = conn.execute(
        "select count(*), count(*) filter (where status = 'queued'), count(started_at) from jobs"
    ).fetchone()
    tenants = conn.execute(
        "select string_agg(last_served::text, ',' order by tenant_id) from queue_tenants"
    ).fetchone()
    return jobs, tenants


def test_requests_cover_every_variant_and_strategy() -> None:
    chosen = requests(_scenario())
    assert len(chosen) == 15
    assert [r for r in chosen if r.slow] == [
        r
        for r in chosen
        if r.variant == "large-first" and r.strategy == "round_robin_by_id_no_fifo_index"
    ]


GROWING = """\
name: growing-backlog
strategies: [round_robin_by_id, fifo]
backlog:
  groups:
    - {name: large, tenants: 1, jobs_per_tenant: 2000}
    - {name: small, tenants: 3, jobs_per_tenant: 1}
    - {name: idle, tenants: 20, jobs_per_tenant: 0}
  rotation: [idle, small, large]
explain:
  repeat: 1
  variants:
    - name: jobs-2k
    - name: jobs-20k
      jobs_per_tenant: {large: 20000}
"""


def test_a_growing_backlog_flags_the_fetch_whose_buffers_follow_it(
    server: Server, tmp_path: Path
) -> None:
    """The trap walks the large tenant's queue for each idle tenant ahead of it: its
    buffers grow with the queue, and it reads it; FIFO takes the head whatever the size."""
    outcome = run_yaml(server, tmp_path, GROWING, RunOptions(timed=False, plots=False))
    plans = outcome.plans
    assert plans is not None
    by = plans.set_index(["strategy", "variant"])
    assert list(by.loc["fifo", "queued_jobs"]) == [2003, 20003]
    for variant in ("jobs-2k", "jobs-20k"):
        assert GROWS_WITH_BACKLOG in by.loc[("round_robin_by_id", variant), "flags"]
        assert READS_BACKLOG in by.loc[("round_robin_by_id", variant), "flags"]
        assert by.loc[("fifo", variant), "flags"] == ""
