"""Tables on the terminal (rich): figures never get cut; names wrap where it is too narrow."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from harness.report.cells import is_numeric
from harness.report.sections import Section, Table

NAME_WIDTH = 12  # a column of names wraps at no less, where the console is too narrow


def console_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> RichTable:
    """Every cell as plain text: names from files and the server's words are never rich
    markup, whatever console prints the table. A figure is never cut: a column of numbers
    keeps its widest cell's width, and where the console is narrower than the table (a CI
    log's 160 columns) the other columns wrap their text instead."""
    table = RichTable(title=Text(title), title_justify="left")
    for index, header in enumerate(headers):
        cells = [row[index] for row in rows]
        is_name = not all(is_numeric(cell) for cell in cells)
        longest = max(map(len, cells), default=0)
        table.add_column(
            Text(header, overflow="fold"),
            justify="left" if is_name else "right",
            no_wrap=not is_name,
            overflow="fold" if is_name else "ellipsis",
            min_width=min(longest, NAME_WIDTH) if is_name else longest,
        )
    for row in rows:
        table.add_row(*map(Text, row))
    return table


def show_table(console: Console, table: Table) -> None:
    """The table whole: wider than the console (its figures' widths), it is not cropped."""
    console.print(console_table(table.title, table.headers, table.rows), crop=False)


def show_sections(console: Console, sections: list[Section]) -> None:
    """What the terminal shows of each section, in order."""
    for section in sections:
        if section.headline:
            console.print(section.headline, style="bold", highlight=False, markup=False)
        for table in section.console:
            show_table(console, table)
        for note in section.console_notes:
            console.print(note, highlight=False, markup=False)
        for warning in section.warnings:
            console.print(f"WARNING: {warning}", style="bold yellow", highlight=False, markup=False)
