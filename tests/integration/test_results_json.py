"""Results other tools read: results.json in every run folder, run_id in every derived CSV,
many runs concatenated in pandas and trended by `harness history`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.explore import open_runs
from harness.results.headline import Results
from harness.run.render import Rendered
from harness.run.scenario_run import RunOptions
from harness.server.kinds import Server
from tests.conftest import SHORT_NOISY, harness_cli
from tests.integration.conftest import run_yaml

EXPLAINED = """\
name: tiny-skew
strategies: [fifo, round_robin]
backlog:
  groups:
    - {name: large, tenants: 1, jobs_per_tenant: 2000}
    - {name: small, tenants: 5, jobs_per_tenant: 1}
explain:
  repeat: 2
"""


@pytest.fixture(scope="module")
def two_runs(server: Server, tmp_path_factory: pytest.TempPathFactory) -> list[Rendered]:
    """Two runs of one scenario under one results folder, as a user's history holds them."""
    root = tmp_path_factory.mktemp("history")
    return [run_yaml(server, root, SHORT_NOISY) for _ in range(2)]


def test_every_run_folder_has_results_json_with_its_id_commit_and_host(
    two_runs: list[Rendered],
) -> None:
    for run in two_runs:
        document = Results.read(run.folder.path / "results.json")
        assert (document.run_id, document.kind, document.name) == (
            run.folder.run_id,
            "run",
            "short-noisy",
        )
        assert document.host and document.status == "complete"
        assert document.commit == run.document.metadata["harness"]["git_commit"]
        names = [figure.name for figure in document.figures]
        assert len(names) == len(set(names))
        p50 = next(
            f
            for f in document.figures
            if f.name.endswith("round_robin, 2 workers, small: p50 wait")
        )
        summary = run.summary
        assert summary is not None
        measured = summary.query("strategy == 'round_robin' and tenant_class == 'small'")
        # to the microsecond, the precision results.json keeps of seconds
        assert p50.value == pytest.approx(measured["wait_p50_s"].median(), abs=1e-6)
        assert (p50.unit, p50.lower_is_better, p50.samples) == ("s", True, 1)


def test_two_runs_csvs_concatenated_are_told_apart_by_run_id(two_runs: list[Rendered]) -> None:
    derived = ["summary.csv", "tenants.csv", "fairness.csv", "ideal.csv"]
    for name in derived:
        tables = [pd.read_csv(run.folder.path / name) for run in two_runs]
        both = pd.concat(tables, ignore_index=True)
        assert both.columns[0] == "run_id", name
        counts = both.groupby("run_id").size().to_dict()
        assert counts == {
            run.folder.run_id: len(table) for run, table in zip(two_runs, tables, strict=True)
        }
    root = two_runs[0].folder.path.parents[1]
    runs = open_runs("*/*", root=root)
    assert [run.run_id for run in runs.runs] == sorted(run.folder.run_id for run in two_runs)
    assert set(runs.jobs["run_id"]) == {run.folder.run_id for run in two_runs}
    assert len(runs.jobs) == 2 * 2 * 210  # two runs, two strategies, 210 jobs each
    assert runs.summary.groupby("run_id").size().nunique() == 1
    assert set(runs.results["run_id"]) == {run.folder.run_id for run in two_runs}


def test_history_lists_the_runs_and_trends_a_figure(
    two_runs: list[Rendered], tmp_path: Path
) -> None:
    root = two_runs[0].folder.path.parents[1]
    out = tmp_path / "history"
    done = harness_cli(
        "history", str(root), "--figure", "*round_robin*small: p50 wait", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    for run in two_runs:
        assert done.stdout.count(run.folder.run_id) == 2  # in the runs and in the trend
    trends = pd.read_csv(out / "history.csv")
    assert trends["figure"].unique().tolist() == [
        "short-noisy: round_robin, 2 workers, small: p50 wait"
    ]
    assert trends["run_id"].tolist() == sorted(run.folder.run_id for run in two_runs)
    assert pd.isna(trends["change"].iloc[0]) and trends["change"].iloc[1] > 0
    page = (out / "history.html").read_text()
    assert page.count("data:image/png;base64,") == 1
    again = harness_cli("history", str(root), "--out", str(out))
    assert again.returncode == 2 and "never writes over a folder" in again.stderr


def test_an_explain_run_lists_its_plans_in_results_json(server: Server, tmp_path: Path) -> None:
    run = run_yaml(server, tmp_path, EXPLAINED, RunOptions(timed=False, plots=False))
    document = json.loads((run.folder.path / "results.json").read_text())
    assert document["kind"] == "explain"
    buffers = next(
        f
        for f in document["figures"]
        if f["name"] == "tiny-skew: fifo on backlog: one dequeue, shared buffers"
    )
    assert buffers["unit"] == "buffers" and buffers["samples"] == 2
