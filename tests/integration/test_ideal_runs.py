"""Measured against the ideal schedule, on a real run of the shipped noisy neighbour."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.server.kinds import Server
from tests.conftest import SCENARIOS, SHORT_NOISY
from tests.integration.conftest import run_yaml


@pytest.fixture(scope="module")
def noisy_run(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = (SCENARIOS / "noisy-neighbour.yaml").read_text()
    one = text.replace("repetitions: 2", "repetitions: 1")
    assert one != text
    return run_yaml(server, tmp_path_factory.mktemp("ideal"), one).folder.path


def test_the_large_tenants_makespan_is_within_a_quarter_of_the_ideal(noisy_run: Path) -> None:
    ideal = pd.read_csv(noisy_run / "ideal.csv")
    large = ideal[(ideal["tenant_class"] == "large") & (ideal["figure"] == "makespan_s")]
    assert set(large["strategy"]) == {"fifo", "round_robin"}
    # The ideal drains 1,000 jobs of 20 ms on 4 workers in 5.0 s (FIFO) or 5.26 s.
    assert sorted(large["ideal"].round(6)) == [5.0, 5.26]
    assert (large["ratio"] < 1.25).all(), large.to_string()
    assert (large["ratio"] >= 1).all(), "nothing beats a perfect queue"


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
