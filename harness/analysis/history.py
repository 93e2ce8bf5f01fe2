"""Many runs' headline figures side by side (pure): what `harness history` lists and
trends, read from each run folder's results.json (harness/results/headline.py).

`figures_frame` flattens the documents to one row per run and figure; `runs_table` is
one row per run; `chosen` picks the figures to trend (glob patterns, or by default those
with a reference that two runs or more share); `trend` puts each chosen figure's runs in
time order with the change from one run to the next.
"""

from __future__ import annotations

import fnmatch

import pandas as pd

from harness.report.cells import number, span
from harness.report.sections import Section, Table
from harness.results.headline import Results

RUN_COLUMNS = ["run_id", "kind", "name", "status", "started_at", "commit", "dirty", "host"]
FIGURE_COLUMNS = [
    "figure",
    "unit",
    "value",
    "low",
    "high",
    "lower_is_better",
    "samples",
    "reference_low",
    "reference_high",
    "within",
]
DEFAULT_TRENDS = 8  # figures trended when none are asked for


def runs_table(documents: list[Results]) -> pd.DataFrame:
    """One row per run, oldest first."""
    rows = [
        {
            **{column: getattr(document, column) for column in RUN_COLUMNS},
            "figures": len(document.figures),
        }
        for document in documents
    ]
    frame = pd.DataFrame(rows, columns=[*RUN_COLUMNS, "figures"])
    return frame.sort_values(["started_at", "run_id"], na_position="first").reset_index(drop=True)


def figures_frame(documents: list[Results]) -> pd.DataFrame:
    """One row per run and figure: the run's columns, then the figure's."""
    rows = []
    for document in documents:
        run = {column: getattr(document, column) for column in RUN_COLUMNS}
        for figure in document.figures:
            reference = figure.reference or (None, None)
            rows.append(
                {
                    **run,
                    "figure": figure.name,
                    "unit": figure.unit,
                    "value": figure.value,
                    "low": figure.range[0],
                    "high": figure.range[1],
                    "lower_is_better": figure.lower_is_better,
                    "samples": figure.samples,
                    "reference_low": reference[0],
                    "reference_high": reference[1],
                    "within": figure.within,
                }
            )
    return pd.DataFrame(rows, columns=[*RUN_COLUMNS, *FIGURE_COLUMNS])


def chosen(figures: pd.DataFrame, patterns: list[str]) -> list[str]:
    """The figures to trend, in the order they first appear: those matching any of
    `patterns` (shell globs over the names); without patterns, the figures with a
    reference that at least two runs have, else any that two runs have, at most
    DEFAULT_TRENDS."""
    names = list(dict.fromkeys(figures["figure"]))
    if patterns:
        return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    runs = figures.groupby("figure", sort=False)["run_id"].nunique()
    shared = [name for name in names if runs.get(name, 0) >= 2]
    referenced = set(figures.loc[figures["reference_low"].notna(), "figure"])
    preferred = [name for name in shared if name in referenced] or shared
    return preferred[:DEFAULT_TRENDS]


def trend(figures: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """The chosen figures' rows, each figure's runs oldest first, with `change`: this
    run's value over the previous run's (NaN for the first)."""
    rows = figures[figures["figure"].isin(names)].copy()
    rows["order"] = rows["figure"].map({name: index for index, name in enumerate(names)})
    rows = rows.sort_values(["order", "started_at", "run_id"], na_position="first")
    previous = rows.groupby("figure", sort=False)["value"].shift()
    rows["change"] = rows["value"] / previous
    return rows.drop(columns="order").reset_index(drop=True)


def history_sections(runs: pd.DataFrame, trends: pd.DataFrame) -> list[Section]:
    """The runs, then one table per trended figure."""
    headers = ["run", "kind", "name", "status", "commit", "host", "figures"]
    run_rows = [_run_row(run) for _, run in runs.iterrows()]
    sections = [
        Section(
            "runs",
            f"Runs ({len(runs)})",
            "Every run folder with a results.json, oldest first.",
            tables=[Table(headers, run_rows)],
            console=[Table(headers, run_rows, "Runs")],
        )
    ]
    for index, (name, rows) in enumerate(trends.groupby("figure", sort=False)):
        title = f"{name} ({rows['unit'].iloc[0]})"
        table = Table(
            ["run", "commit", "value", "range", "vs previous", "reference", "within"],
            [_trend_row(row) for _, row in rows.iterrows()],
            title,
        )
        sections.append(Section(f"figure-{index + 1}", title, tables=[table], console=[table]))
    return sections


def _run_row(run: pd.Series) -> list[str]:
    named = [str(run[column]) for column in ("run_id", "kind", "name", "status")]
    return [*named, _commit(run), str(run["host"] or "-"), str(run["figures"])]


def _commit(row: pd.Series) -> str:
    commit = row["commit"]
    if not isinstance(commit, str) or not commit:
        return "-"
    return commit[:10] + ("+dirty" if row["dirty"] is True else "")


def _trend_row(row: pd.Series) -> list[str]:
    has_reference = pd.notna(row["reference_low"])
    within = row["within"]
    return [
        str(row["run_id"]),
        _commit(row),
        number(row["value"]),
        span(row["low"], row["high"]),
        f"{row['change']:.2f}x" if pd.notna(row["change"]) else "-",
        span(row["reference_low"], row["reference_high"]) if has_reference else "-",
        ("yes" if within else "no") if isinstance(within, bool) else "-",
    ]
