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
ADDED_COLUMNS = {"ideal.csv": [], "plans.csv": ["rows_read"]}  # ideal.csv: checked below


@pytest.mark.parametrize("name", ["legacy-mix", "legacy-faults", "legacy-hold"])
def test_harness_report_renders_an_old_run_to_the_same_tables(tmp_path: Path, name: str) -> None:
    folder = raw_copy(name, tmp_path)
    done = harness_cli("report", str(folder), timeout=120)
    assert done.returncode == 0, done.stderr
    expected = [table for table in TABLES if (FIXTURES / name / table).exists()]
    assert "summary.csv" in expected
    for table in expected:
        if table in ADDED_COLUMNS:
            continue
        assert (folder / table).read_text() == (FIXTURES / name / table).read_text(), table
    for table, added in ADDED_COLUMNS.items():
        if (FIXTURES / name / table).exists() and added:
            now, then = pd.read_csv(folder / table), pd.read_csv(FIXTURES / name / table)
            pd.testing.assert_frame_equal(now.drop(columns=added), then)
    # The zero-cost ideal is as it was; the costed one now runs at the run's calibration
    # (calibration.json, fitted from the raw files), where it charged the median claim_ms.
    ideal, before = pd.read_csv(folder / "ideal.csv"), pd.read_csv(FIXTURES / name / "ideal.csv")
    kept = [column for column in before.columns if not column.endswith("_costed")]
    pd.testing.assert_frame_equal(ideal[kept], before[kept])
    assert Calibration.from_dict(json.loads((folder / "calibration.json").read_text())).pairs
    assert _table_lines(folder / "summary.md") == _table_lines(FIXTURES / name / "summary.md")
    document = json.loads((folder / "run.json").read_text())
    assert document["format_version"] == 2 and document["queues"] == {}  # migrated from 1
    assert (folder / "report.html").exists()


def _table_lines(summary: Path) -> list[str]:
    """The tables of summary.md (their prose names today's module paths), the ideal's
    without its two costed columns, the plans' without its rows read (added since)."""
    lines, costed, added = [], False, None
    for line in summary.read_text().splitlines():
        if not line.startswith("|"):
            costed, added = False, None
            continue
        costed = costed or "ideal, costed" in line
        cells = line.split("|")
        if added is None and " rows read " in cells:
            added = cells.index(" rows read ")
        if added is not None:
            del cells[added]
        lines.append("|".join(cells[:-3]) if costed else "|".join(cells))
    return lines
