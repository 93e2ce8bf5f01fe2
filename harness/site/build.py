"""`harness site`: a static site from run folders, written into a new folder.

    index.html           the front page (harness/site/front.py): every library and mapping
    library-<name>.html  a library's rows, every run of them, and what ran it
    majors.html          figures side by side per PostgreSQL major, where runs have several
    trends.html          chosen figures across runs and commits (results.json)
    runs.html            every run: its report, data, provenance and the command again
    runs/<scenario>/<run id>/   each run folder, copied whole (report.html, CSVs, run.json)
    assets/              site.css and plotly.min.js, the one copy every chart uses

The site is made in a temporary folder beside the target and renamed into place: a
folder that exists and holds anything is refused, and nothing is ever half-written.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.analysis.history import chosen, figures_frame, trend
from harness.errors import HarnessError
from harness.report.cells import number, span
from harness.results.jobs import PG
from harness.site import charts
from harness.site.front import FRONT, SiteData, library_blocks
from harness.site.pages import (
    CSS,
    PLOTLY,
    STYLE,
    Block,
    Cell,
    block,
    escaped,
    library_page,
    page,
    table,
)
from harness.site.runs import SiteRun, collect

INDEX, RUNS_PAGE, TRENDS, MAJORS = "index.html", "runs.html", "trends.html", "majors.html"


@dataclass(frozen=True)
class Built:
    """What a build wrote: where, its runs, its pages."""

    path: Path
    runs: int
    pages: list[str]


def check_target(out: Path) -> None:
    """The site goes into a new folder or an empty one, never over anything."""
    if out.exists() and not out.is_dir():
        raise HarnessError(f"-o: {out} is a file; the site goes into a new or empty folder")
    if out.is_dir() and any(out.iterdir()):
        raise HarnessError(
            f"-o: {out} is not empty; a site is never written over anything: give a new folder"
        )


def build_site(paths: list[Path], out: Path, patterns: list[str]) -> Built:
    check_target(out)
    runs = collect(paths)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        pages = _write(staging, SiteData(runs), patterns)
        staging.chmod(0o755)
        if out.is_dir():
            out.rmdir()  # empty: checked above
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Built(out, len(runs), pages)


def _write(root: Path, data: SiteData, patterns: list[str]) -> list[str]:
    for run in data.runs:
        shutil.copytree(run.data.path, root / run.href, ignore=shutil.ignore_patterns(".*"))
    (root / STYLE).parent.mkdir()
    (root / STYLE).write_text(CSS)
    (root / PLOTLY).write_text(charts.plotly_js())
    libraries = data.libraries()
    majors = not data.majors.empty
    nav = [("Front page", INDEX), ("Runs", RUNS_PAGE), ("Trends", TRENDS)]
    nav += [("Majors", MAJORS)] if majors else []
    nav += [(library, library_page(library)) for library in libraries]
    pages = {
        INDEX: page("Tenant queue bench: results", INDEX, nav, _front(data)),
        RUNS_PAGE: page("Every run", RUNS_PAGE, nav, [_runs(data)]),
        TRENDS: page("Figures across runs and commits", TRENDS, nav, _trends(data, patterns)),
    }
    if majors:
        pages[MAJORS] = page("Across PostgreSQL majors", MAJORS, nav, [_majors(data)])
    for library in libraries:
        name = library_page(library)
        pages[name] = page(f"{library}", name, nav, _library(data, library))
    for name, text in pages.items():
        (root / name).write_text(text)
    return list(pages)


def _front(data: SiteData) -> list[str]:
    complete = [run for run in data.runs if run.complete]
    scenarios = sorted({run.scenario for run in complete})
    intro = (
        f"{len(data.runs)} runs ({len(complete)} complete) of {len(scenarios)} scenarios: "
        f"{', '.join(scenarios)}. Where a scenario ran more than once, each strategy's "
        "newest run is shown here; its library's page and the trends keep every run. "
        f'Every run, its data and the command that made it: <a href="{RUNS_PAGE}">runs</a>.'
    )
    blocks = [part for make in FRONT if (part := make(data, None)) is not None]
    if not blocks:
        blocks = [Block("empty", "Nothing to compare", "No complete timed run or capture.", "")]
    return [f'<p class="intro">{intro}</p>', *(block(part) for part in blocks)]


def _runs(data: SiteData) -> str:
    headers = ["run", "scenario", "kind", "status", "started (UTC)", "commit", "host"]
    headers += ["PostgreSQL", "strategies", "data", "command"]
    rows = []
    for run in reversed(data.runs):
        report = run.report
        rows.append(
            [
                Cell(run.run_id, report or run.href + "run.json"),
                Cell(run.scenario, run.href + "scenario.yaml"),
                Cell(run.kind),
                Cell(
                    run.document.status + (f": {run.document.error}" if run.document.error else "")
                ),
                Cell(run.document.started_at[:19].replace("T", " ")),
                Cell(run.short_commit),
                Cell(str(run.document.metadata.get("host", {}).get("hostname") or "-")),
                Cell(", ".join(run.document.pg_versions) or "-"),
                Cell(", ".join(run.document.queues) or "-"),
                *_files(run),
                Cell(run.reproduce() or "-", code=True),
            ]
        )
    return block(
        Block(
            "runs",
            f"Runs ({len(data.runs)})",
            "Newest first. Each run folder is copied whole under runs/: its report, its "
            "raw data (jobs.csv, run.json, scenario.yaml) and every derived CSV. The "
            "command is the one recorded in run.json, at the harness's commit.",
            table(headers, rows),
        )
    )


def _status(run: SiteRun) -> str:
    error = run.document.error
    return run.document.status + (f": {error}" if error else "")


def _files(run: SiteRun) -> list[Cell]:
    names = ["run.json", *(["results.json"] if run.results else []), *run.csv_files()]
    links = " ".join(f'<a href="{escaped(run.href + n)}">{escaped(n)}</a>' for n in names)
    return [Cell("", markup=links)]


def _trends(data: SiteData, patterns: list[str]) -> list[str]:
    documents = [run.results for run in data.runs if run.results is not None]
    figures = figures_frame(documents)
    names = chosen(figures, patterns) if len(figures) else []
    if patterns and not names:
        raise HarnessError(f"--figure: no figure of these runs matches {patterns}")
    if not names:
        return [
            '<p class="intro">No figure is shared by two runs yet: a trend needs a scenario '
            "run twice or more (harness site --figure PATTERN chooses figures).</p>"
        ]
    trends = trend(figures, names)
    commits = {run.run_id: run.short_commit for run in data.runs}
    trends["commit_label"] = trends["run_id"].map(commits).fillna("-")
    reports = {run.run_id: run.report or run.href + "run.json" for run in data.runs}
    parts = [
        '<p class="intro">Each figure of results.json across the runs that have it, oldest '
        "first: the point is its value (the median over the run's repetitions), the bar its "
        "range, the grey band the scenario's reference. Hover a point for its run and "
        "commit; the table links each value to its run's report.</p>"
    ]
    for index, (name, rows) in enumerate(trends.groupby("figure", sort=False)):
        cells = [
            [
                Cell(str(row["run_id"]), reports[str(row["run_id"])]),
                Cell(str(row["commit_label"])),
                Cell(number(row["value"]), reports[str(row["run_id"])]),
                Cell(span(row["low"], row["high"])),
                Cell(f"{row['change']:.2f}x" if pd.notna(row["change"]) else "-"),
            ]
            for _, row in rows.iterrows()
        ]
        chart = charts.trend_chart(rows, f"trend-{index}")
        body = chart + table(["run", "commit", "value", "range", "vs previous"], cells)
        parts.append(block(Block(f"trend-{index}", f"{name} ({rows['unit'].iloc[0]})", "", body)))
    return parts


def _majors(data: SiteData) -> str:
    frame = data.majors
    versions = sorted(set(frame[PG]), key=lambda v: tuple(int(p) for p in v.split(".")))
    headers = ["scenario", "strategy", "workers", "figure", *(f"PostgreSQL {v}" for v in versions)]
    rows = []
    for (scenario, strategy, workers), group in frame.groupby(
        ["scenario", "strategy", "workers"], sort=False
    ):
        by_version = {row[PG]: row for _, row in group.iterrows()}
        for figure, label in (("small_p50", "small p50 wait s"), ("makespan", "large makespan s")):
            cells = [
                Cell(
                    span(by_version[v][f"{figure}_low"], by_version[v][f"{figure}_high"]),
                    data.report(str(by_version[v]["href"])),
                )
                if v in by_version
                else Cell("-")
                for v in versions
            ]
            rows.append(
                [Cell(str(scenario)), Cell(str(strategy)), Cell(str(workers)), Cell(label), *cells]
            )
    return block(
        Block(
            "majors",
            "The same scenario on each PostgreSQL major",
            "Each scenario's newest run on each major (one run on several majors, "
            "harness run --pg-version 15,18, or runs on one major each): the range over "
            "repetitions, linked to the run's report.",
            table(headers, rows),
        )
    )


def _library(data: SiteData, library: str) -> list[str]:
    parts = [_provenance(data, library)]
    parts += [block(part) for part in library_blocks(data, library)]
    return parts


def _provenance(data: SiteData, library: str) -> str:
    """What ran the library's strategies, from the newest run's run.json."""
    rows: list[list[Cell]] = []
    for run in reversed(data.runs):
        for strategy, entry in run.document.queues.items():
            if entry.library != library or any(r[0].text == strategy for r in rows):
                continue
            versions = ", ".join(f"{k} {v}" for k, v in entry.versions.items()) or "-"
            tuned = ", ".join(f"{k}={v}" for k, v in entry.tuned.items()) or "defaults"
            rows.append(
                [
                    Cell(strategy),
                    Cell(entry.mapping or "-"),
                    Cell(entry.language),
                    Cell(versions),
                    Cell(tuned),
                    Cell(run.run_id, run.report or run.href + "run.json"),
                ]
            )
    headers = ["strategy", "mapping", "language", "versions", "settings", "newest run"]
    return block(
        Block(
            "provenance",
            "What ran it",
            "Each strategy of the library as its newest run recorded it (run.json's queues).",
            table(headers, rows),
        )
    )
