"""results.json's figures in the formats CI benchmark trackers read (pure).

- github-action-benchmark's custom tools (`customSmallerIsBetter`,
  `customBiggerIsBetter`): a JSON list of `{name, unit, value, range, extra}`, one tool
  per file, so a file holds the figures of one direction;
- Bencher's Metric Format (BMF): `{benchmark: {measure: {value, lower_value,
  upper_value}}}`, every figure, each measure named by its unit.

A figure with no better side (a comparison of two strategies: `lower_is_better` null)
has no place in github-action-benchmark's files, which each say which way is better; BMF
takes it, its measure saying nothing of a direction. The name of a figure is its
results.json name, which starts with the scenario's: one run per scenario in an export.
"""

from __future__ import annotations

from typing import Any, Literal

from harness.errors import HarnessError
from harness.results.headline import Figure, Results

ExportFormat = Literal["github-action-benchmark", "bmf"]
# BMF's measure per unit: a slug of lowercase letters, digits and dashes
MEASURES = {
    "s": "seconds",
    "ms": "milliseconds",
    "buffers": "shared-buffers",
    "rows": "rows",
    "jobs/s": "jobs-per-second",
    "x": "ratio",
}


def exported(documents: list[tuple[str, Results]], form: ExportFormat, bigger: bool = False) -> Any:
    """The figures of every document (each with where it came from) in `form`; for
    github-action-benchmark, those whose better side is lower (or higher, `bigger`)."""
    figures = _unique([(where, doc, figure) for where, doc in documents for figure in doc.figures])
    if form == "bmf":
        return {
            figure.name: {
                _measure(figure.unit): {
                    "value": figure.value,
                    "lower_value": figure.range[0],
                    "upper_value": figure.range[1],
                }
            }
            for _, _, figure in figures
        }
    wanted = not bigger
    return [
        {
            "name": figure.name,
            "unit": figure.unit,
            "value": figure.value,
            "range": f"{figure.range[0]:g}-{figure.range[1]:g}",
            "extra": f"run {document.run_id} ({document.kind}, {figure.samples} samples)"
            + (f", commit {document.commit}" if document.commit else ""),
        }
        for _, document, figure in figures
        if figure.lower_is_better is wanted
    ]


def _unique(figures: list[tuple[str, Results, Figure]]) -> list[tuple[str, Results, Figure]]:
    """A tracker keys a figure by its name: two inputs with one name are refused."""
    seen: dict[str, str] = {}
    for where, _, figure in figures:
        if figure.name in seen and seen[figure.name] != where:
            raise HarnessError(
                f"{where}: its figure '{figure.name}' is also {seen[figure.name]}'s: a tracker "
                "keys a figure by its name; export one run of each scenario"
            )
        seen[figure.name] = where
    return figures


def _measure(unit: str) -> str:
    return MEASURES.get(unit, "".join(c if c.isalnum() else "-" for c in unit.lower()) or "value")
