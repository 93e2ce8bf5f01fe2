"""`harness compare`: two runs' waits side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from harness.analysis.compare import compare_runs, comparison_rows
from harness.analysis.provenance import (
    Difference,
    ScenarioRan,
    provenance_differences,
    provenance_headline,
    provenance_rows,
    scenario_warning,
)
from harness.errors import HarnessError
from harness.report.console import console_table
from harness.report.sections import markdown_table
from harness.results.document import RunDocument, load_document, refuse_several_majors
from harness.results.folder import atomic_write
from harness.results.jobs import load_jobs


def compare_command(
    first: Path,
    second: Path,
    out: Path,
    factor: float,
    alpha: float,
    console: Console,
    *,
    plots: bool = True,
) -> None:
    """Two runs side by side: medians and p95 per strategy and class, flagged changes;
    the waits' plot unless `plots` is off."""
    for run in (first, second):
        refuse_several_majors(run, "harness compare")
    runs = [_jobs_of(run) for run in (first, second)]
    documents = [_document_of(run) for run in (first, second)]
    differences = provenance_differences(*(_metadata(document) for document in documents))
    warning = scenario_warning(*(_ran(d, jobs) for d, jobs in zip(documents, runs, strict=True)))
    table = compare_runs(runs[0], runs[1], factor, alpha)
    headers, rows = comparison_rows(table)
    title = f"Waits, A = {first} -> B = {second}"
    if warning is not None:
        console.print(warning, style="bold yellow", highlight=False, markup=False)
    _show_provenance(differences, console)
    console.print(console_table(title, headers, rows), crop=False)
    try:
        out.mkdir(parents=True, exist_ok=False)
    except FileExistsError as error:
        raise HarnessError(f"{out} exists; results are never overwritten: pass --out") from error
    atomic_write(out / "compare.csv", table.to_csv(index=False).encode())
    above = f"**{warning}**\n\n" if warning is not None else ""
    markdown = (
        f"# {title}\n\n{above}{_provenance_markdown(differences)}{markdown_table(headers, rows)}"
    )
    atomic_write(out / "compare.md", markdown.encode())
    if plots:  # matplotlib loaded only to draw
        from harness.analysis.figures import compare_ecdf
        from harness.report.plots import images

        labels = (f"A {first.name}", f"B {second.name}")
        for form, data in images(compare_ecdf(runs[0], runs[1], labels, warning)).items():
            atomic_write(out / f"waits.{form}", data)
    console.print(f"Comparison: {out}", highlight=False)


def _jobs_of(run: Path) -> pd.DataFrame:
    if not (run / "jobs.csv").is_file():
        raise HarnessError(f"{run}: no jobs.csv; compare needs two runs with timed workloads")
    return load_jobs(run)


def _document_of(run: Path) -> RunDocument | None:
    """run.json, or None if the folder has none (a run folder copied without it)."""
    return load_document(run) if (run / "run.json").is_file() else None


def _metadata(document: RunDocument | None) -> dict[str, Any] | None:
    """run.json's provenance; None if there is no run.json or it records none."""
    return (document.provenance() or None) if document is not None else None


def _ran(document: RunDocument | None, jobs: pd.DataFrame) -> ScenarioRan:
    """The scenario as run.json records it, else as jobs.csv names it."""
    if document is not None:
        return ScenarioRan(document.scenario.name, document.scenario.sha256)
    return ScenarioRan(", ".join(map(str, jobs["scenario"].unique())))


def _show_provenance(differences: list[Difference], console: Console) -> None:
    headline = provenance_headline(differences)
    if not differences:
        console.print(headline, highlight=False)
        return
    console.print(headline, style="bold", highlight=False, markup=False)
    console.print(console_table("Provenance", *provenance_rows(differences)), crop=False)


def _provenance_markdown(differences: list[Difference]) -> str:
    headline = provenance_headline(differences)
    if not differences:
        return f"{headline}\n\n"
    return f"**{headline}**\n\n{markdown_table(*provenance_rows(differences))}\n"
