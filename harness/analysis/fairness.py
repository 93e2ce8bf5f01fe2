"""Fairness across tenants, from the jobs table alone (pure pandas; no I/O).

Per tenant, in each repetition (t0 = the repetition's first enqueue):
  head wait   = wait of the tenant's first job (earliest enqueued_at, then lowest id):
                what a password-reset mail behind someone else's import feels
  makespan    = last finished_at of the tenant - its first enqueued_at
  alone       = the same jobs (their enqueue offsets and durations) with all the
                repetition's workers to themselves: ideal FIFO, no claim cost
                (harness.simulate.alone_makespan)
  slowdown    = makespan / alone  (>= 1 up to the harness's own costs; NaN if alone is 0)
A tenant that enqueued under several keys (a tenant group's `keys`: a sybil's accounts,
its job types' queues) is one tenant here, whatever the queue saw.
Per repetition, over its tenants:
  Jain's index = (sum x)^2 / (n * sum x^2) of the slowdowns x: 1 when every tenant is
                 slowed alike, 1/n when one tenant takes all the slowdown
  worst-served = the tenant with the largest slowdown
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from harness.analysis.frames import REPETITION_KEYS, ranges
from harness.analysis.simulate import alone_makespan
from harness.report.cells import number, span
from harness.report.sections import Section, Table

TENANT_COLUMNS = [
    *REPETITION_KEYS,
    "tenant_id",
    "tenant_class",
    "jobs",
    "head_wait_s",
    "makespan_s",
    "alone_s",
    "slowdown",
]


def tenant_table(jobs: pd.DataFrame, owners: Mapping[int, int] | None = None) -> pd.DataFrame:
    """One row per repetition and tenant; `jobs` as with_waits gives it (wait_s, ...).
    `owners` (tenant_owners: a key -> its tenant) counts a tenant that enqueued under
    several keys as one, under its first key's id."""
    if owners:
        jobs = jobs.assign(tenant_id=jobs["tenant_id"].map(lambda key: owners.get(key, key)))
    keys = [*REPETITION_KEYS, "tenant_id"]
    ordered = jobs.sort_values([*keys, "enqueued_at", "job_id"])
    grouped = ordered.groupby(keys, sort=False)
    table = grouped.agg(
        tenant_class=("tenant_class", "first"),
        jobs=("job_id", "size"),
        head_wait_s=("wait_s", "first"),
        first=("enqueued_at", "first"),
        last=("finished_at", "max"),
    ).reset_index()
    table["makespan_s"] = (table["last"] - table["first"]).dt.total_seconds()
    table["alone_s"] = _alone(ordered, table)
    table["slowdown"] = table["makespan_s"] / table["alone_s"].where(table["alone_s"] > 0)
    return table[TENANT_COLUMNS]


def _alone(ordered: pd.DataFrame, table: pd.DataFrame) -> list[float]:
    """Each tenant's ideal makespan alone, from its rows (consecutive in `ordered`)."""
    first = ordered.groupby([*REPETITION_KEYS, "tenant_id"], sort=False)["enqueued_at"]
    offsets = (ordered["enqueued_at"] - first.transform("first")).dt.total_seconds().tolist()
    durations = (ordered["duration_ms"] / 1000).tolist()
    alone, start = [], 0
    for count, workers in zip(table["jobs"], table["workers"], strict=True):
        end = start + int(count)
        alone.append(alone_makespan(offsets[start:end], durations[start:end], int(workers)))
        start = end
    return alone


def jain_index(values: pd.Series) -> float:
    values = values.dropna()
    if values.empty or (values**2).sum() == 0:
        return float("nan")
    return float(values.sum() ** 2 / (len(values) * (values**2).sum()))


def repetition_fairness(tenants: pd.DataFrame) -> pd.DataFrame:
    """Per repetition: Jain's index over slowdowns and the worst-served tenant."""
    rows = []
    for keys, group in tenants.groupby(REPETITION_KEYS, sort=False):
        ranked = group.dropna(subset=["slowdown"])
        worst = ranked.sort_values("slowdown").iloc[-1] if len(ranked) else group.iloc[0]
        rows.append(
            {
                **dict(zip(REPETITION_KEYS, keys, strict=True)),
                "tenants": len(group),
                "jain_index": jain_index(group["slowdown"]),
                "worst_tenant": int(worst["tenant_id"]),
                "worst_class": worst["tenant_class"],
                "worst_slowdown": worst["slowdown"],
                "worst_head_wait_s": worst["head_wait_s"],
                "head_wait_max_s": group["head_wait_s"].max(),
            }
        )
    return pd.DataFrame(rows)


def class_fairness(tenants: pd.DataFrame, everyone: str) -> pd.DataFrame:
    """Per repetition and tenant class (and `everyone` over all of them): head waits and
    slowdowns of its tenants, to join onto the summary's rows."""
    both = pd.concat([tenants, tenants.assign(tenant_class=everyone)])
    grouped = both.groupby([*REPETITION_KEYS, "tenant_class"], sort=False)
    return grouped.agg(
        head_wait_p50_s=("head_wait_s", "median"),
        head_wait_max_s=("head_wait_s", "max"),
        slowdown_p50=("slowdown", "median"),
        slowdown_max=("slowdown", "max"),
    ).reset_index()


FAIRNESS_METRICS = ["head_wait_p50_s", "head_wait_max_s", "slowdown_p50", "slowdown_max"]


_FAIRNESS_HEADERS = ["head wait p50", "head wait max", "slowdown p50", "slowdown max"]


FAIRNESS_NOTE = (
    "Head wait: the wait of a tenant's first job. Slowdown: a tenant's makespan (first "
    "enqueue to last finish) over the same jobs' ideal makespan with the workers to "
    "itself. Jain's index over tenants' slowdowns: 1 = all slowed alike, 1/n = one "
    "tenant bears it all. Ranges over repetitions; per tenant: tenants.csv."
)


def fairness_rows(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    spans = ranges(summary, FAIRNESS_METRICS)
    headers = ["strategy", "workers", "tenants", *_FAIRNESS_HEADERS]
    rows = [
        [
            record["strategy"],
            str(record["workers"]),
            record["tenant_class"],
            *(span(record[f"{m}_min"], record[f"{m}_max"]) for m in FAIRNESS_METRICS),
        ]
        for record in spans.to_dict("records")
    ]
    return headers, rows


def jain_rows(fairness: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Per strategy and workers: Jain's index range, and the worst-served tenant of the
    repetition where it fared worst."""
    headers = ["strategy", "workers", "reps", "Jain's index", "worst-served tenant", "slowdown"]
    rows = []
    for (strategy, workers), group in fairness.groupby(["strategy", "workers"], sort=False):
        worst = group.sort_values("worst_slowdown").iloc[-1]
        rows.append(
            [
                str(strategy),
                str(workers),
                str(len(group)),
                span(group["jain_index"].min(), group["jain_index"].max()),
                f"{worst['worst_class']} #{worst['worst_tenant']}",
                number(worst["worst_slowdown"]),
            ]
        )
    return headers, rows


def fairness_section(summary: pd.DataFrame, fairness: pd.DataFrame | None) -> Section:
    """Per class: head waits and slowdowns; per repetition: Jain's index."""
    tables = [Table.of(fairness_rows(summary))]
    console = []
    if fairness is not None and len(fairness):
        jain = Table.of(
            jain_rows(fairness), "Fairness: Jain's index over tenants' slowdowns (1 = all alike)"
        )
        tables.append(jain)
        console.append(jain)
    return Section(
        "fairness", "Fairness across tenants", FAIRNESS_NOTE, tables=tables, console=console
    )
