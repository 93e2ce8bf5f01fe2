"""Pure analysis of the jobs table: waits, percentiles, makespan, reference figures.

Every figure here is recomputable from jobs.csv alone:
  wait      = started_at - enqueued_at, per job
  p50/p95/p99 = pandas quantile with linear interpolation (numpy's default)
  t0        = the first enqueued_at of the repetition
  makespan  = last finished_at of the class - t0
  throughput = jobs of the repetition / (last finished_at - t0)
and, per tenant class, the fairness figures of harness/fairness.py: the median and
largest head wait (a tenant's first job) and slowdown (makespan / alone) of its tenants.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.fairness import class_fairness, tenant_table
from harness.analysis.plans import Capture
from harness.analysis.properties import CHECKS
from harness.scenario.model import ReferenceFigure, Scenario
from harness.scenario.workload import tenant_ranges

REPETITION_KEYS = ["scenario", "strategy", "workers", "repetition"]
SUMMARY_KEYS = [*REPETITION_KEYS, "tenant_class"]
ALL_TENANTS = "all"


def with_waits(jobs: pd.DataFrame) -> pd.DataFrame:
    """jobs plus wait_s and, per repetition, t0 and the job's start offset from it."""
    jobs = jobs.copy()
    jobs["wait_s"] = (jobs["started_at"] - jobs["enqueued_at"]).dt.total_seconds()
    t0 = jobs.groupby(REPETITION_KEYS)["enqueued_at"].transform("min")
    jobs["start_s"] = (jobs["started_at"] - t0).dt.total_seconds()
    jobs["finish_s"] = (jobs["finished_at"] - t0).dt.total_seconds()
    return jobs


def summarize(jobs: pd.DataFrame, tenants: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per repetition and tenant class, plus an `all` row where there are several.

    `tenants` is tenant_table's result, if the caller has it already."""
    jobs = with_waits(jobs)
    if jobs["tenant_class"].nunique() > 1:
        jobs_and_everyone = pd.concat([jobs, jobs.assign(tenant_class=ALL_TENANTS)])
    else:
        jobs_and_everyone = jobs  # one class: `all` would repeat it row for row
    rows = jobs_and_everyone.groupby(SUMMARY_KEYS, sort=False)
    summary = rows.agg(
        jobs=("job_id", "size"),
        wait_p50_s=("wait_s", "median"),
        wait_p95_s=("wait_s", lambda wait: wait.quantile(0.95)),
        wait_p99_s=("wait_s", lambda wait: wait.quantile(0.99)),
        wait_max_s=("wait_s", "max"),
        makespan_s=("finish_s", "max"),
        claim_p50_ms=("claim_ms", "median"),
    ).reset_index()
    per_repetition = jobs.groupby(REPETITION_KEYS).agg(
        n=("job_id", "size"), span=("finish_s", "max")
    )
    throughput = (per_repetition["n"] / per_repetition["span"]).rename("throughput_jobs_s")
    summary = summary.merge(throughput.reset_index(), on=REPETITION_KEYS)
    tenants = tenant_table(jobs) if tenants is None else tenants
    summary = summary.merge(class_fairness(tenants, ALL_TENANTS), on=SUMMARY_KEYS, how="left")
    return _in_reading_order(summary, jobs)


def _in_reading_order(summary: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """Strategies as the scenario lists them, then workers, then classes with `all` last."""
    classes = [*dict.fromkeys(jobs["tenant_class"]), ALL_TENANTS]
    rank = {
        "strategy": {name: i for i, name in enumerate(dict.fromkeys(jobs["strategy"]))},
        "tenant_class": {name: i for i, name in enumerate(classes)},
    }
    order = summary.sort_values(
        ["strategy", "workers", "tenant_class", "repetition"],
        key=lambda column: column.map(rank[column.name]) if column.name in rank else column,
        kind="stable",
    )
    return order.reset_index(drop=True)


def ranges(summary: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Min and max over repetitions of each metric, per strategy, workers and class."""
    keys = ["strategy", "workers", "tenant_class"]
    grouped = summary.groupby(keys, sort=False)[metrics]
    low, high = grouped.min(), grouped.max()
    return low.join(high, lsuffix="_min", rsuffix="_max").reset_index()


PLAN_KEYS = ["variant", "strategy"]
_PLAN_COLUMNS = {
    "plan_total_ms": "total_ms",
    "plan_execution_ms": "execution_ms",
    "plan_shared_buffers": "shared_buffers",
}


def plan_runs(captures: list[Capture]) -> pd.DataFrame:
    """One row per captured execution: the figures of each JSON plan, and the backlog."""
    rows = [
        {
            "variant": capture.variant,
            "strategy": capture.strategy,
            "repetition": index,
            **capture.backlog,
            "load_s": capture.load_s,
            **figures.as_dict(),
            "flags": "; ".join(figures.flags),
        }
        for capture in captures
        for index, figures in enumerate(capture.figures, start=1)
    ]
    return pd.DataFrame(rows)


def plans_summary(runs: pd.DataFrame, captures: list[Capture]) -> pd.DataFrame:
    """Per variant and strategy: median times, buffers and the plan's shape; skips kept."""
    if len(runs):
        medians = (
            runs.groupby(PLAN_KEYS, sort=False)
            .agg(
                repetitions=("repetition", "size"),
                planning_ms=("planning_ms", "median"),
                execution_ms=("execution_ms", "median"),
                total_ms=("total_ms", "median"),
                shared_hit=("shared_hit", "median"),
                shared_read=("shared_read", "median"),
                shared_buffers=("shared_buffers", "median"),
                outer_scan=("outer_scan", "last"),
                jobs_scan=("jobs_scan", "last"),
                jobs_loops=("jobs_loops", "max"),
                rows_removed=("rows_removed", "max"),
                flags=("flags", "last"),
            )
            .reset_index()
        )
    else:
        medians = pd.DataFrame(columns=PLAN_KEYS)
    shapes = pd.DataFrame(
        [
            {"variant": c.variant, "strategy": c.strategy, **c.backlog, "skipped": c.skipped or ""}
            for c in captures
        ]
    )
    return shapes.merge(medians, on=PLAN_KEYS, how="left")


def measured_figure(
    figure: ReferenceFigure, summary: pd.DataFrame | None, plans: pd.DataFrame | None
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


def reference_table(
    figures: list[ReferenceFigure], summary: pd.DataFrame | None, plans: pd.DataFrame | None
) -> pd.DataFrame:
    """The source's figures beside the measured range over repetitions."""
    rows = []
    for figure in figures:
        measured = measured_figure(figure, summary, plans).dropna()
        rows.append(
            {
                "figure": figure.label,
                "unit": figure.unit,
                "reference_low": figure.value[0],
                "reference_high": figure.value[1],
                "measured_low": measured.min() if len(measured) else float("nan"),
                "measured_high": measured.max() if len(measured) else float("nan"),
                "repetitions": len(measured),
            }
        )
    return pd.DataFrame(rows)


MONITOR_COLUMNS = ["strategy", "workers", "repetition", "elapsed_s", "stranded", "oldest_age_s"]


def property_table(jobs: pd.DataFrame, monitor: pd.DataFrame, scenario: Scenario) -> pd.DataFrame:
    """The scenario's checks, per strategy and worker count: the worst repetition's value,
    the bound, and whether every repetition held."""
    groups = [r.group for r in tenant_ranges(scenario)]
    weights = {group.name: group.weight for group in groups}
    priorities = {group.name: group.priority for group in groups}
    rows = []
    for (strategy, workers, repetition), run in jobs.groupby(
        ["strategy", "workers", "repetition"], sort=False
    ):
        samples = monitor[
            (monitor["strategy"] == strategy)
            & (monitor["workers"] == workers)
            & (monitor["repetition"] == repetition)
        ]
        arguments = {
            "never_stranded": (samples,),
            "weighted_share": (run, weights),
            "tenant_cap": (run, scenario.tenant_cap),
            "priority_order": (run, priorities, workers),
        }
        for check in scenario.checks:
            verdict = CHECKS[check](*arguments[check])
            rows.append(
                {
                    "check": check,
                    "strategy": strategy,
                    "workers": workers,
                    "repetition": repetition,
                    "measured": verdict.measured,
                    "bound": verdict.bound,
                    "held": verdict.held,
                    "detail": verdict.detail,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "check",
            "strategy",
            "workers",
            "repetition",
            "measured",
            "bound",
            "held",
            "detail",
        ],
    )


def property_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per check, strategy and workers: worst measured value, and held in every repetition."""
    grouped = table.groupby(["check", "strategy", "workers"], sort=False)
    return grouped.agg(
        repetitions=("repetition", "size"),
        measured=("measured", "max"),
        bound=("bound", "first"),
        held=("held", lambda held: None if held.isna().all() else bool(held.dropna().all())),
        detail=("detail", "last"),
    ).reset_index()
