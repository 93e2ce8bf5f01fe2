"""Run folders written by main before the queue seam (format 1, tests/fixtures/runs-v1)
render with today's harness to the same tables: `harness report` on a copy of the raw
files gives the derived tables that harness wrote then."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.calibration import Calibration
from harness.results.document import RUN_FORMAT_VERSION
from tests.conftest import harness_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs-v1"
RAW = ("run.json", "scenario.yaml", "jobs.csv", "monitor.csv", "bloat.csv", "explain")
TABLES = (
    "summary.csv",
    "tenants.csv",
    "fairness.csv",
    "ideal.csv",
    "plans.csv",
    "properties.csv",
    "faults.csv",
    "bloat-summary.csv",
)


def raw_copy(name: str, target: Path) -> Path:
    """Only the raw files: everything derived must come from today's render."""
    folder = target / name
    folder.mkdir()
    for entry in RAW:
        source = FIXTURES / name / entry
        if source.is_dir():
            shutil.copytree(source, folder / entry)
        elif source.exists():
            shutil.copy(source, folder / entry)
    return folder


# Tables that have gained columns since: the old columns are as they were.
ADDED_COLUMNS = {
    "plans.csv": ["rows_read"],
    "faults.csv": [
        "backend_kills",
        "sessions_terminated",
        "server_crashes",
        "connections_held",
        "reconnects_refused",
    ],
}


@pytest.mark.parametrize("name", ["legacy-mix", "legacy-faults", "legacy-hold"])
def test_harness_report_renders_an_old_run_to_the_same_tables(tmp_path: Path, name: str) -> None:
    folder = raw_copy(name, tmp_path)
    done = harness_cli("report", str(folder), "--no-plots", timeout=120)  # tables, not figures
    assert done.returncode == 0, done.stderr
    assert not list(folder.glob("*.png"))
    expected = [table for table in TABLES if (FIXTURES / name / table).exists()]
    assert "summary.csv" in expected
    run_id = json.loads((folder / "run.json").read_text())["run_id"]
    for table in expected:
        if table == "ideal.csv":
            continue
        if table in ADDED_COLUMNS:
            now, then = pd.read_csv(folder / table), pd.read_csv(FIXTURES / name / table)
            added = ["run_id", "pg_version", *ADDED_COLUMNS[table]]
            pd.testing.assert_frame_equal(now.drop(columns=added), then)
            continue
        assert on_its_server(folder / table, run_id) == (FIXTURES / name / table).read_text()
    # The zero-cost ideal is as it was; the costed one now runs at the run's calibration
    # (calibration.json, fitted from the raw files), where it charged the median claim_ms.
    ideal = pd.read_csv(folder / "ideal.csv").drop(columns=["run_id", "pg_version"])
    before = pd.read_csv(FIXTURES / name / "ideal.csv")
    kept = [column for column in before.columns if not column.endswith("_costed")]
    pd.testing.assert_frame_equal(ideal[kept], before[kept])
    assert Calibration.from_dict(json.loads((folder / "calibration.json").read_text())).pairs
    assert _table_lines(folder / "summary.md") == _table_lines(FIXTURES / name / "summary.md")
    document = json.loads((folder / "run.json").read_text())
    assert (
        document["format_version"] == RUN_FORMAT_VERSION and document["queues"] == {}
    )  # migrated from 1
    assert [server["pg_version"] for server in document["servers"]] == ["17.10"]
    assert (folder / "report.html").exists()


def on_its_server(table: Path, run_id: str) -> str:
    """A derived CSV of today as an older harness wrote it: without the run_id and the
    server (format 3) now first, the old run's id and its one server in every row."""
    lines = table.read_text().splitlines(keepends=True)
    assert lines[0].startswith("run_id,pg_version,")
    assert all(line.startswith(f"{run_id},17.10,") for line in lines[1:]), table.name
    return "".join(line.split(",", 2)[2] for line in lines)


def _table_lines(summary: Path) -> list[str]:
    """The tables of summary.md (their prose names today's module paths), the ideal's
    without its two costed columns. The verdict came later: its reference table is the
    old one with a `verdict` column, left out here; without a reference, its table of
    median waits is new and left out. The plans' rows read column came later too."""
    lines, cut, verdict, added = [], 0, False, None
    for line in summary.read_text().splitlines():
        verdict = line == "## Verdict" or (verdict and not line.startswith("## "))
        if not line.startswith("|"):
            cut, added = 0, None
            continue
        cells = line.split("|")
        if added is None and " rows read " in cells:
            added = cells.index(" rows read ")
        if added is not None:
            del cells[added]
            line = "|".join(cells)
        if verdict and line.startswith("| figure | reference |"):
            cut = 1  # the verdict column
        elif "ideal, costed" in line:
            cut = 2  # the two costed columns
        elif verdict and not cut:
            continue
        lines.append("|".join(line.split("|")[: -1 - cut]) + "|" if cut else line)
    return lines
