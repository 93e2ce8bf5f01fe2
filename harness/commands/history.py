"""`harness history`: every run under a results folder, and chosen figures across them.

Reads each run folder's results.json (run, explain, check, overhead), prints the runs and
each chosen figure's trend, and writes history.csv and history.html (the trends plotted)
to a new folder of its own, never over an earlier one.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.analysis.figures import trend_chart
from harness.analysis.history import chosen, figures_frame, history_sections, runs_table, trend
from harness.errors import HarnessError
from harness.report.console import show_sections
from harness.report.html import plain_html
from harness.report.plots import encode
from harness.results.folder import RunFolder, write_once
from harness.results.headline import find_results

FOLDER = "history"  # results/history/<run id>/


def history_command(
    root: Path, patterns: list[str], out: Path | None, console: Console
) -> Path | None:
    """The runs under `root` and the chosen figures' trends; the folder written, if any
    figure was trended."""
    if not root.is_dir():
        raise HarnessError(f"{root}: no such folder; give the folder run folders are in")
    documents = [document for _, document in find_results(root)]
    if not documents:
        raise HarnessError(
            f"{root}: no run folder with a results.json (harness run, explain, check and "
            "overhead write one; harness report RUN_DIR writes it for an older run)"
        )
    figures = figures_frame(documents)
    names = chosen(figures, patterns)
    if patterns and not names:
        raise HarnessError(f"--figure: no figure of these runs matches {patterns}")
    trends = trend(figures, names)
    sections = history_sections(runs_table(documents), trends)
    show_sections(console, sections)
    if not names:
        console.print("No figure is shared by two runs: choose some with --figure.")
        return None
    target = _target(root, out)
    write_once(target / "history.csv", trends.to_csv(index=False).encode())
    plots = [("Chosen figures across runs", encode(trend_chart(trends), "png"))]
    page = plain_html(f"History of {root}", _intro(len(documents), names), sections, plots)
    write_once(target / "history.html", page.encode())
    console.print(f"History: {target / 'history.html'}", highlight=False)
    return target


def _target(root: Path, out: Path | None) -> Path:
    if out is None:
        return RunFolder.create(root, FOLDER).path
    if out.exists() and any(out.iterdir()):
        raise HarnessError(f"--out: {out} is not empty; history never writes over a folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _intro(runs: int, names: list[str]) -> str:
    return (
        f"{runs} runs, {len(names)} figures trended, oldest run first. Each point is the "
        "figure's value (the median over the run's repetitions), its bar the run's range, "
        "the grey band the reference where the scenario gives one."
    )
