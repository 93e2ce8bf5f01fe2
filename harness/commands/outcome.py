"""A run's tables on the console, as `harness run` and `harness report` show them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from harness.report.console import show_sections

if TYPE_CHECKING:
    from harness.run.render import Rendered
    from harness.run.suite import SuiteOutcome


def show_outcome(outcome: Rendered, console: Console) -> None:
    show_sections(console, outcome.sections)
    console.print(f"Results: {outcome.folder.path}", highlight=False)
    console.print(f"Report: {outcome.report}", highlight=False)
    for note in outcome.notes:
        console.print(f"warning: {note}", highlight=False, markup=False)


def show_suite(outcome: SuiteOutcome, console: Console) -> None:
    """A suite's tables on the console, and where its folder is."""
    show_sections(console, outcome.sections)
    console.print(f"Suite: {outcome.folder.path}", highlight=False)
    console.print(f"Report: {outcome.report}", highlight=False)
