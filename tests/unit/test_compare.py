from __future__ import annotations

import json
import random
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.compare import compare_runs, comparison_rows
from harness.analysis.provenance import Difference, provenance_differences, provenance_headline
from tests.conftest import ROOT, harness_cli

LEGACY = ROOT / "tests/fixtures/runs-v1/legacy-mix"

T0 = datetime(2026, 9, 30, tzinfo=UTC)


def run(scale: float, seed: int, n: int = 60) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = []
    for job in range(n):
        wait = scale * rng.uniform(0.5, 1.5)
        rows.append(
            {
                "scenario": "s",
                "strategy": "fifo",
                "workers": 2,
                "repetition": 1,
                "job_id": job,
                "tenant_id": 2,
                "tenant_class": "small",
                "enqueued_at": T0,
                "started_at": T0 + timedelta(seconds=wait),
                "finished_at": T0 + timedelta(seconds=wait + 0.02),
                "worker": 0,
                "duration_ms": 20.0,
                "claim_ms": 1.0,
            }
        )
    return pd.DataFrame(rows)


def test_a_known_shift_is_flagged_slower() -> None:
    table = compare_runs(run(1.0, seed=1), run(3.0, seed=2))
    row = table.iloc[0]
    assert row["change"] == "slower"
    assert 2.5 < row["p50_ratio"] < 3.5
    assert row["p_slower"] < 1e-6


def test_the_same_distribution_is_not_flagged() -> None:
    table = compare_runs(run(1.0, seed=1), run(1.0, seed=3))
    assert table.iloc[0]["change"] == ""


def test_a_faster_run_is_flagged_faster() -> None:
    assert compare_runs(run(3.0, seed=1), run(1.0, seed=2)).iloc[0]["change"] == "faster"


def test_rows_show_both_runs_and_the_flag() -> None:
    headers, rows = comparison_rows(compare_runs(run(1.0, seed=1), run(3.0, seed=2)))
    assert headers[:4] == ["strategy", "workers", "tenants", "p50 A (s)"]
    assert rows[0][-1].startswith("SLOWER (p=")


def metadata(**changes: object) -> dict[str, Any]:
    """A run's recorded provenance (tests/fixtures/runs-v1), with some parts replaced:
    changes name a path with double underscores, `host__cpu_count=8`."""
    document = json.loads((LEGACY / "run.json").read_text())
    found = document["metadata"]
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = found
        for part in parents:
            node = node[part]
        node[last] = value
    return found


def test_the_same_provenance_has_no_difference() -> None:
    assert provenance_differences(metadata(), metadata()) == []
    assert provenance_headline([]).startswith("Same provenance")


def test_where_the_server_listens_is_not_a_difference() -> None:
    moved = metadata()
    moved["postgres"]["non_default_settings"]["unix_socket_directories"]["setting"] = "/tmp/x"
    moved["host"]["load_average"] = [9.0, 9.0, 9.0]
    assert provenance_differences(metadata(), moved) == []


def test_each_part_that_differs_is_named_with_both_values() -> None:
    other = metadata(
        host__hostname="other",
        host__cpu_model="Intel Xeon",
        host__cpu_count=8,
        postgres__version="PostgreSQL 16.4",
        harness__git_commit="0123456789abcdef",
        harness__git_dirty=True,
    )
    other["postgres"]["non_default_settings"]["work_mem"] = {
        "setting": "65536",
        "unit": "kB",
        "source": "command line",
    }
    found = {d.what: (d.a, d.b) for d in provenance_differences(metadata(), other)}
    assert found == {
        "host": ("vm", "other"),
        "CPU model": ("AMD EPYC", "Intel Xeon"),
        "CPU count": ("2", "8"),
        "PostgreSQL": (metadata()["postgres"]["version"], "PostgreSQL 16.4"),
        "setting work_mem": ("default", "65536 (kB)"),
        "harness commit": ("5283edb94566", "0123456789ab + uncommitted changes"),
    }
    headline = provenance_headline(provenance_differences(metadata(), other))
    assert headline.startswith("Provenance differs between A and B (host, CPU model, CPU count")


def test_a_run_without_metadata_is_a_difference() -> None:
    assert provenance_differences(metadata(), None) == [
        Difference("provenance", "recorded", "(not recorded)")
    ]


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return harness_cli(*args, timeout=120, env={"COLUMNS": "200"})


def test_compare_says_above_the_table_that_the_runs_come_from_other_machines(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(LEGACY, first)
    shutil.copytree(LEGACY, second)
    document = json.loads((second / "run.json").read_text())
    document["metadata"] = metadata(host__hostname="elsewhere", postgres__version="PostgreSQL 16.4")
    (second / "run.json").write_text(json.dumps(document))
    done = harness("compare", str(first), str(second), "--out", str(tmp_path / "out"), "--no-plots")
    assert done.returncode == 0, done.stderr
    headline = "Provenance differs between A and B (host, PostgreSQL)"
    assert done.stdout.index(headline) < done.stdout.index("Waits, A =")
    assert "elsewhere" in done.stdout
    markdown = (tmp_path / "out" / "compare.md").read_text()
    assert markdown.index(headline) < markdown.index("| strategy | workers |")
    assert "| host | vm | elsewhere |" in markdown


def test_compare_of_runs_alike_says_so(tmp_path: Path) -> None:
    done = harness(
        "compare", str(LEGACY), str(LEGACY), "--out", str(tmp_path / "out"), "--no-plots"
    )
    assert done.returncode == 0, done.stderr
    assert "Same provenance" in done.stdout
    assert "Provenance differs" not in (tmp_path / "out" / "compare.md").read_text()
