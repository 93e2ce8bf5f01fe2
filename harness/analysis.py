"""Pure analysis of the jobs table: waits, percentiles, makespan, reference figures.

Every figure here is recomputable from jobs.csv alone:
  wait      = started_at - enqueued_at, per job
  p50/p95/p99 = pandas quantile with linear interpolation (numpy's default)
  t0        = the first enqueued_at of the repetition
  makespan  = last finished_at of the class - t0
  throughput = jobs of the repetition / (last finished_at - t0)
"""

from __future__ import annotations

import pandas as pd

from harness.scenario import ReferenceFigure

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


def summarize(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per repetition and tenant class, plus an `all` row where there are several."""
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


def measured_figure(summary: pd.DataFrame, figure: ReferenceFigure) -> pd.Series:
    """The figure per repetition: the metric, or its ratio/difference between strategies."""
    workers = figure.workers or summary["workers"].iloc[0]

    def values(strategy: str) -> pd.Series:
        rows = summary[
            (summary["strategy"] == strategy)
            & (summary["workers"] == workers)
            & (summary["tenant_class"] == figure.tenant_class)
        ]
        return rows.set_index("repetition")[figure.metric]

    own = values(figure.strategy)
    if figure.versus is None:
        return own
    other = values(figure.versus)
    return own / other if figure.compare == "ratio" else own - other


def reference_table(summary: pd.DataFrame, figures: list[ReferenceFigure]) -> pd.DataFrame:
    """The source's figures beside the measured range over repetitions."""
    rows = []
    for figure in figures:
        measured = measured_figure(summary, figure).dropna()
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
