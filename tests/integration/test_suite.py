"""A suite (a file with `suite:`): its scenarios run one after the other, each into a
run folder of its own, and the suite's folder reads them together as one library-by-fault
matrix (scenarios/real-queues-faults.yaml is the shipped one). On the fixture adapter's
variants, whose outcomes under a kill are known: holds_claim gives its jobs back, twice
runs one job twice, drops_a_job loses one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.fault_matrix import OUTCOMES
from harness.server.kinds import Server
from tests.conftest import harness_cli
from tests.integration.test_adapters import FIXTURES, ON_PATH

KILL = """\
name: suite-kill
strategies: [holds_claim, twice, drops_a_job]
workers: 2
repetitions: 1
poll_interval_ms: 50
timeout_s: 5
faults:
  worker_kills: [{at_s: 0.5, restart_after_s: 0.2}]
tenant_groups:
  - {name: large, tenants: 1, jobs_per_tenant: 20, duration_ms: 100}
"""
HELD = """\
name: suite-held
strategies: [pyqueue]
workers: 2
repetitions: 1
poll_interval_ms: 20
timeout_s: 30
long_transaction: {from_s: 0.3, for_s: 0.6, sample_ms: 100}
tenant_groups:
  - {name: churning, tenants: 2, jobs_per_tenant: 1, duration_ms: 1, repeat: 15, every_s: 0.1}
"""
SUITE = """\
name: suite-of-faults
description: two faults, read together
suite:
  - {fault: worker kill, scenario: kill.yaml}
  - {fault: held snapshot, scenario: held.yaml}
"""


def _run(server: Server, tmp_path: Path) -> tuple[int, str, Path]:
    results = tmp_path / "results"
    options = ["--adapters-dir", str(FIXTURES), "--dsn", server.dsn, "--results-dir", str(results)]
    suite = tmp_path / "faults.yaml"
    done = harness_cli("run", str(suite), *options, "--no-plots", timeout=240, env=ON_PATH)
    return done.returncode, done.stdout + done.stderr, results


def test_a_suite_runs_each_scenario_and_reads_them_as_one_matrix(
    server: Server, tmp_path: Path
) -> None:
    """Every case a run folder of its own, complete; the suite's matrix one row per
    repetition, every job in one outcome; the outcomes the fixtures are made to have
    (a duplicate, a lost job) in their cells; the held snapshot's row all ok."""
    (tmp_path / "kill.yaml").write_text(KILL)
    (tmp_path / "held.yaml").write_text(HELD)
    (tmp_path / "faults.yaml").write_text(SUITE)
    code, said, results = _run(server, tmp_path)
    assert code == 0, said
    (folder,) = (results / "suite-of-faults").iterdir()
    document = json.loads((folder / "suite.json").read_text())
    assert document["status"] == "complete" and document["format_version"] == 1
    assert [run["fault"] for run in document["runs"]] == ["worker kill", "held snapshot"]
    for run in document["runs"]:
        assert run["status"] == "complete", run
        ran = json.loads((results / run["folder"] / "run.json").read_text())
        assert ran["run_id"] == run["run_id"] and ran["status"] == "complete"
    assert (folder / "suite.yaml").read_text() == SUITE
    matrix = pd.read_csv(folder / "fault-matrix.csv")
    assert list(zip(matrix["fault"], matrix["strategy"], strict=True)) == [
        ("worker kill", "holds_claim"),
        ("worker kill", "twice"),
        ("worker kill", "drops_a_job"),
        ("held snapshot", "pyqueue"),
    ]
    assert (matrix[OUTCOMES].sum(axis=1) == matrix["enqueued"]).all(), matrix
    assert list(matrix["enqueued"]) == [20, 20, 20, 30]
    by = matrix.set_index("strategy")
    # each process of theirs (the first two, the restarted one) reports its first job twice
    # or drops it: how many processes had claimed a job by the kill is the machine's pace
    assert by.loc["twice", "duplicated"] >= 1 and by.loc["drops_a_job", "lost"] >= 1, matrix
    assert by.loc["holds_claim", "promise"] == "retried after 1 s"
    assert by.loc["pyqueue", "ok"] == 30 and "dead versions" in by.loc["pyqueue", "effect"]
    summary = (folder / "summary.md").read_text()
    assert "| strategy | worker kill | held snapshot |" in summary
    assert f"{by.loc['twice', 'duplicated']} duplicated" in summary
    assert f"{by.loc['drops_a_job', 'lost']} lost" in summary
    assert "Library by fault" in said and f"Suite: {folder}" in said
    # the suite's tables are made from its runs' folders alone: harness report makes them again
    made = (folder / "fault-matrix.csv").read_text(), summary
    (folder / "fault-matrix.csv").unlink()
    done = harness_cli("report", str(folder), "--no-plots", timeout=120)
    assert done.returncode == 0, done.stderr
    assert ((folder / "fault-matrix.csv").read_text(), (folder / "summary.md").read_text()) == made


@pytest.mark.thorough  # make test runs a whole suite; one cut short is the matrix's
def test_a_suite_cut_short_keeps_what_it_ran_and_says_which_run_failed(
    server: Server, tmp_path: Path
) -> None:
    """The second case's run fails (its adapter's ledger fails): the suite stops there,
    exit 1, and its folder keeps the first case's matrix and names the failed run."""
    (tmp_path / "held.yaml").write_text(HELD)
    failing = KILL.replace("name: suite-kill", "name: suite-fails")
    (tmp_path / "kill.yaml").write_text(
        failing.replace("[holds_claim, twice, drops_a_job]", "[fails_ledger]")
    )
    (tmp_path / "faults.yaml").write_text(
        SUITE.replace("  - {fault: worker kill, scenario: kill.yaml}\n", "")
        + "  - {fault: worker kill, scenario: kill.yaml}\n"
    )
    code, said, results = _run(server, tmp_path)
    assert code == 1, said
    (folder,) = (results / "suite-of-faults").iterdir()
    document = json.loads((folder / "suite.json").read_text())
    assert document["status"] == "failed" and document["error"], document
    held, failed = document["runs"]
    assert held["status"] == "complete"
    assert failed["status"] == "failed" and failed["folder"].startswith("suite-fails/"), failed
    ran = json.loads((results / failed["folder"] / "run.json").read_text())
    assert ran["status"] == "failed"
    matrix = pd.read_csv(folder / "fault-matrix.csv")
    assert list(matrix["fault"]) == ["held snapshot"]
