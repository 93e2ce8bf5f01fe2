"""A run's report as a list of sections, and the markdown of them.

A feature (waits, fairness, plans, faults, ...) owns its section: the heading, a
paragraph on what is measured, bullets, its tables, and what of it the terminal shows.
Markdown (summary.md), HTML (report.html, harness/report/html.py) and the console
(harness/report/console.py) render the same sections; none of them knows a feature.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    title: str = ""  # the terminal's title for it; documents put it under the heading

    @classmethod
    def of(cls, rows: tuple[list[str], list[list[str]]], title: str = "") -> Table:
        """From a feature's (headers, rows)."""
        return cls(rows[0], rows[1], title)


@dataclass(frozen=True)
class Section:
    key: str  # the HTML anchor
    title: str
    intro: str = ""  # what is measured and how, one paragraph
    bullets: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    console: list[Table] = field(default_factory=list)  # what the terminal shows of it
    html_tables: list[Table] | None = None  # where the page shows them otherwise
    warnings: list[str] = field(default_factory=list)  # shown first, on every medium
    titled: bool = False  # documents show each table's title above it (several tables)
    console_notes: list[str] = field(default_factory=list)  # lines the terminal shows too
    headline: str = ""  # the answer in one sentence, above everything else of it

    @property
    def page_tables(self) -> list[Table]:
        return self.tables if self.html_tables is None else self.html_tables


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown(title: str, sections: list[Section]) -> str:
    """summary.md: the title, then each section's heading, intro, bullets and tables."""
    parts = [f"# {title}\n"]
    for section in sections:
        parts += _markdown_section(section)
    return "\n".join(parts)


def _markdown_section(section: Section) -> list[str]:
    parts = [f"## {section.title}\n"]
    if section.headline:
        parts.append(f"**{section.headline}**\n")
    if section.intro:
        parts.append(f"{section.intro}\n")
    parts += [f"**Warning:** {warning}\n" for warning in section.warnings]
    if section.bullets:
        parts.append("".join(f"- {bullet}\n" for bullet in section.bullets))
    for index, table in enumerate(section.tables):
        title = [f"**{table.title}**\n"] if section.titled and table.title else []
        parts += ([""] if index else []) + title + [markdown_table(table.headers, table.rows)]
    return parts
