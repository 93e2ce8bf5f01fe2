"""`harness compare`: two runs' waits side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape

from harness.analysis.compare import compare_runs, comparison_rows
from harness.analysis.figures import compare_ecdf
from harness.analysis.provenance import (
    Difference,
    provenance_differences,
    provenance_headline,
    provenance_rows,
)
from harness.errors import HarnessError
from harness.report.console import console_table
from harness.report.plots import FORMATS, encode
from harness.report.sections import markdown_table
from harness.results.document import load_document
from harness.results.folder import atomic_write
from harness.results.jobs import load_jobs


def compare_command(
    first: Path, second: Path, out: Path, factor: float, alpha: float, console: Console
) -> None:
    """Two runs side by side: medians and p95 per strategy and class, flagged changes."""
    runs = [_jobs_of(run) for run in (first, second)]
    differences = provenance_differences(_metadata_of(first), _metadata_of(second))
    table = compare_runs(runs[0], runs[1], factor, alpha)
    headers, rows = comparison_rows(table)
    title = f"Waits, A = {first} -> B = {second}"
    _show_provenance(differences, console)
    console.print(console_table(title, headers, rows))
    try:
        out.mkdir(parents=True, exist_ok=False)
    except FileExistsError as error:
        raise HarnessError(f"{out} exists; results are never overwritten: pass --out") from error
    atomic_write(out / "compare.csv", table.to_csv(index=False).encode())
    markdown = f"# {title}\n\n{_provenance_markdown(differences)}{markdown_table(headers, rows)}"
    atomic_write(out / "compare.md", markdown.encode())
    figure = compare_ecdf(runs[0], runs[1], (f"A {first.name}", f"B {second.name}"))
    for form in FORMATS:
        atomic_write(out / f"waits.{form}", encode(figure, form))
    console.print(f"Comparison: {out}", highlight=False)


def _jobs_of(run: Path) -> pd.DataFrame:
    if not (run / "jobs.csv").is_file():
        raise HarnessError(f"{run}: no jobs.csv; compare needs two runs with timed workloads")
    return load_jobs(run)


def _metadata_of(run: Path) -> dict[str, Any] | None:
    """run.json's provenance; None if the folder has no run.json or it records none."""
    if not (run / "run.json").is_file():
        return None
    try:
        return load_document(run).metadata or None
    except ValueError as error:
        raise HarnessError(str(error)) from error


def _show_provenance(differences: list[Difference], console: Console) -> None:
    headline = provenance_headline(differences)
    if not differences:
        console.print(headline, highlight=False)
        return
    console.print(f"[bold]{escape(headline)}[/bold]", highlight=False)
    console.print(console_table("Provenance", *provenance_rows(differences)))


def _provenance_markdown(differences: list[Difference]) -> str:
    headline = provenance_headline(differences)
    if not differences:
        return f"{headline}\n\n"
    return f"**{headline}**\n\n{markdown_table(*provenance_rows(differences))}\n"
