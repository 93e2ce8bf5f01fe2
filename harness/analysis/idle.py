"""An idle window's polls, from run.json (harness/run/idle.py records them): per
repetition, the window's length, the fetches and every statement its workers made on the
empty queue (pg_stat_statements), each a second, the server's CPU seconds and share of
one core meanwhile, and the jobs done in it (0 for a window that was idle)."""

from __future__ import annotations

import pandas as pd

from harness.analysis.settings import grouped, setting_of
from harness.report.cells import span
from harness.report.sections import Section, Table
from harness.results.document import QueueSetting, RunDocument

IDLE_COLUMNS = [
    "strategy",
    "workers",
    "repetition",
    "window_s",
    "jobs_done",
    "fetches",
    "fetches_per_s",
    "statements",
    "statements_per_s",
    "server_cpu_s",
    "server_cpu_share",
    "fetch_marker",
    "unmeasured",
]


def idle_table(document: RunDocument) -> pd.DataFrame | None:
    """idle.csv: one row per repetition with an idle window."""
    rows = [
        {
            "strategy": entry.strategy,
            "workers": entry.workers,
            "repetition": entry.repetition,
            **idle,
        }
        for entry in document.repetitions
        if (idle := entry.idle) is not None
    ]
    if not rows:
        return None
    table = pd.DataFrame(rows)
    seconds = table["window_s"].where(table["window_s"] > 0)
    for count in ("fetches", "statements"):
        table[f"{count}_per_s"] = pd.to_numeric(table[count]) / seconds
    table["server_cpu_share"] = pd.to_numeric(table["server_cpu_s"]) / seconds
    return table[IDLE_COLUMNS]


IDLE_NOTE = (
    "The scenario's idle window: the queue held nothing to do, its workers polled. "
    "Fetches: the calls of the statements holding the queue's fetch marker, statements: "
    "every statement of the database (pg_stat_statements, the probe's own left out), each "
    "a second; the server's CPU: utime + stime of its processes (/proc) over the window, "
    "as a share of one core; jobs done in it: 0 where it was idle. Ranges over "
    "repetitions; per repetition: idle.csv."
)


def idle_rows(
    table: pd.DataFrame, settings: dict[str, QueueSetting]
) -> tuple[list[str], list[list[str]]]:
    headers = [
        "strategy",
        "library",
        "workers",
        "fetches/s",
        "statements/s",
        "server CPU %",
        "jobs done in it",
        "fetch marker",
    ]
    order = grouped(table["strategy"], settings)
    rows = []
    for (strategy, workers), group in sorted(
        table.groupby(["strategy", "workers"], sort=False),
        key=lambda item: order.index(str(item[0][0])),
    ):
        rows.append(
            [
                str(strategy),
                setting_of(str(strategy), settings).library,
                str(workers),
                _span(group["fetches_per_s"]),
                _span(group["statements_per_s"]),
                _span(group["server_cpu_share"] * 100),
                _span(group["jobs_done"]),
                str(group["fetch_marker"].iloc[0] or "-"),
            ]
        )
    return headers, rows


def _span(values: pd.Series) -> str:
    numbers = pd.to_numeric(values)
    return span(numbers.min(), numbers.max())


def idle_section(table: pd.DataFrame, settings: dict[str, QueueSetting]) -> Section:
    said = sorted({str(why) for why in table["unmeasured"].dropna()})
    result = Table.of(idle_rows(table, settings), "An idle queue's polls")
    return Section(
        "idle",
        "An idle queue's polls and the server's CPU",
        IDLE_NOTE,
        tables=[result],
        console=[result],
        warnings=[f"not measured: {why}" for why in said] + busy_windows(table),
    )


def busy_windows(table: pd.DataFrame) -> list[str]:
    """A sentence per strategy whose window was not idle: jobs were done in it (its queue
    still draining), so its figures are not an idle queue's."""
    busy = table[pd.to_numeric(table["jobs_done"]) > 0]
    return [
        f"{strategy} was not idle in its window: {int(group['jobs_done'].max())} jobs done "
        "in it (its figures are a draining queue's, not an idle one's)"
        for strategy, group in busy.groupby("strategy", sort=False)
    ]
