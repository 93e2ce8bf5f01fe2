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

import math

import numpy as np
import pandas as pd

from harness.analysis.fairness import class_fairness, tenant_table
from harness.analysis.frames import ALL_TENANTS, REPETITION_KEYS, ranges, wait_seconds
from harness.analysis.settings import SETTING_HEADER, any_tuned, grouped, setting_of, tuned_bullets
from harness.report.cells import span
from harness.report.sections import Section, Table
from harness.results.document import QueueSetting

SUMMARY_KEYS = [*REPETITION_KEYS, "tenant_class"]


def with_waits(jobs: pd.DataFrame) -> pd.DataFrame:
    """jobs plus wait_s and, per repetition, t0 and the job's enqueue, start and finish
    offsets from it."""
    jobs = jobs.copy()
    jobs["wait_s"] = wait_seconds(jobs)
    t0 = jobs.groupby(REPETITION_KEYS)["enqueued_at"].transform("min")
    jobs["enqueue_s"] = (jobs["enqueued_at"] - t0).dt.total_seconds()
    jobs["start_s"] = (jobs["started_at"] - t0).dt.total_seconds()
    jobs["finish_s"] = (jobs["finished_at"] - t0).dt.total_seconds()
    return jobs


_NICE_STEPS = (1, 2, 2.5, 5)


def bucket_width(span_s: float, buckets: int = 40) -> float:
    """A round bucket width (0.1, 0.25, 0.5, 1, 2, 5 s ...) that cuts `span_s` into about
    `buckets` buckets at most."""
    raw = max(span_s, 1e-3) / buckets
    scale = 10 ** math.floor(math.log10(raw))
    return next(step * scale for step in (*_NICE_STEPS, 10) if step * scale >= raw)


def over_time(
    jobs: pd.DataFrame, value: str, clock: str, bucket_s: float, by: list[str]
) -> pd.DataFrame:
    """p50 and p95 of `value` per strategy, workers, each of `by`, and bucket of `clock`
    (seconds from the repetition's t0, as with_waits gives them), repetitions pooled;
    `bucket_s` is each bucket's middle."""
    keys = ["strategy", "workers", *by]
    bucketed = jobs.assign(bucket_s=(jobs[clock] // bucket_s + 0.5) * bucket_s)
    grouped = bucketed.groupby([*keys, "bucket_s"], sort=False)[value]
    table = grouped.agg(
        jobs="size",
        p50="median",
        p95=lambda values: values.quantile(0.95),
    )
    return table.reset_index().sort_values([*keys, "bucket_s"], kind="stable")


SPREAD_BUCKETS = 3  # a class enqueued over more buckets than this arrived over time


def waits_over_run(jobs: pd.DataFrame, buckets: int = 40) -> tuple[pd.DataFrame, str]:
    """Each tenant class's p50 and p95 wait over the run, and the clock it is bucketed by:
    `enqueue_s`, when a job was enqueued, if some class's jobs arrived over time; else
    (every class enqueued in bursts, which would be a point each) `start_s`, when its
    wait ended, as pgbench's --aggregate-interval buckets latencies by when they end."""
    timed = with_waits(jobs)
    width = bucket_width(float(timed["finish_s"].max()), buckets)
    spread = (timed["enqueue_s"] // width).groupby(timed["tenant_class"]).nunique()
    clock = "enqueue_s" if (spread > SPREAD_BUCKETS).any() else "start_s"
    return over_time(timed, "wait_s", clock, width, ["tenant_class"]), clock


def backlog_over_run(jobs: pd.DataFrame, points: int = 80) -> pd.DataFrame:
    """Each tenant class's jobs still queued (enqueued, not yet started) over the run, per
    strategy and workers: at `points` moments from each repetition's first enqueue to the
    last job's finish, the median over repetitions. Where a burst's waits over time only
    repeat when each job started, this shows the backlog a class drains, and how fast:
    the noisy neighbour as its victims see it."""
    timed = with_waits(jobs)
    step = max(float(timed["finish_s"].max()), 1e-3) / points
    moments = np.arange(points + 1) * step
    rows = []
    for keys, repetition in timed.groupby([*REPETITION_KEYS, "tenant_class"], sort=False):
        enqueued = np.sort(repetition["enqueue_s"].to_numpy())
        started = np.sort(repetition["start_s"].fillna(np.inf).to_numpy())
        queued = np.searchsorted(enqueued, moments, "right") - np.searchsorted(
            started, moments, "right"
        )
        key = dict(zip([*REPETITION_KEYS, "tenant_class"], keys, strict=True))
        rows.append(pd.DataFrame({**key, "at_s": moments, "queued": queued}))
    frame = pd.concat(rows, ignore_index=True)
    by = ["strategy", "workers", "tenant_class", "at_s"]
    return frame.groupby(by, sort=False)["queued"].median().reset_index()


def claims_over_time(jobs: pd.DataFrame, buckets: int = 40) -> pd.DataFrame:
    """Claim latency (ms, as the workers timed their claims) by when the job started."""
    timed = with_waits(jobs[jobs["claim_ms"].notna()])
    width = bucket_width(float(timed["finish_s"].max()), buckets)
    return over_time(timed, "claim_ms", "start_s", width, [])


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


def _typical(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The median over repetitions of `metric`: per class (rows) and strategy (columns),
    at the scenario's first worker count."""
    first = summary[summary["workers"] == summary["workers"].iloc[0]]
    typical = first.groupby(["tenant_class", "strategy"], sort=False)[metric].median()
    return typical.unstack("strategy")


def waits_headline(summary: pd.DataFrame) -> str:
    """The answer in one sentence for a run without a reference: the tenant class whose
    median wait differs most between strategies, each strategy's median wait for it."""
    typical = _typical(summary, "wait_p50_s")
    classes = typical.drop(index=ALL_TENANTS, errors="ignore")
    classes = classes if len(classes) else typical
    spread = classes.max(axis=1) / classes.min(axis=1).clip(lower=1e-9)
    tenant_class = str(spread.idxmax())
    waits = pd.Series(classes.loc[tenant_class]).sort_values(ascending=False)
    each = ", ".join(f"{span(w, w)} s with {strategy}" for strategy, w in waits.items())
    ratio = f" ({spread.max():.3g}x)" if len(waits) > 1 else ""
    workers = summary["workers"].iloc[0]
    sentence = f"{tenant_class} tenants' median wait, {workers} workers: {each}{ratio}."
    return sentence[:1].upper() + sentence[1:]


def claim_note(summary: pd.DataFrame) -> str:
    """Each strategy's median claim latency (the dequeue transaction as the workers timed
    it), and each against the first strategy's."""
    typical = _typical(summary, "claim_p50_ms")
    pooled = typical.loc[ALL_TENANTS] if ALL_TENANTS in typical.index else typical.iloc[0]
    first = pooled.iloc[0]
    each = ", ".join(
        f"{strategy} {span(ms, ms)} ms" + (f" ({ms / first:.2f}x)" if index else "")
        for index, (strategy, ms) in enumerate(pooled.items())
    )
    return f"Median claim latency (median over repetitions): {each}."


def waits_verdict(summary: pd.DataFrame, notes: list[str]) -> Section:
    """The verdict of a run whose scenario gives no reference: its headline sentence, and
    each class's median wait per strategy."""
    typical = _typical(summary, "wait_p50_s")
    headers = ["tenants", *(str(strategy) for strategy in typical.columns)]
    rows = [
        [str(tenant_class), *(span(value, value) for value in values)]
        for tenant_class, values in typical.iterrows()
    ]
    table = Table(headers, rows, "Median wait (s), median over repetitions")
    return Section(
        "verdict",
        "Verdict",
        "Median wait (s) per tenant class and strategy, the median over repetitions; no "
        "reference to compare with.",
        bullets=notes,
        tables=[table],
        headline=waits_headline(summary),
    )
