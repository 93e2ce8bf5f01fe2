"""The site's HTML: every page at the site's root, one style sheet and plotly.js in
assets/, tables whose numbers link to the report of the run they came from.

Presentation only: it is handed cells and blocks, and reads no file.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from harness.report.cells import is_numeric, number, span

ASSETS = "assets"
STYLE = f"{ASSETS}/site.css"
PLOTLY = f"{ASSETS}/plotly.min.js"

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto 3em; max-width: 1300px;
       padding: 0 1em; color: #222; }
header { border-bottom: 1px solid #ddd; margin-bottom: 1em; }
header nav a { margin-right: 1.1em; } header nav a.here { font-weight: bold; }
h1 { font-size: 1.5em; margin: 0.6em 0 0.2em; } h2 { margin-top: 1.6em; }
p.intro { max-width: 60em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.55em; text-align: left; }
th { background: #f2f2f2; position: sticky; top: 0; } td.n { text-align: right; }
td a { text-decoration: none; } td a:hover { text-decoration: underline; }
.wide { overflow-x: auto; } pre { background: #f7f7f7; padding: 0.5em; margin: 0;
      white-space: pre-wrap; overflow-wrap: anywhere; max-width: 32em; }
code { font-size: 0.88em; } .flag { color: #a11; font-weight: 600; }
"""


def library_page(library: str) -> str:
    """A library's page: its name in lower case, each run of other characters a dash
    (Delayed::Job: library-delayed-job.html)."""
    slug = re.sub(r"[^a-z0-9]+", "-", library.lower()).strip("-") or "library"
    return f"library-{slug}.html"


@dataclass(frozen=True)
class Cell:
    """A table cell: its text, and where it links (a run's report, a CSV, a page)."""

    text: str
    href: str | None = None
    flag: bool = False  # shown as a warning (a plan's dangerous shape)
    code: bool = False  # shown as a command
    markup: str | None = None  # HTML made by the site already (a list of links), as it is


def figure_cell(low: float, high: float, href: str | None) -> Cell:
    """A range over repetitions, written as the reports write it, linked to its run."""
    return Cell(span(low, high), href)


def value_cell(value: float, href: str | None) -> Cell:
    return Cell(number(value), href)


@dataclass(frozen=True)
class Block:
    """A titled part of a page: an introduction, then its charts and tables (HTML)."""

    key: str
    title: str
    intro: str
    body: str


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f'<div class="wide"><table><tr>{head}</tr>{body}</table></div>'


def _cell(cell: Cell) -> str:
    if cell.markup is not None:
        return f"<td>{cell.markup}</td>"
    text = _e(cell.text)
    if cell.code:
        text = f"<pre><code>{text}</code></pre>"
    if cell.href:
        text = f'<a href="{_e(cell.href)}">{text}</a>'
    classes = [
        *(["n"] if is_numeric(cell.text) and cell.text != "-" else []),
        *(["flag"] if cell.flag else []),
    ]
    attribute = f' class="{" ".join(classes)}"' if classes else ""
    return f"<td{attribute}>{text}</td>"


def block(part: Block) -> str:
    intro = f'<p class="intro">{part.intro}</p>' if part.intro else ""
    return f'<section id="{_e(part.key)}"><h2>{_e(part.title)}</h2>{intro}{part.body}</section>'


_HERE = ' class="here"'


def page(title: str, here: str, nav: Sequence[tuple[str, str]], parts: Sequence[str]) -> str:
    """A page of the site: its navigation, title and parts; plotly.js from the assets
    where a part draws a chart."""
    links = "".join(
        f'<a href="{_e(href)}"{_HERE if href == here else ""}>{_e(label)}</a>'
        for label, href in nav
    )
    content = "\n".join(parts)
    script = f'<script src="{PLOTLY}"></script>' if "Plotly.newPlot" in content else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{_e(title)}</title><link rel="stylesheet" href="{STYLE}">{script}</head>'
        f"<body><header><nav>{links}</nav><h1>{_e(title)}</h1></header>\n{content}\n"
        "</body></html>\n"
    )


def _e(text: object) -> str:
    return html.escape(str(text))


def escaped(text: object) -> str:
    """Text for a block's introduction or body."""
    return _e(text)
