"""A drained backlog's throughput: how fast each queue empties a queue that is full when
its clock starts (`backlog.drain`, scenarios/real-queues-throughput.yaml), from the jobs
table alone.

Per repetition:
  drain_s    = last finished_at - first started_at: from the first claim to the last
               completion, so neither the backlog's load nor a worker's start-up counts
  jobs/s     = jobs / drain_s
  claim p50, p95 (ms) = the claim latency the workers reported: the SQL strategies'
               dequeue statement, a Python library's own fetch call timed around it (a
               batch's call for each of its jobs); none where a library's fetch runs out
               of the harness's reach (the Node libraries)
The table gives each figure's range over repetitions, each library's default and tuned
mappings side by side.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.frames import REPETITION_KEYS
from harness.analysis.settings import SETTING_HEADER, grouped, setting_of, tuned_bullets
from harness.report.cells import span
from harness.report.sections import Section, Table
from harness.results.document import QueueSetting

THROUGHPUT_METRICS = ["jobs_s", "claim_p50_ms", "claim_p95_ms", "drain_s"]
_HEADERS = {
    "jobs_s": "jobs/s",
    "claim_p50_ms": "claim p50 ms",
    "claim_p95_ms": "claim p95 ms",
    "drain_s": "drain s",
}


def throughput_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per repetition: jobs, the drain's length and rate, the claim latency."""
    grouped_jobs = jobs.groupby(REPETITION_KEYS, sort=False)
    table = grouped_jobs.agg(
        jobs=("job_id", "size"),
        first_start=("started_at", "min"),
        last_finish=("finished_at", "max"),
        claim_p50_ms=("claim_ms", "median"),
        claim_p95_ms=("claim_ms", lambda claims: claims.quantile(0.95)),
    ).reset_index()
    table["drain_s"] = (table["last_finish"] - table["first_start"]).dt.total_seconds()
    table["jobs_s"] = table["jobs"] / table["drain_s"].where(table["drain_s"] > 0)
    return table.drop(columns=["first_start", "last_finish"])


def throughput_rows(
    table: pd.DataFrame, settings: dict[str, QueueSetting]
) -> tuple[list[str], list[list[str]]]:
    """Per strategy and workers, by library (default, then tuned): each figure's range."""
    keys = ["strategy", "workers"]
    by_strategy = table.groupby(keys, sort=False)
    low, high = by_strategy[THROUGHPUT_METRICS].min(), by_strategy[THROUGHPUT_METRICS].max()
    order = grouped(table["strategy"], settings)
    headers = ["library", "strategy", SETTING_HEADER, "workers", "jobs", "reps"]
    headers += [_HEADERS[metric] for metric in THROUGHPUT_METRICS]
    rows = []
    for strategy in order:
        for workers in table.loc[table["strategy"] == strategy, "workers"].unique():
            key = (strategy, workers)
            group = by_strategy.get_group(key)
            setting = setting_of(strategy, settings)
            rows.append(
                [
                    setting.library,
                    strategy,
                    setting.label,
                    str(workers),
                    str(int(group["jobs"].iloc[0])),
                    str(len(group)),
                    *(span(low.loc[key, m], high.loc[key, m]) for m in THROUGHPUT_METRICS),
                ]
            )
    return headers, rows


THROUGHPUT_INTRO = (
    "The backlog drained from a full queue: jobs/s = jobs / (last finished_at - first "
    "started_at), so neither the backlog's load nor the workers' start-up counts; claim = "
    "the claim latency the workers reported (a library's fetch call, timed around it; '-' "
    "where the harness cannot time it). Range over repetitions "
    "(harness/analysis/throughput.py)."
)


def throughput_section(table: pd.DataFrame, settings: dict[str, QueueSetting]) -> Section:
    rows = Table.of(throughput_rows(table, settings), "Throughput of the drained backlog")
    bullets = tuned_bullets(table["strategy"], settings)
    return Section(
        "throughput",
        "Throughput",
        THROUGHPUT_INTRO,
        bullets=bullets,
        tables=[rows],
        console=[rows],
        console_notes=bullets,
    )
