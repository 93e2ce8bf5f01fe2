"""The source's figures beside the measured ones (pure): a wait or plan metric, or the
ratio or difference of two strategies' metrics, per repetition, as a range."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Protocol

import pandas as pd

from harness.analysis.stats import relative_spread
from harness.report.cells import span
from harness.report.sections import Section, Table
from harness.scenario.model import ReferenceFigure

_PLAN_COLUMNS = {
    "plan_total_ms": "total_ms",
    "plan_execution_ms": "execution_ms",
    "plan_shared_buffers": "shared_buffers",
}


class Selection(Protocol):
    """Which figure: a reference figure's, or a threshold's (harness/scenario/thresholds.py)."""

    @property
    def metric(self) -> str: ...
    @property
    def strategy(self) -> str: ...
    @property
    def tenant_class(self) -> str | None: ...
    @property
    def variant(self) -> str | None: ...
    @property
    def versus(self) -> str | None: ...
    @property
    def compare(self) -> str: ...
    @property
    def workers(self) -> int | None: ...
    @property
    def is_plan_figure(self) -> bool: ...


def measured_figure(
    figure: Selection, summary: pd.DataFrame | None, plans: pd.DataFrame | None
) -> pd.Series:
    """The figure per repetition: the metric, or its ratio/difference between strategies."""
    where: dict[str, object]
    if figure.is_plan_figure:
        table, column = plans, _PLAN_COLUMNS[figure.metric]
        where = {"variant": figure.variant}
    else:
        table, column = summary, figure.metric
        workers = figure.workers or (summary["workers"].iloc[0] if summary is not None else 0)
        where = {"workers": workers, "tenant_class": figure.tenant_class}
    if table is None or table.empty:
        return pd.Series(dtype=float)

    def values(strategy: str) -> pd.Series:
        chosen = table["strategy"] == strategy
        for key, value in where.items():
            chosen &= table[key] == value
        return table[chosen].set_index("repetition")[column].astype(float)

    own = values(figure.strategy)
    if figure.versus is None:
        return own
    other = values(figure.versus)
    return own / other if figure.compare == "ratio" else own - other


def placement(reference: tuple[float, float], tolerance: float, low: float, high: float) -> str:
    """Where the measured range [low, high] lies against the reference's, each end of it
    widened by `tolerance` of its size (a single figure, 4.5, becomes 4.05-4.95 at 0.10):
    within, above, below, or partly (some repetitions in, some out)."""
    bottom = reference[0] - tolerance * abs(reference[0])
    top = reference[1] + tolerance * abs(reference[1])
    if bottom <= low and high <= top:
        return "within"
    if low > top:
        return "above"
    if high < bottom:
        return "below"
    return "partly"


def is_within(reference: tuple[float, float], tolerance: float, low: float, high: float) -> bool:
    return placement(reference, tolerance, low, high) == "within"


def reference_table(
    figures: list[ReferenceFigure],
    summary: pd.DataFrame | None,
    plans: pd.DataFrame | None,
    tolerance: float = 0.0,
) -> pd.DataFrame:
    """The source's figures beside the measured range over repetitions, and whether that
    range lies within the reference (widened by `tolerance`); None where nothing was
    measured."""
    rows = []
    for figure in figures:
        measured = measured_figure(figure, summary, plans).dropna()
        low = measured.min() if len(measured) else float("nan")
        high = measured.max() if len(measured) else float("nan")
        rows.append(
            {
                "figure": figure.label,
                "unit": figure.unit,
                "reference_low": figure.value[0],
                "reference_high": figure.value[1],
                "measured_low": low,
                "measured_high": high,
                "repetitions": len(measured),
                # over mean: of a difference of two strategies (near 0), meaningless
                "spread": (
                    relative_spread(list(measured))
                    if figure.compare == "ratio" or figure.versus is None
                    else float("nan")
                ),
                "placement": placement(figure.value, tolerance, low, high) if len(measured) else "",
                "headline": figure.versus is not None and figure.compare == "ratio",
                # a strategy's own wait, time or buffers: lower is better; a comparison of
                # two strategies has no better side (as results.json's lower_is_better)
                "lower_is_better": figure.versus is None,
            }
        )
    return pd.DataFrame(rows)


def reference_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = ["figure", "reference", "measured", "unit", "reps", "verdict"]
    rows = [
        [
            record["figure"],
            span(record["reference_low"], record["reference_high"]),
            span(record["measured_low"], record["measured_high"]),
            record["unit"],
            str(record["repetitions"]),
            verdict(record),
        ]
        for record in table.to_dict("records")
    ]
    return headers, rows


def verdict(record: Mapping[Hashable, Any]) -> str:
    """A figure's verdict, which way it went where the figure has a better side: within;
    better or worse (below or above the reference, lower being better); above or below
    (a comparison of two strategies, which has none); partly outside; not measured."""
    word, where = _judged(record)
    return f"{word} ({where})" if where else word


def _judged(record: Mapping[Hashable, Any]) -> tuple[str, str]:
    """The verdict's word, and which side of the reference it says where it is off it."""
    where = str(record["placement"])
    if not where:
        return "not measured", ""
    if where in ("within", "partly"):
        return ("within" if where == "within" else "partly outside"), ""
    if not record.get("lower_is_better", True):
        return where, "no better side"
    return ("better" if where == "below" else "worse"), where


def tally(table: pd.DataFrame) -> str:
    """How the figures went, as the table says: '2 of 4 within; 1 better, 1 worse'."""
    words = [_judged(record)[0] for record in table.to_dict("records")]
    within = words.count("within")
    others = [
        f"{words.count(word)} {word}"
        for word in ("better", "worse", "above", "below", "partly outside", "not measured")
        if words.count(word)
    ]
    return f"{within} of {len(words)} within" + (f"; {', '.join(others)}" if others else "")


def headline(table: pd.DataFrame) -> str:
    """The headline in one sentence: the first ratio of two strategies the reference gives
    (else its first figure), measured against the reference."""
    measured = table[table["repetitions"] > 0]
    if measured.empty:
        return "Nothing the reference gives was measured."
    ratios = measured[measured["headline"]]
    record = (ratios if len(ratios) else measured).iloc[0]
    label = str(record["figure"])
    got = _with_unit(span(record["measured_low"], record["measured_high"]), record["unit"])
    wanted = _with_unit(span(record["reference_low"], record["reference_high"]), record["unit"])
    reps = int(record["repetitions"])
    sentence = (
        f"{label[:1].upper()}{label[1:]}: {got} measured over {reps} "
        f"repetition{'s' if reps > 1 else ''}, against {wanted} in the reference: "
        f"{verdict(record.to_dict())}."
    )
    return sentence + ("" if len(table) == 1 else f" Figures: {tally(table)}.")


def _with_unit(value: str, unit: str) -> str:
    return f"{value}x" if unit == "x" else f"{value} {unit}"


def reference_section(
    table: pd.DataFrame, source: str, tolerance: float, notes: list[str] | None = None
) -> Section:
    """The verdict: the headline sentence, then each figure against its reference;
    `notes` are further sentences of the verdict (the claim latency)."""
    rows = Table.of(reference_rows(table), f"Verdict: beside the reference ({source})")
    intro = (
        f"{tally(table)} the reference ({source}), each end widened by {tolerance:.0%}; "
        "better or worse where the figure has a better side (lower is better but for a "
        "comparison of two strategies). Measured: the range over repetitions."
    )
    return Section(
        "verdict",
        "Verdict",
        intro,
        bullets=notes or [],
        tables=[rows],
        console=[rows],
        headline=headline(table),
    )
