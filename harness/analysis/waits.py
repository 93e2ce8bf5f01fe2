"""Pure analysis of the jobs table: waits, percentiles, makespan, throughput.

Every figure here is recomputable from jobs.csv alone:
  wait      = started_at - enqueued_at, per job
  p50/p95/p99 = pandas quantile with linear interpolation (numpy's default)
  t0        = the first enqueued_at of the repetition
  makespan  = last finished_at of the class - t0
  throughput = jobs of the repetition / (last finished_at - t0)
and, per tenant class, the fairness figures of harness/analysis/fairness.py: the median and
largest head wait (a tenant's first job) and slowdown (makespan / alone) of its tenants.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.fairness import class_fairness, tenant_table
from harness.analysis.frames import ALL_TENANTS, REPETITION_KEYS, ranges
from harness.analysis.settings import SETTING_HEADER, any_tuned, grouped, setting_of, tuned_bullets
from harness.report.cells import span
from harness.report.sections import Section, Table
from harness.results.document import QueueSetting

SUMMARY_KEYS = [*REPETITION_KEYS, "tenant_class"]


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


SUMMARY_METRICS = [
    "wait_p50_s",
    "wait_p95_s",
    "wait_p99_s",
    "wait_max_s",
    "makespan_s",
    "throughput_jobs_s",
]


_HEADERS = {
    "wait_p50_s": "p50 wait",
    "wait_p95_s": "p95 wait",
    "wait_p99_s": "p99 wait",
    "wait_max_s": "max wait",
    "makespan_s": "last done",
    "throughput_jobs_s": "jobs/s",
}


def summary_rows(
    summary: pd.DataFrame, settings: dict[str, QueueSetting] | None = None
) -> tuple[list[str], list[list[str]]]:
    """Per strategy, workers and class: jobs, then each metric's range over repetitions.

    With `settings` (run.json's) naming a tuned mapping, the rows go by library, each
    library's default mappings before its tuned ones, and a column says which is which."""
    settings = settings or {}
    spans = ranges(summary, SUMMARY_METRICS)
    order = {name: i for i, name in enumerate(grouped(spans["strategy"], settings))}
    spans = spans.sort_values("strategy", key=lambda names: names.map(order), kind="stable")
    counts = summary.groupby(["strategy", "workers", "tenant_class"], sort=False)
    tuned = any_tuned(spans["strategy"], settings)
    headers = [
        "strategy",
        *([SETTING_HEADER] if tuned else []),
        "workers",
        "tenants",
        "jobs",
        "reps",
        *(_HEADERS[m] for m in SUMMARY_METRICS),
    ]
    rows = []
    for record in spans.to_dict("records"):
        group = counts.get_group((record["strategy"], record["workers"], record["tenant_class"]))
        setting = setting_of(record["strategy"], settings).label
        rows.append(
            [
                record["strategy"],
                *([setting] if tuned else []),
                str(record["workers"]),
                record["tenant_class"],
                str(int(group["jobs"].iloc[0])),
                str(len(group)),
                *(span(record[f"{m}_min"], record[f"{m}_max"]) for m in SUMMARY_METRICS),
            ]
        )
    return headers, rows


SUMMARY_INTRO = (
    "Seconds; the range over repetitions. Wait: enqueued_at to started_at. Last done: the "
    "class's last job finished, counted from the repetition's first enqueue. `all` pools "
    "every tenant. Every figure is recomputable from jobs.csv (harness/analysis/waits.py "
    "says how)."
)


def summary_section(
    summary: pd.DataFrame,
    warnings: list[str] | None = None,
    settings: dict[str, QueueSetting] | None = None,
) -> Section:
    """The waits table; `warnings` say where a queue ran unlike the scenario asks;
    `settings` (run.json's) put each library's default and tuned mappings side by side,
    the tuned settings named below the table."""
    table = Table.of(
        summary_rows(summary, settings),
        "Waits and last job done (seconds), range over repetitions",
    )
    bullets = tuned_bullets(summary["strategy"], settings or {})
    return Section(
        "waits",
        "Waits and makespan",
        SUMMARY_INTRO,
        bullets=bullets,
        tables=[table],
        console=[table],
        warnings=warnings or [],
        console_notes=bullets,
    )
