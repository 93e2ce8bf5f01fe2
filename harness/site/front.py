"""The front page: every library and mapping across the runs given, one block per kind of
result, in the order of FRONT.

A block is a function of the site's data that gives a `Block`, or None where the runs
hold nothing for it (no throughput run, no fault run): the page shows what is there.
To add one (the idle poll's cost, say), write `idle_block(data: SiteData, rows:
pd.DataFrame | None) -> Block | None` that reads its runs' CSV with
`data.stacked("idle.csv")` (or a table function in harness/site/tables.py), draws with
harness/site/charts.py, returns None where no run has it, and add it to FRONT; `rows`
is None on the front page (take each strategy's newest run, `tables.newest_rows`) and a
library's rows on its page where the function is also listed in `library_blocks`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from harness.analysis.horizon import DRIFT_FIGURES
from harness.results.jobs import PG
from harness.site import charts, tables
from harness.site.pages import (
    Block,
    Cell,
    escaped,
    figure_cell,
    library_page,
    table,
    value_cell,
)
from harness.site.runs import SiteRun


@dataclass(frozen=True)
class SiteData:
    """The runs of a site and the tables made from them, each made once."""

    runs: list[SiteRun]

    @cached_property
    def fairness(self) -> pd.DataFrame:
        return tables.fairness(self.runs)

    @cached_property
    def throughput(self) -> pd.DataFrame:
        return tables.throughput(self.runs)

    @cached_property
    def plans(self) -> pd.DataFrame:
        return tables.plans(self.runs)

    @cached_property
    def faults(self) -> pd.DataFrame:
        return tables.faults(self.runs)

    @cached_property
    def sql_faults(self) -> pd.DataFrame:
        return tables.sql_faults(self.runs)

    @cached_property
    def horizon(self) -> pd.DataFrame:
        return tables.horizon_rows(self.runs)

    @cached_property
    def majors(self) -> pd.DataFrame:
        return tables.majors(self.runs)

    def stacked(self, name: str) -> pd.DataFrame:
        """A derived CSV of every complete run, each row with `run_id` and `href`."""
        return tables.stacked(self.runs, name)

    def report(self, href: str) -> str:
        """Where a row's numbers link: its run's report.html, else its folder's run.json."""
        run = next(run for run in self.runs if run.href == href)
        return run.report or href + "run.json"

    def libraries(self) -> list[str]:
        """Every library a complete run ran, the harness's own first."""
        found = [
            library for run in self.runs if run.complete for library, _ in run.settings().values()
        ]
        for frame in (self.fairness, self.throughput, self.plans, self.faults):
            if "library" in frame:
                found += list(frame["library"])
        return list(dict.fromkeys(sorted(found, key=lambda name: name != "harness")))


FrontBlock = Callable[[SiteData, pd.DataFrame | None], Block | None]


def _link(text: str, href: str) -> Cell:
    return Cell(text, href)


def _names(row: pd.Series, data: SiteData) -> list[Cell]:
    return [
        Cell(str(row["scenario"])),
        _link(str(row["library"]), library_page(str(row["library"]))),
        Cell(str(row["strategy"])),
        Cell(str(row["setting"])),
    ]


def _run_cells(row: pd.Series, data: SiteData, csv: str) -> list[Cell]:
    return [
        _link(str(row["run_id"]), data.report(str(row["href"]))),
        _link(csv, str(row["href"]) + csv),
    ]


def fairness_block(data: SiteData, rows: pd.DataFrame | None = None) -> Block | None:
    """Fairness and its price: the small tenants' waits against the large tenant's
    makespan, per strategy (each scenario's newest run of it)."""
    frame = _newest(data.fairness, rows, ["scenario", PG, "strategy", "workers"])
    if frame.empty:
        return None
    headers = ["scenario", "library", "strategy", "setting", "PostgreSQL", "workers"]
    headers += ["small p50 wait s", "small p95 wait s", "large makespan s", "x FIFO"]
    headers += ["jobs/s", "Jain's index", "reps", "run", "data"]
    body = []
    for scenario, part in frame.groupby("scenario", sort=False):
        body.append(f"<h3>{escaped(scenario)}</h3>")
        body.append(charts.fairness_chart(part, f"fairness-{scenario}"))
    cells = []
    for _, row in frame.iterrows():
        report = data.report(str(row["href"]))
        figures = [
            figure_cell(row[f"{name}_low"], row[f"{name}_high"], report)
            for name in ("small_p50", "small_p95", "makespan", "x_fifo", "throughput", "jain")
        ]
        cells.append(
            [
                *_names(row, data),
                Cell(str(row[PG])),
                Cell(str(row["workers"])),
                *figures,
                Cell(str(row["repetitions"])),
                *_run_cells(row, data, "summary.csv"),
            ]
        )
    body.append(table(headers, cells))
    return Block(
        "fairness",
        "Fairness and its price",
        "Behind one large tenant's backlog, how long the small tenants wait (median and p95 "
        "of their jobs' waits), and what serving them first costs the large tenant: its "
        "last job done, in seconds and over FIFO's in the same repetition. Each figure is "
        "the range over the run's repetitions; every number links to its run's report. "
        "In the charts, a colour per library, tuned mappings as diamonds; click a legend "
        "entry to hide or show a library.",
        "\n".join(body),
    )


def throughput_block(data: SiteData, rows: pd.DataFrame | None = None) -> Block | None:
    """Throughput: a drained backlog's jobs/s, each library at its defaults and tuned."""
    frame = _newest(data.throughput, rows, ["scenario", PG, "strategy", "workers"])
    if frame.empty:
        return None
    headers = ["scenario", "library", "strategy", "setting", "PostgreSQL", "workers"]
    headers += ["jobs", "jobs/s", "claim p50 ms", "drain s", "run", "data"]
    cells = []
    for _, row in frame.iterrows():
        report = data.report(str(row["href"]))
        figures = [
            figure_cell(row[f"{name}_low"], row[f"{name}_high"], report)
            for name in ("jobs", "jobs_s", "claim_p50_ms", "drain_s")
        ]
        cells.append(
            [
                *_names(row, data),
                Cell(str(row[PG])),
                Cell(str(row["workers"])),
                *figures,
                *_run_cells(row, data, "throughput.csv"),
            ]
        )
    return Block(
        "throughput",
        "Throughput, default and tuned",
        "A backlog queued before the clock starts, drained: jobs/s from the first claim to "
        "the last completion, each library's mapping at its defaults and at its "
        "maintainers' settings. The claim latency is timed where the harness calls the "
        "fetch (the SQL strategies, the Python libraries').",
        charts.throughput_chart(frame, "throughput") + table(headers, cells),
    )


def plans_block(data: SiteData, rows: pd.DataFrame | None = None) -> Block | None:
    """The fetch's cost: one dequeue under EXPLAIN (ANALYZE, BUFFERS), and its flags."""
    frame = _newest(data.plans, rows, ["scenario", PG, "variant", "strategy"])
    if frame.empty:
        return None
    headers = ["scenario", "library", "strategy", "setting", "PostgreSQL", "variant"]
    headers += ["queued jobs", "total ms", "shared buffers", "flags", "run", "data"]
    cells = []
    for _, row in frame.iterrows():
        report = data.report(str(row["href"]))
        cells.append(
            [
                *_names(row, data),
                Cell(str(row[PG])),
                Cell(str(row["variant"])),
                value_cell(row["queued_jobs"], report),
                value_cell(row["total_ms"], report),
                value_cell(row["shared_buffers"], report),
                Cell(str(row["flags"]), flag=row["flags"] != "-"),
                *_run_cells(row, data, "plans.csv"),
            ]
        )
    return Block(
        "plans",
        "The fetch's cost",
        "One dequeue (a library's own fetch, under auto_explain) on each backlog, the median "
        "over its captured executions: planning plus execution time and shared buffers. "
        "Flags: SORTS TENANTS sorts every tenant before the limit; GLOBAL WALK walks every "
        "queued job filtering on the tenant; READS BACKLOG reads half the queued jobs or "
        "more; GROWS WITH BACKLOG, its buffers or rows grow with the queued jobs across "
        "the backlogs captured.",
        charts.plans_chart(frame, "plans") + table(headers, cells),
    )


def faults_block(data: SiteData, rows: pd.DataFrame | None = None) -> Block | None:
    """What each library did with the jobs a fault interrupted."""
    frame = _newest(data.faults, rows, ["scenario", PG, "strategy"])
    sql = data.sql_faults if rows is None else pd.DataFrame()
    if frame.empty and sql.empty:
        return None
    parts = []
    if not frame.empty:
        headers = ["fault scenario", "library", "strategy", "setting", "PostgreSQL", "reps"]
        headers += [*tables.OUTCOMES, "recovery max s", "promise", "verdict", "run", "data"]
        cells = []
        for _, row in frame.iterrows():
            report = data.report(str(row["href"]))
            cells.append(
                [
                    *_names(row, data),
                    Cell(str(row[PG])),
                    Cell(str(row["repetitions"])),
                    *[value_cell(row[o], report) for o in tables.OUTCOMES],
                    value_cell(row["recovery_max_s"], report),
                    Cell(str(row["promise"])),
                    Cell(str(row["verdict"]), flag=row["verdict"] not in ("as promised", "-")),
                    *_run_cells(row, data, "library-faults.csv"),
                ]
            )
        parts.append(table(headers, cells))
    if not sql.empty:
        counts = [c for c in sql.columns if c not in tables.KEYS and c != "repetitions"]
        headers = ["fault scenario", "strategy", "PostgreSQL", "reps", *counts, "run", "data"]
        cells = [
            [
                Cell(str(row["scenario"])),
                Cell(str(row["strategy"])),
                Cell(str(row[PG])),
                Cell(str(row["repetitions"])),
                *[value_cell(row[c], data.report(str(row["href"]))) for c in counts],
                *_run_cells(row, data, "faults.csv"),
            ]
            for _, row in sql.iterrows()
        ]
        parts.append("<h3>The harness's own strategies</h3>" + table(headers, cells))
    return Block(
        "faults",
        "When a worker dies",
        "Every job of a fault run in one outcome, summed over the repetitions: ok, run "
        "twice, stranded, abandoned, still waiting, lost; how long until a killed "
        "worker's jobs started again; and the verdict against what the library's docs "
        "promise (docs/faults.md).",
        "\n".join(parts),
    )


def horizon_block(data: SiteData, rows: pd.DataFrame | None = None) -> Block | None:
    """How each queue aged over a long steady run: its drift and verdict."""
    frame = _newest(data.horizon, rows, ["scenario", PG, "strategy", "workers"])
    if frame.empty:
        return None
    headers = ["scenario", "library", "strategy", "setting", "PostgreSQL", "workers"]
    headers += [*DRIFT_FIGURES, "run", "data"]
    cells = [
        [
            *_names(row, data),
            Cell(str(row[PG])),
            Cell(str(row["workers"])),
            *[
                Cell(str(row[name]), flag=name == "verdict" and "growing" in str(row[name]))
                for name in DRIFT_FIGURES
            ],
            *_run_cells(row, data, "horizon-drift.csv"),
        ]
        for _, row in frame.iterrows()
    ]
    return Block(
        "horizon",
        "Over hours: how each queue ages",
        "A long steady run's drift, from the steady phase's first window to its last: dead "
        "tuples, the size's slope, the p99 wait's change with its 95 % interval, the "
        "fetch's buffers, and the verdict (growing, recovering, stable), each repetition's "
        "(docs/long-horizon.md).",
        table(headers, cells),
    )


def _newest(frame: pd.DataFrame, rows: pd.DataFrame | None, keys: list[str]) -> pd.DataFrame:
    """The front page's rows: each key's newest run; a library page's: `rows` as given."""
    if rows is not None:
        return rows
    return tables.newest_rows(frame, keys)


FRONT: list[FrontBlock] = [
    fairness_block,
    throughput_block,
    plans_block,
    faults_block,
    horizon_block,
]


def library_blocks(data: SiteData, library: str) -> list[Block]:
    """A library's page: each front block's rows of that library, every run of them."""
    frames: list[tuple[FrontBlock, pd.DataFrame]] = [
        (fairness_block, data.fairness),
        (throughput_block, data.throughput),
        (plans_block, data.plans),
        (faults_block, data.faults),
        (horizon_block, data.horizon),
    ]
    found = []
    for make, frame in frames:
        if "library" in frame and (frame["library"] == library).any():
            part = make(data, frame[frame["library"] == library])
            if part is not None:
                found.append(part)
    return found
