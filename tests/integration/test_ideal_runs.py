"""Measured against the ideal schedule, on a real run of the shipped noisy neighbour."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.simulate import Costs, sim_jobs, simulate
from harness.results.jobs import load_jobs
from harness.scenario.loader import load_scenario
from harness.scenario.model import Scenario
from harness.scenario.workload import generate
from harness.server.kinds import Server
from tests.conftest import SCENARIOS, SHORT_NOISY, builtin_traits
from tests.integration.conftest import run_yaml


@pytest.fixture(scope="module")
def noisy_run(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = (SCENARIOS / "noisy-neighbour.yaml").read_text()
    one = text.replace("repetitions: 2", "repetitions: 1")
    assert one != text
    return run_yaml(server, tmp_path_factory.mktemp("ideal"), one).folder.path


def test_the_large_tenants_makespan_is_within_a_quarter_of_its_replayed_ideal(
    noisy_run: Path,
) -> None:
    """Workers never idle while jobs wait: the large tenant's makespan is within a quarter
    of what a perfect queue makes of this run's own job lengths (finished - started, as
    measured) and median claim latency, replayed through the simulator. That yardstick
    moves with the machine, the measured makespan with it: against the planned 20 ms jobs
    (ideal.csv's ratio, 1.10 on a quiet machine, as `make bench` prints it) the same run
    measured 1.32-1.55 at load 18-28, because sleeps overshoot and claims slow, not
    because a worker waited; the replayed ratio stayed at 1.02-1.09 then. A worker
    polling, stalled or missing (3 of 4 claiming) would still show as 1.3 and more."""
    ideal = pd.read_csv(noisy_run / "ideal.csv")
    large = ideal[(ideal["tenant_class"] == "large") & (ideal["figure"] == "makespan_s")]
    assert set(large["strategy"]) == {"fifo", "round_robin"}
    # The ideal drains 1,000 jobs of 20 ms on 4 workers in 5.0 s (FIFO) or 5.26 s.
    assert sorted(large["ideal"].round(6)) == [5.0, 5.26]
    assert (large["ratio"] >= 1).all(), "nothing beats a perfect queue"
    print(large[["strategy", "measured", "ideal", "ratio"]].to_string(index=False))
    jobs = load_jobs(noisy_run)
    scenario = load_scenario(noisy_run / "scenario.yaml", builtin_traits()).scenario
    for row in large.itertuples():
        replayed = replayed_makespan(scenario, jobs[jobs["strategy"] == row.strategy], "large")
        print(f"{row.strategy}: measured / replayed ideal = {row.measured / replayed:.3f}")
        assert row.measured / replayed < 1.25, (row.strategy, row.measured, replayed)


def replayed_makespan(scenario: Scenario, jobs: pd.DataFrame, tenant_class: str) -> float:
    """The class's makespan in the simulator's schedule of the scenario's arrivals, each job
    lasting as long as it did in the run, each claim costing the run's median claim."""
    workload = generate(scenario)
    planned = sim_jobs(workload)
    jobs = jobs.sort_values("job_id")
    assert list(jobs["job_id"]) == list(range(1, len(planned) + 1))
    lasted = (jobs["finished_at"] - jobs["started_at"]).dt.total_seconds()
    replay = replace(planned, duration_s=list(lasted))
    (strategy,) = set(jobs["strategy"])
    (workers,) = set(jobs["workers"])
    claim = Costs.fixed(claim_ms=float(jobs["claim_ms"].median()))
    schedule = simulate(replay, strategy, int(workers), costs=claim)
    chosen = [i for i, group in enumerate(jobs["tenant_class"]) if group == tenant_class]
    return max(schedule.finish_s[i] for i in chosen)


def test_fairness_files_trace_back_to_the_jobs(noisy_run: Path) -> None:
    tenants = pd.read_csv(noisy_run / "tenants.csv")
    jobs = pd.read_csv(noisy_run / "jobs.csv")
    assert tenants.groupby("strategy")["jobs"].sum().to_dict() == {
        "fifo": 1050,
        "round_robin": 1050,
    }
    fairness = pd.read_csv(noisy_run / "fairness.csv").set_index("strategy")
    # FIFO makes the small tenants bear the wait: a worse-served worst tenant
    assert (
        fairness.loc["fifo", "worst_slowdown"] > 3 * fairness.loc["round_robin", "worst_slowdown"]
    )
    assert len(jobs) == 2 * 1050
    summary = (noisy_run / "summary.md").read_text()
    assert "## Fairness across tenants" in summary and "## Against the ideal schedule" in summary


def test_a_worker_sweep_gets_a_scaling_plot_and_an_ideal_per_count(
    server: Server, tmp_path: Path
) -> None:
    text = SHORT_NOISY.replace("workers: 2", "workers: [1, 3]").replace(
        "strategies: [fifo, round_robin]", "strategies: [round_robin]"
    )
    run = run_yaml(server, tmp_path, text).folder.path
    assert (run / "scaling.png").stat().st_size > 10_000
    ideal = pd.read_csv(run / "ideal.csv")
    makespans = ideal[(ideal["figure"] == "makespan_s") & (ideal["tenant_class"] == "all")]
    by_count = makespans.set_index("workers")["ideal"]
    # 210 jobs of 5 ms: 1.05 s on one worker; three workers need a third of it
    assert by_count[1] == pytest.approx(1.05)
    assert by_count[3] == pytest.approx(0.35, abs=0.006)
