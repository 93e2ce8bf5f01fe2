"""The strategies beyond the article, each proved from the data of a real run."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.properties import max_concurrent_per_tenant
from harness.results.jobs import load_jobs
from harness.run.render import Rendered
from harness.server.kinds import Server
from tests.integration.conftest import run_yaml


def run(server: Server, tmp_path: Path, text: str) -> Rendered:
    return run_yaml(server, tmp_path, text)


def verdicts(outcome: Rendered) -> dict[str, bool | None]:
    table = outcome.tables.properties
    assert table is not None
    return {row["strategy"]: row["held"] for row in table.to_dict("records")}


def test_round_robin_active_never_strands_a_job_under_churn(server: Server, tmp_path: Path) -> None:
    outcome = run(
        server,
        tmp_path,
        """\
name: churn
strategies: [round_robin_active]
workers: 8
enqueuers: 3
repetitions: 1
poll_interval_ms: 2
timeout_s: 60
checks: [never_stranded]
backlog:
  groups: [{name: idle, tenants: 50, jobs_per_tenant: 0}]
tenant_groups:
  - {name: churning, tenants: 12, jobs_per_tenant: 2, duration_ms: 2, repeat: 30,
     every_s: 0.05}
""",
    )
    assert verdicts(outcome) == {"round_robin_active": True}  # the books balanced too
    monitor = (outcome.folder.path / "monitor.csv").read_text().splitlines()
    assert len(monitor) > 20  # the monitor did sample while the workers ran
    assert outcome.document.repetitions[0].jobs == 12 * 2 * 30


def test_weighted_gives_the_paid_tier_two_turns(server: Server, tmp_path: Path) -> None:
    outcome = run(
        server,
        tmp_path,
        """\
name: tiers
strategies: [weighted, round_robin]
workers: 4
repetitions: 1
poll_interval_ms: 5
checks: [weighted_share]
tenant_groups:
  - {name: free, tenants: 1, jobs_per_tenant: 150, duration_ms: 5, weight: 1}
  - {name: paid, tenants: 1, jobs_per_tenant: 150, duration_ms: 5, weight: 2}
""",
    )
    assert verdicts(outcome) == {"weighted": True, "round_robin": False}


def test_capped_never_runs_more_than_the_cap(server: Server, tmp_path: Path) -> None:
    outcome = run(
        server,
        tmp_path,
        """\
name: cap
strategies: [capped]
workers: 16
tenant_cap: 2
repetitions: 1
poll_interval_ms: 5
checks: [tenant_cap]
tenant_groups:
  - {name: large, tenants: 1, jobs_per_tenant: 80, duration_ms: 10}
  - {name: small, tenants: 4, jobs_per_tenant: 10, duration_ms: 10}
""",
    )
    table = outcome.tables.properties
    assert table is not None
    row = table.iloc[0]
    assert (row["held"], row["measured"], row["bound"]) == (True, 2.0, 2.0)


def test_priority_serves_urgent_jobs_first(server: Server, tmp_path: Path) -> None:
    outcome = run(
        server,
        tmp_path,
        """\
name: prio
strategies: [priority, round_robin]
workers: 4
repetitions: 1
poll_interval_ms: 5
checks: [priority_order]
tenant_groups:
  - {name: bulk, tenants: 2, jobs_per_tenant: 100, duration_ms: 10, priority: 0}
  - {name: urgent, tenants: 2, jobs_per_tenant: 5, duration_ms: 10, priority: 10,
     enqueue_at_s: 0.2}
""",
    )
    assert verdicts(outcome)["priority"] is True


def test_holding_the_lock_throttles_round_robin_to_one_job_per_tenant(
    server: Server, tmp_path: Path
) -> None:
    """Four workers share the tenant when the lock is released; one at a time when held.
    Judged by how many of its jobs ran at once (the server's started_at and finished_at),
    which no load changes: the held lock orders each claim after the last job's
    completion. The makespans (about 4x apart on a quiet machine) are printed; their
    ratio moves with whatever else the machine does between the two repetitions."""
    outcome = run(
        server,
        tmp_path,
        """\
name: hold
strategies: [round_robin, round_robin_hold]
workers: 4
repetitions: 1
poll_interval_ms: 5
tenant_groups:
  - {name: large, tenants: 1, jobs_per_tenant: 60, duration_ms: 20}
""",
    )
    jobs = load_jobs(outcome.folder.path)
    at_once = {name: max_concurrent_per_tenant(rows) for name, rows in jobs.groupby("strategy")}
    summary = outcome.summary
    assert summary is not None
    print(summary.set_index("strategy")["makespan_s"].to_dict(), at_once)
    assert at_once["round_robin_hold"] == 1 and at_once["round_robin"] >= 2, at_once


@pytest.mark.parametrize("strategy", ["round_robin_active", "weighted", "capped", "priority"])
def test_every_new_strategy_runs_its_sql(server: Server, strategy: str, tmp_path: Path) -> None:
    """Each strategy's statements, end to end on a small mixed workload, books balanced."""
    outcome = run(
        server,
        tmp_path,
        f"""\
name: smoke
strategies: [{strategy}]
workers: 3
repetitions: 1
poll_interval_ms: 2
tenant_cap: 2
backlog:
  groups: [{{name: waiting, tenants: 3, jobs_per_tenant: 4, duration_ms: 1, priority: 1}}]
tenant_groups:
  - {{name: arriving, tenants: 4, jobs_per_tenant: 3, duration_ms: 1, repeat: 3,
     every_s: 0.05, weight: 2}}
""",
    )
    # run_scenario has checked the books: every one of the 48 jobs done exactly once.
    assert outcome.document.repetitions[0].jobs == 12 + 36
