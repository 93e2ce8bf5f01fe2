"""One `harness run` on two PostgreSQL majors (17 and 18, the wheels make installs): one
run folder, a fresh server per major, every row naming its server, the majors side by
side first. Here with the majors (make test-majors, make test-matrix), not in make test,
to which it added about 20 s; make test keeps the container's run of 15 and 18
(tests/integration/test_container.py) where Docker has the images."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.errors import ProviderUnavailable
from harness.server.builds import locate
from tests.conftest import harness_cli

TWO_MAJORS = """\
name: two-majors
workers: 2
strategies: [fifo, round_robin]
repetitions: 1
poll_interval_ms: 5
timeout_s: 60
tenant_groups:
  - {name: large, tenants: 1, jobs_per_tenant: 60, duration_ms: 2}
  - {name: small, tenants: 3, jobs_per_tenant: 2, duration_ms: 2, enqueue_at_s: 0.05}
backlog:
  groups:
    - {name: big, tenants: 1, jobs_per_tenant: 300}
    - {name: idle, tenants: 20, jobs_per_tenant: 0}
  rotation: [idle, big]
explain:
  repeat: 1
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        locate(18)
    except ProviderUnavailable as missing:
        pytest.skip(f"PostgreSQL 18 is not installed: {missing}")
    where = tmp_path_factory.mktemp("two-majors")
    (where / "two-majors.yaml").write_text(TWO_MAJORS)
    done = harness_cli(
        "run",
        str(where / "two-majors.yaml"),
        "--pg-version",
        "17,18",
        "--results-dir",
        str(where / "results"),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("Starting PostgreSQL 17") < done.stdout.index("Starting PostgreSQL 18")
    (run,) = (where / "results" / "two-majors").iterdir()
    return run


def test_one_folder_holds_both_majors_each_row_naming_its_server(folder: Path) -> None:
    document = json.loads((folder / "run.json").read_text())
    assert document["majors"] == [17, 18]
    versions = [server["pg_version"] for server in document["servers"]]
    assert [version.split(".")[0] for version in versions] == ["17", "18"]
    numbers = [server["postgres"]["server_version_num"] for server in document["servers"]]
    assert [number // 10000 for number in numbers] == [17, 18]
    jobs = pd.read_csv(folder / "jobs.csv", dtype={"pg_version": str})
    assert jobs.groupby("pg_version").size().to_dict() == {versions[0]: 732, versions[1]: 732}
    repetitions = document["repetitions"]
    assert [(r["pg_version"], r["strategy"], r["books"]) for r in repetitions] == [
        (version, strategy, "balanced")
        for version in versions
        for strategy in ("fifo", "round_robin")
    ]
    for table in ("summary.csv", "tenants.csv", "fairness.csv", "plans.csv"):
        derived = pd.read_csv(folder / table, dtype={"pg_version": str})
        assert list(derived.columns[:2]) == ["run_id", "pg_version"], table
        assert list(dict.fromkeys(derived["pg_version"])) == versions, table


def test_each_majors_captures_are_kept_apart_and_agree(folder: Path) -> None:
    """The same backlog on each major: the same buffers and scans (measured alike on 14 to
    18, docs/postgres-majors.md)."""
    document = json.loads((folder / "run.json").read_text())
    for entry in document["plans"]:
        major = entry["pg_version"].split(".")[0]
        assert (
            folder / "explain" / f"pg{major}" / "backlog" / f"{entry['strategy']}.json"
        ).exists()
    plans = pd.read_csv(folder / "plans.csv", dtype={"pg_version": str})
    per_major = plans.pivot_table(
        index="strategy", columns="pg_version", values="shared_buffers", aggfunc="first"
    )
    assert (per_major.nunique(axis=1) == 1).all(), per_major
    assert plans.groupby("strategy")["jobs_scan"].nunique().eq(1).all()


def test_the_report_puts_the_majors_side_by_side_first(folder: Path) -> None:
    summary = (folder / "summary.md").read_text()
    headings = [line for line in summary.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Across PostgreSQL majors"
    versions = [s["pg_version"] for s in json.loads((folder / "run.json").read_text())["servers"]]
    assert headings[1] == f"## Verdict: PostgreSQL {versions[0]}"
    assert headings[2] == f"## Waits and makespan: PostgreSQL {versions[0]}"
    assert f"## Dequeue plans: PostgreSQL {versions[1]}" in headings
    for title in ("Median wait (s), per major", "Dequeue, shared buffers, per major"):
        assert title in summary
    assert f"| strategy | workers | tenants | PostgreSQL {versions[0]} |" in summary
    assert (folder / "waits-pg17.png").exists() and (folder / "waits-pg18.png").exists()
    assert not (folder / "calibration.json").exists()  # each major costs differently
    page = (folder / "report.html").read_text()
    assert page.index("Across PostgreSQL majors") < page.index("id='contents'")


def test_the_headline_figures_name_their_major(folder: Path) -> None:
    figures = json.loads((folder / "results.json").read_text())["figures"]
    versions = [s["pg_version"] for s in json.loads((folder / "run.json").read_text())["servers"]]
    for version in versions:
        mine = [f for f in figures if f"on PostgreSQL {version}:" in f["name"]]
        assert mine, version
    assert all(any(f"on PostgreSQL {v}:" in f["name"] for v in versions) for f in figures)


def test_a_comparison_takes_runs_of_one_major(folder: Path, tmp_path: Path) -> None:
    done = harness_cli("compare", str(folder), str(folder), "--out", str(tmp_path / "c"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "a run on several PostgreSQL majors" in done.stderr and "harness compare" in done.stderr
