"""A run's tables on the console, as `harness run` and `harness report` show them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from harness.report.console import show_sections

if TYPE_CHECKING:
    from harness.run.render import Rendered


def show_outcome(outcome: Rendered, console: Console) -> None:
    show_sections(console, outcome.sections)
    console.print(f"Results: {outcome.folder.path}", highlight=False)
    console.print(f"Report: {outcome.report}", highlight=False)
    for note in outcome.notes:
        console.print(f"warning: {note}", highlight=False, markup=False)
