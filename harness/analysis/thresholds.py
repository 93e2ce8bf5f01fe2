"""Thresholds against what a run measured (pure): each threshold's figure, its value (the
median over repetitions or plan executions, as results.json's), and whether it keeps its
bound. A figure measured in no repetition keeps none."""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping
from typing import Any
from xml.etree import ElementTree

import pandas as pd

from harness.analysis.reference import measured_figure
from harness.report.cells import number
from harness.report.sections import Section, Table
from harness.results.jobs import PG
from harness.scenario.thresholds import Threshold

THRESHOLD_COLUMNS = ["threshold", "value", "unit", "low", "high", "samples", "kept"]


def threshold_table(
    thresholds: list[Threshold], summary: pd.DataFrame | None, plans: pd.DataFrame | None
) -> pd.DataFrame:
    """One row per threshold: its text, the measured value and range, and `kept`."""
    rows = []
    for threshold in thresholds:
        values = [float(v) for v in measured_figure(threshold, summary, plans).dropna()]
        value = statistics.median(values) if values else math.nan
        rows.append(
            {
                "threshold": threshold.text,
                "value": value,
                "unit": threshold.unit,
                "low": min(values) if values else math.nan,
                "high": max(values) if values else math.nan,
                "samples": len(values),
                "kept": threshold.holds(value),
            }
        )
    return pd.DataFrame(rows, columns=THRESHOLD_COLUMNS)


def failed_lines(table: pd.DataFrame) -> list[str]:
    """A line per threshold not kept, with what was measured; in a run of several
    majors (a pg_version column of several), each says its server's."""
    majors = PG in table and table[PG].nunique() > 1
    return [
        f"{f'PostgreSQL {row[PG]}: ' if majors else ''}{row['threshold']}: {_measured(row)}"
        for row in table.to_dict("records")
        if not row["kept"]
    ]


def _measured(row: Mapping[Hashable, Any]) -> str:
    samples = int(row["samples"])
    if samples == 0:
        return "not measured (no repetition has the figure)"
    span = f", {number(row['low'])}-{number(row['high'])}" if samples > 1 else ""
    return f"measured {number(row['value'])} {row['unit']} (median of {samples}{span})"


def threshold_section(table: pd.DataFrame) -> Section:
    """The thresholds, failed first: which are kept, each with its measured value."""
    failed = failed_lines(table)
    kept = len(table) - len(failed)
    ordered = table.sort_values("kept", kind="stable")
    rows = [
        [
            str(row["threshold"]),
            "kept" if row["kept"] else "FAILED",
            _measured(row).removeprefix("measured "),
        ]
        for row in ordered.to_dict("records")
    ]
    shown = Table(["threshold", "verdict", "measured"], rows, "Thresholds")
    headline = (
        f"{len(failed)} of {len(table)} thresholds failed: harness run exits 1."
        if failed
        else f"Every threshold kept ({kept} of {len(table)})."
    )
    return Section(
        "thresholds",
        "Thresholds",
        "Each threshold of the scenario and of --threshold against the figure it names: "
        "the median over repetitions (plan executions), as results.json gives it.",
        tables=[shown],
        console=[shown],
        headline=headline,
    )


def thresholds_junit(runs: list[tuple[str, pd.DataFrame | None]]) -> bytes:
    """JUnit XML of every run's thresholds (`harness run --junit`): a test case per
    threshold, its class the scenario's name, a threshold not kept a failure saying what
    was measured."""
    cases = [
        (scenario, row)
        for scenario, table in runs
        if table is not None
        for row in table.to_dict("records")
    ]
    failed = sum(not row["kept"] for _, row in cases)
    suite = ElementTree.Element(
        "testsuite",
        name="harness run thresholds",
        tests=str(len(cases)),
        failures=str(failed),
        errors="0",
        skipped="0",
    )
    for scenario, row in cases:
        major = f" (PostgreSQL {row[PG]})" if row.get(PG) else ""
        case = ElementTree.SubElement(
            suite, "testcase", classname=scenario, name=f"{row['threshold']}{major}"
        )
        if not row["kept"]:
            ElementTree.SubElement(case, "failure", message=_measured(row))
        else:
            ElementTree.SubElement(case, "system-out").text = _measured(row)
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)
