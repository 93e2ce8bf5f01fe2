"""harness export: results.json's figures as github-action-benchmark's custom tools and
Bencher's BMF read them, from hand-made results folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.results.export import exported
from harness.results.headline import Figure, Results, results_document
from tests.conftest import harness_cli


def figure(name: str, unit: str, value: float, lower: bool | None) -> Figure:
    return Figure(
        name=name, unit=unit, value=value, range=(value - 1, value + 1), lower_is_better=lower,
        samples=2,
    )  # fmt: skip


def document(run_id: str, scenario: str) -> Results:
    return results_document(
        run_id=run_id,
        kind="run",
        name=scenario,
        status="complete",
        started_at=None,
        metadata={"harness": {"git_commit": "abc123"}},
        figures=[
            figure(f"{scenario}: fifo, 4 workers, small: p50 wait", "s", 4.5, True),
            figure(f"{scenario}: fifo, 4 workers: throughput", "jobs/s", 178.0, False),
            figure(f"{scenario}: FIFO / round-robin", "x", 31.0, None),
        ],
    )


def write(root: Path, run_id: str, scenario: str) -> Path:
    folder = root / scenario / run_id
    folder.mkdir(parents=True)
    document(run_id, scenario).write(folder / Results.NAME)
    return folder


def test_github_action_benchmark_takes_one_direction_a_file_and_bmf_every_figure() -> None:
    documents = [("a", document("r1", "noisy"))]
    smaller = exported(documents, "github-action-benchmark")
    assert smaller == [
        {
            "name": "noisy: fifo, 4 workers, small: p50 wait",
            "unit": "s",
            "value": 4.5,
            "range": "3.5-5.5",
            "extra": "run r1 (run, 2 samples), commit abc123",
        }
    ]
    bigger = exported(documents, "github-action-benchmark", bigger=True)
    assert [entry["name"] for entry in bigger] == ["noisy: fifo, 4 workers: throughput"]
    bmf = exported(documents, "bmf")
    assert bmf["noisy: FIFO / round-robin"] == {
        "ratio": {"value": 31.0, "lower_value": 30.0, "upper_value": 32.0}
    }
    assert list(bmf["noisy: fifo, 4 workers: throughput"]) == ["jobs-per-second"]


def test_two_runs_of_one_scenario_are_refused_a_tracker_keys_by_name() -> None:
    with pytest.raises(HarnessError) as refused:
        exported([("a", document("r1", "noisy")), ("b", document("r2", "noisy"))], "bmf")
    assert str(refused.value).startswith("b: its figure 'noisy: fifo, 4 workers, small: p50")


def test_a_results_folder_exports_each_scenarios_newest_run(tmp_path: Path) -> None:
    root = tmp_path / "results"
    write(root, "20261201T000000Z-aaaaaa", "noisy")
    write(root, "20261202T000000Z-bbbbbb", "noisy")
    write(root, "20261201T000000Z-cccccc", "skewed")
    (root / "latest").symlink_to(root / "noisy" / "20261202T000000Z-bbbbbb")
    done = harness_cli("export", str(root), "--format", "github-action-benchmark")
    assert done.returncode == 0, done.stderr
    extras = {entry["extra"].split(" ")[1] for entry in json.loads(done.stdout)}
    assert extras == {"20261202T000000Z-bbbbbb", "20261201T000000Z-cccccc"}
    out = tmp_path / "bmf.json"
    made = harness_cli("export", str(root / "skewed"), "--format", "bmf", "-o", str(out))
    assert made.returncode == 2 and "no results.json" in made.stderr  # a scenario's folder
    made = harness_cli(
        "export",
        str(root / "skewed" / "20261201T000000Z-cccccc"),
        "--format",
        "bmf",
        "-o",
        str(out),
    )
    assert made.returncode == 0 and "3 figures" in made.stdout
    again = harness_cli("export", str(root), "--format", "bmf", "-o", str(out))
    assert again.returncode == 2 and again.stderr.startswith(f"error: {out}: exists")
    wrong = harness_cli("export", str(root), "--format", "csv")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1
    assert "'csv' is none of github-action-benchmark, bmf" in wrong.stderr
