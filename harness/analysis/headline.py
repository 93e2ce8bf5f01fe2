"""A run's headline figures (pure): what results.json lists for other tools.

Per strategy, worker count and tenant class: the p50 and p95 wait and the class's last
job done; per strategy and worker count: throughput and the median claim latency; per
plan capture: its time and buffers; with a held snapshot's explained fetches, a
library's fetch buffers before, during and after the hold (bloat-summary.csv's); a
horizon's drift (horizon-drift.csv's: dead tuples' peak, the slopes, p99's change); and
every reference figure the scenario gives, with its reference and whether the measured
range is within it. Each figure's value is the
median over repetitions (plan executions), its range the lowest and highest.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

import pandas as pd

from harness.analysis.frames import ALL_TENANTS
from harness.analysis.reference import is_within, measured_figure
from harness.results.headline import Figure
from harness.scenario.model import Reference

_WAITS = (
    ("wait_p50_s", "p50 wait", "s"),
    ("wait_p95_s", "p95 wait", "s"),
    ("makespan_s", "last job done", "s"),
)
_PER_REPETITION = (
    ("throughput_jobs_s", "throughput", "jobs/s", False),
    ("claim_p50_ms", "median claim latency", "ms", True),
)
_PLANS = (
    ("total_ms", "one dequeue, planning + execution", "ms"),
    ("shared_buffers", "one dequeue, shared buffers", "buffers"),
)


def figure_of(
    name: str, unit: str, values: Iterable[float], lower_is_better: bool | None
) -> Figure | None:
    """The median and range of `values` (those that are numbers); None if there are none."""
    numbers = [float(v) for v in values if pd.notna(v)]
    if not numbers:
        return None
    return Figure(
        name=name,
        unit=unit,
        value=statistics.median(numbers),
        range=(min(numbers), max(numbers)),
        lower_is_better=lower_is_better,
        samples=len(numbers),
    )


def run_headline(
    scenario: str,
    summary: pd.DataFrame | None,
    plan_runs: pd.DataFrame | None,
    reference: Reference | None,
    bloat: pd.DataFrame | None = None,
    horizon: pd.DataFrame | None = None,
    mappings: pd.DataFrame | None = None,
    idle: pd.DataFrame | None = None,
) -> list[Figure]:
    """Every headline figure of a run, reference figures first."""
    found = _reference_figures(scenario, reference, summary, plan_runs)
    if summary is not None:
        found += _wait_figures(scenario, summary)
    if plan_runs is not None and len(plan_runs):
        found += _plan_figures(scenario, plan_runs)
    if bloat is not None and "fetch_buffers_p50_before" in bloat:
        found += _held_fetch_figures(scenario, bloat)
    if horizon is not None:
        found += _horizon_figures(scenario, horizon)
    if mappings is not None:
        found += _mapping_figures(scenario, mappings)
    if idle is not None:
        found += _idle_figures(scenario, idle)
    return [figure for figure in found if figure is not None]


_MAPPINGS = (
    ("others_wait_p50_s", "the others' p50 wait", "s", True),
    ("others_wait_p95_s", "the others' p95 wait", "s", True),
    ("flood_vs_first", "the flood's makespan over the first strategy's", "x", True),
    ("jain_index", "Jain's index", "x", False),
)
_IDLE = (
    ("fetches_per_s", "idle fetches a second", "fetches/s", True),
    ("statements_per_s", "idle statements a second", "statements/s", True),
    ("server_cpu_share", "the server's CPU share of a core while idle", "x", True),
)


def _mapping_figures(scenario: str, mappings: pd.DataFrame) -> list[Figure | None]:
    """Per strategy and workers, mappings.csv's figures (the flood's makespan is a wait
    figure already)."""
    return _per_strategy(scenario, mappings, _MAPPINGS)


def _idle_figures(scenario: str, idle: pd.DataFrame) -> list[Figure | None]:
    return _per_strategy(scenario, idle, _IDLE)


def _per_strategy(
    scenario: str, table: pd.DataFrame, columns: tuple[tuple[str, str, str, bool], ...]
) -> list[Figure | None]:
    found: list[Figure | None] = []
    for (strategy, workers), rows in table.groupby(["strategy", "workers"], sort=False):
        where = f"{scenario}: {strategy}, {workers} workers"
        for column, label, unit, lower in columns:
            found.append(figure_of(f"{where}: {label}", unit, rows[column], lower))
    return found


def _held_fetch_figures(scenario: str, bloat: pd.DataFrame) -> list[Figure | None]:
    """Per strategy and workers, the median buffers of a fetch in each phase of the hold."""
    found: list[Figure | None] = []
    for (strategy, workers), rows in bloat.groupby(["strategy", "workers"], sort=False):
        where = f"{scenario}: {strategy}, {workers} workers"
        for phase in ("before", "during", "after"):
            name = f"{where}: one fetch's shared buffers, {phase} the hold (median)"
            found.append(figure_of(name, "buffers", rows[f"fetch_buffers_p50_{phase}"], True))
    return found


_HORIZON = (
    ("dead_peak", "dead tuples, peak", "rows"),
    ("size_slope_bytes_per_h", "tables and indexes, Theil-Sen slope over the steady phase", "B/h"),
    ("p99_change", "p99 wait, steady phase's last window less its first", "s"),
    ("p99_slope_s_per_h", "p99 wait, Theil-Sen slope over the steady phase", "s/h"),
    (
        "fetch_buffers_last",
        "one fetch's shared buffers, the steady phase's last (median)",
        "buffers",
    ),
)


def _horizon_figures(scenario: str, drift: pd.DataFrame) -> list[Figure | None]:
    """Per strategy and workers, a horizon's drift figures (horizon-drift.csv's)."""
    found: list[Figure | None] = []
    whole = drift[drift["cut_s"].isna()] if "cut_s" in drift else drift  # no cut repetition's
    for (strategy, workers), rows in whole.groupby(["strategy", "workers"], sort=False):
        where = f"{scenario}: {strategy}, {workers} workers: horizon"
        for column, label, unit in _HORIZON:
            found.append(figure_of(f"{where}: {label}", unit, rows[column], True))
    return found


def _wait_figures(scenario: str, summary: pd.DataFrame) -> list[Figure | None]:
    found: list[Figure | None] = []
    groups = summary.groupby(["strategy", "workers"], sort=False)
    for (strategy, workers), rows in groups:
        where = f"{scenario}: {strategy}, {workers} workers"
        for tenant_class, of_class in rows.groupby("tenant_class", sort=False):
            for column, label, unit in _WAITS:
                found.append(
                    figure_of(f"{where}, {tenant_class}: {label}", unit, of_class[column], True)
                )
        pooled = _pooled(rows)
        for column, label, unit, lower in _PER_REPETITION:
            found.append(figure_of(f"{where}: {label}", unit, pooled[column], lower))
    return found


def _pooled(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per repetition: the `all` class, or the only class there is."""
    everyone = rows[rows["tenant_class"] == ALL_TENANTS]
    return everyone if len(everyone) else rows


def _plan_figures(scenario: str, runs: pd.DataFrame) -> list[Figure | None]:
    found: list[Figure | None] = []
    for (variant, strategy), rows in runs.groupby(["variant", "strategy"], sort=False):
        for column, label, unit in _PLANS:
            name = f"{scenario}: {strategy} on {variant}: {label}"
            found.append(figure_of(name, unit, rows[column], True))
    return found


def _reference_figures(
    scenario: str,
    reference: Reference | None,
    summary: pd.DataFrame | None,
    plan_runs: pd.DataFrame | None,
) -> list[Figure | None]:
    if reference is None:
        return []
    found: list[Figure | None] = []
    for wanted in reference.figures:
        measured = measured_figure(wanted, summary, plan_runs)
        lower = None if wanted.versus is not None else True
        figure = figure_of(f"{scenario}: {wanted.label}", wanted.unit, measured, lower)
        if figure is not None:
            figure.reference = wanted.value
            figure.within = is_within(wanted.value, reference.tolerance, *figure.range)
        found.append(figure)
    return found
