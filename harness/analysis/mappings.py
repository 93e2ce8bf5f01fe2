"""One row per strategy: the other tenants' waits beside the flood's price, fairness, and
an idle queue's cost: the table an adversarial scenario is read by (docs/real-queues.md).

The flood is the tenant class with the most jobs; the others' jobs are pooled, their
wait p50 and p95 (wait = started_at - enqueued_at); the flood's makespan is its last
finish after the repetition's first enqueue, and beside it that makespan over the
scenario's first strategy's in the same repetition (fifo, where it comes first). Jain's
index is fairness.csv's (over tenants' slowdowns, a tenant's keys counted as one); an
idle window's fetches/s and the server's CPU are idle.csv's. Per repetition in
mappings.csv; the section gives the range over repetitions.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.frames import REPETITION
from harness.analysis.settings import grouped, setting_of
from harness.analysis.waits import with_waits
from harness.report.cells import span
from harness.report.sections import Section, Table
from harness.results.document import QueueSetting

MAPPING_COLUMNS = [
    *REPETITION,
    "others_wait_p50_s",
    "others_wait_p95_s",
    "flood_class",
    "flood_makespan_s",
    "flood_vs_first",
    "jain_index",
    "idle_fetches_per_s",
    "idle_server_cpu_share",
]


def flood_class(jobs: pd.DataFrame) -> str:
    """The class with the most jobs in the run (the first so large, in the jobs' order)."""
    counts = jobs.groupby("tenant_class", sort=False).size()
    return str(counts.idxmax())


def mapping_table(
    jobs: pd.DataFrame, fairness: pd.DataFrame | None, idle: pd.DataFrame | None
) -> pd.DataFrame | None:
    """mappings.csv: per repetition, the others' waits, the flood's makespan (and over
    the first strategy's), Jain's index, and the idle window's fetches/s and CPU share;
    None for a run of one class (no flood beside others)."""
    if jobs["tenant_class"].nunique() < 2:
        return None
    flood = flood_class(jobs)
    timed = with_waits(jobs)
    rows = []
    for keys, run in timed.groupby(REPETITION, sort=False):
        others = run.loc[run["tenant_class"] != flood, "wait_s"]
        rows.append(
            {
                **dict(zip(REPETITION, keys, strict=True)),
                "others_wait_p50_s": others.median(),
                "others_wait_p95_s": others.quantile(0.95),
                "flood_class": flood,
                "flood_makespan_s": run.loc[run["tenant_class"] == flood, "finish_s"].max(),
            }
        )
    table = pd.DataFrame(rows)
    first = table[table["strategy"] == table["strategy"].iloc[0]]
    base = first.set_index(["workers", "repetition"])["flood_makespan_s"]
    index = pd.MultiIndex.from_frame(table[["workers", "repetition"]])
    table["flood_vs_first"] = table["flood_makespan_s"].to_numpy() / base.reindex(index).to_numpy()
    table = _joined(table, fairness, ["jain_index"])
    idle_columns = ["idle_fetches_per_s", "idle_server_cpu_share"]
    renamed = None
    if idle is not None:
        renamed = idle.rename(
            columns={"fetches_per_s": idle_columns[0], "server_cpu_share": idle_columns[1]}
        )
    table = _joined(table, renamed, idle_columns)
    return table[MAPPING_COLUMNS]


def _joined(table: pd.DataFrame, other: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    if other is None or not len(other):
        return table.assign(**{column: float("nan") for column in columns})
    return table.merge(other[[*REPETITION, *columns]], on=REPETITION, how="left")


MAPPINGS_NOTE = (
    "Per strategy: the other tenants' waits (every class but the flood, the class with "
    "the most jobs), the flood's makespan (its last finish after the first enqueue) and "
    "that over the first strategy's in the same repetition, Jain's index over tenants' "
    "slowdowns (a tenant's keys counted as one), and, with an idle window, the fetches "
    "a second its workers made on the empty queue and the server's CPU share meanwhile "
    "(idle.csv). Ranges over repetitions; per repetition: mappings.csv."
)


def mapping_rows(
    table: pd.DataFrame, settings: dict[str, QueueSetting]
) -> tuple[list[str], list[list[str]]]:
    first = str(table["strategy"].iloc[0])
    flood = str(table["flood_class"].iloc[0])
    headers = [
        "strategy",
        "library",
        "setting",
        "workers",
        "others' wait p50 (s)",
        "others' wait p95 (s)",
        f"{flood} makespan (s)",
        f"over {first}",
        "Jain's index",
    ]
    idle = table["idle_fetches_per_s"].notna().any() or table["idle_server_cpu_share"].notna().any()
    if idle:
        headers += ["idle fetches/s", "idle server CPU %"]
    rows = []
    order = grouped(table["strategy"], settings)
    for (strategy, workers), group in sorted(
        table.groupby(["strategy", "workers"], sort=False),
        key=lambda item: order.index(str(item[0][0])),
    ):
        setting = setting_of(str(strategy), settings)
        row = [str(strategy), setting.library, setting.label, str(workers)]
        row += [_span(group[column]) for column in MAPPING_COLUMNS[3:5]]
        row += [_span(group["flood_makespan_s"]), _span(group["flood_vs_first"])]
        row.append(_span(group["jain_index"]))
        if idle:
            row += [_span(group["idle_fetches_per_s"]), _span(group["idle_server_cpu_share"] * 100)]
        rows.append(row)
    return headers, rows


def _span(values: pd.Series) -> str:
    return span(values.min(), values.max())


def mappings_section(table: pd.DataFrame, settings: dict[str, QueueSetting]) -> Section:
    result = Table.of(
        mapping_rows(table, settings), "Per strategy: the others' waits, the flood's price"
    )
    return Section(
        "mappings",
        "Per strategy: the others' waits and the flood's price",
        MAPPINGS_NOTE,
        tables=[result],
        console=[result],
    )
