"""report.html: one self-contained page per run (images embedded, no network needed).

The page is made of what it is given: the run's document (status, provenance), the
features' sections, the plots as PNG with their titles, folded texts (the EXPLAIN
captures) and the scenario's YAML. It reads no file and knows no feature.

Its first screen answers: the verdict (the section keyed `verdict`), then the lead plots
(the waits over the run, their ECDF); then a table of contents, every other section with
its long tables folded, the other plots, the captures, provenance and the scenario.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.report.sections import Section, Table
from harness.results.document import QueueProvenance, RunDocument, ServerEntry
from harness.results.redaction import redacted_settings

FOLD_ROWS = 12  # a table longer than this is folded, its size in its summary
VERDICT = "verdict"  # the key of the section the page opens with

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin: 0 0 0.1em; } h2 { margin-top: 1.8em; }
h2#verdict { margin-top: 0.6em; } p.meta { margin: 0.2em 0; font-size: 0.9em; }
p.headline { font-size: 1.15em; font-weight: 600; margin: 0.4em 0; }
.lead h3 { margin: 0.6em 0 0; font-size: 1em; } .lead img { margin: 0.2em 0; }
nav.toc { font-size: 0.92em; } nav.toc li { display: inline; margin-right: 1.2em; }
nav.toc ul { padding-left: 0; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
td.text, th.text { text-align: left; white-space: nowrap; } .status { font-weight: bold; }
.complete { color: #17702a; } .failed, .interrupted, .running, .warning { color: #a11; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
details { margin: 0.4em 0; } .wide { overflow-x: auto; } summary { cursor: pointer; }
"""


@dataclass(frozen=True)
class Page:
    """Everything report.html shows of a run."""

    title: str
    description: str
    document: RunDocument
    sections: list[Section]
    plots: list[tuple[str, bytes]]  # (title, PNG), after the sections
    folded: list[tuple[str, str]]  # (label, text): the EXPLAIN captures' text form
    scenario_yaml: str
    lead_plots: list[tuple[str, bytes]] = field(default_factory=list)  # under the verdict
    no_figures: str = ""  # why the page has none, and how to draw them (harness run --no-plots)


def report_html(page: Page) -> str:
    verdict = [section for section in page.sections if section.key == VERDICT]
    rest = [section for section in page.sections if section.key != VERDICT]
    parts = [
        f"<h1>{_e(page.title)}</h1>",
        _status(page.document),
        f"<p class='meta'>{_e(page.description)}</p>" if page.description else "",
        *map(_section, verdict),
        _lead(page.lead_plots),
        f"<p class='meta'>{_e(page.no_figures)}</p>" if page.no_figures else "",
        _contents(rest, page),
        *map(_section, rest),
        _plots(page.plots),
        _folded(page.folded),
        _provenance(page.document),
        f"<h2 id='scenario'>Scenario</h2><details><summary>scenario.yaml "
        f"(sha256 {page.document.scenario.sha256[:12]}…)</summary><pre>"
        f"{_e(page.scenario_yaml)}</pre></details>",
    ]
    return _document(page.title, parts)


def _lead(plots: list[tuple[str, bytes]]) -> str:
    """The plots that answer, right under the verdict: no heading of their own but theirs."""
    return "<div class='lead'>" + "\n".join(_figure(t, png) for t, png in plots) + "</div>"


def _contents(sections: list[Section], page: Page) -> str:
    """Where the rest of the page is: one line of links."""
    links = [(section.key, section.title) for section in sections]
    links += [("plots", "More plots")] if page.plots else []
    links += [("explain", "EXPLAIN captures")] if page.folded else []
    links += [("provenance", "Provenance"), ("scenario", "Scenario")]
    items = "".join(f"<li><a href='#{_e(key)}'>{_e(title)}</a></li>" for key, title in links)
    return f"<nav class='toc'><h2 id='contents'>Contents</h2><ul>{items}</ul></nav>"


def plain_html(
    title: str, intro: str, sections: list[Section], plots: list[tuple[str, bytes]]
) -> str:
    """A self-contained page of sections and plots that belongs to no one run (harness
    history): the title, a paragraph, the plots, then the sections."""
    parts = [
        f"<h1>{_e(title)}</h1>",
        f"<p>{_e(intro)}</p>",
        _plots(plots),
        *map(_section, sections),
    ]
    return _document(title, parts)


def _document(title: str, parts: list[str]) -> str:
    body = "\n".join(part for part in parts if part)
    return (
        f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n"
        "</body></html>\n"
    )


def _section(section: Section) -> str:
    parts = [f"<h2 id='{_e(section.key)}'>{_e(section.title)}</h2>"]
    if section.headline:
        parts.append(f"<p class='headline'>{_e(section.headline)}</p>")
    if section.intro:
        parts.append(f"<p>{_e(section.intro)}</p>")
    parts += [f"<p class='warning'>Warning: {_e(warning)}</p>" for warning in section.warnings]
    if section.bullets:
        parts.append("<ul>" + "".join(f"<li>{_e(b)}</li>" for b in section.bullets) + "</ul>")
    for table in section.page_tables:
        if section.titled and table.title:
            parts.append(f"<h3>{_e(table.title)}</h3>")
        parts.append(_table(table, section.title))
    return "\n".join(parts)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _status(document: RunDocument) -> str:
    error = f" — {_e(document.error)}" if document.error else ""
    return (
        f"<p class='meta'>Status: "
        f"<span class='status {_e(document.status)}'>{_e(document.status)}</span>"
        f"{error}. Started {_e(document.started_at)}, finished {_e(document.finished_at)}.</p>"
    )


def _table(table: Table, section: str) -> str:
    """A table; a long one folded, saying what it holds and how long it is."""
    shown = _html_table(table.headers, table.rows)
    if len(table.rows) <= FOLD_ROWS:
        return shown
    label = f"{table.title or section}: {len(table.rows)} rows (click to show)"
    return f"<details><summary>{_e(label)}</summary>{shown}</details>"


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    text = [any(_is_text(row[index]) for row in rows) for index in range(len(headers))]
    head = "".join(f"<th{_class(t)}>{_e(h)}</th>" for h, t in zip(headers, text, strict=True))
    body = "".join(
        "<tr>"
        + "".join(f"<td{_class(t)}>{_e(cell)}</td>" for cell, t in zip(row, text, strict=True))
        + "</tr>"
        for row in rows
    )
    return (
        f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
        "</table></div>"
    )


def _is_text(cell: str) -> bool:
    return any(c.isalpha() for c in cell.replace("x", ""))


def _class(is_text: bool) -> str:
    return " class='text'" if is_text else ""


def _plots(plots: list[tuple[str, bytes]]) -> str:
    if not plots:
        return ""
    return "<h2 id='plots'>More plots</h2>" + "\n".join(_figure(t, png) for t, png in plots)


def _figure(title: str, png: bytes) -> str:
    return (
        f"<h3>{_e(title)}</h3><img alt='{_e(title)}' "
        f"src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
    )


def _folded(texts: list[tuple[str, str]]) -> str:
    if not texts:
        return ""
    folded = [
        f"<details><summary>{_e(label)}</summary><pre>{_e(text)}</pre></details>"
        for label, text in texts
    ]
    return "<h2 id='explain'>EXPLAIN captures (text form)</h2>" + "\n".join(folded)


def _environment_rows(python: dict[str, Any]) -> list[list[str]]:
    """libpq and the lock, for runs that recorded them."""
    rows = []
    if "libpq" in python:
        libpq = python["libpq"]
        rows.append(["libpq", f"{libpq['version']} (psycopg {libpq['psycopg_implementation']})"])
    lock = python.get("lock")
    if lock:
        drift = ", ".join(lock["differs"]) or "none"
        shown = f"{lock['file']} sha256 {lock['sha256'][:12]}; not as locked: {drift}"
        rows.append(["lock", shown])
    return rows


def _provenance(document: RunDocument) -> str:
    meta = document.metadata
    host, harness, python = meta.get("host", {}), meta.get("harness", {}), meta.get("python", {})
    rows = [
        [
            "harness",
            f"{harness.get('version')} (commit {harness.get('git_commit') or 'unknown'}"
            f"{', dirty' if harness.get('git_dirty') else ''})",
        ],
        ["Python", f"{python.get('version')} {python.get('implementation')}"],
        ["packages", ", ".join(f"{k} {v}" for k, v in python.get("packages", {}).items())],
        *_environment_rows(python),
        [
            "host",
            f"{host.get('cpu_count')} CPUs, {host.get('cpu_model')}, "
            f"{host.get('memory_total')}, {host.get('platform')}",
        ],
        *_machine_rows(host),
        *(row for server in document.servers for row in _server_rows(server)),
        *([f"queue {name}", _queue(entry)] for name, entry in document.queues.items()),
    ]
    return (
        "<h2 id='provenance'>Provenance</h2>"
        + _html_table(["what", "value"], rows)
        + "".join(_settings(server, len(document.servers)) for server in document.servers)
    )


def _machine_rows(host: dict[str, Any]) -> list[list[str]]:
    """The load average as the run started, and the machine over the run where run.json
    has it (the CPU's busy share, the run's own work included; the load at the end)."""
    start, over = host.get("load_average"), host.get("over_the_run") or {}
    if not start:
        return []
    said = f"load average (1/5/15 min) {_loads(start)} at the start"
    if over.get("load_average_end"):
        said += f", {_loads(over['load_average_end'])} at the end"
    share = over.get("cpu_busy_share")
    if share is not None:
        said += (
            f"; {share:.0%} of its {host.get('cpu_count')} CPUs' time busy over the run "
            "(the run's own work included)"
        )
    return [["machine", said]]


def _loads(load: list[float]) -> str:
    return "/".join(f"{value:.2f}" for value in load)


def _server_rows(server: ServerEntry) -> list[list[str]]:
    """The server a run ran on (a row each, for each server of a run of several majors)."""
    postgres = server.postgres
    return [
        ["PostgreSQL", str(postgres.get("version"))],
        ["provider", ", ".join(f"{k}: {v}" for k, v in server.provider.items())],
        [
            "key settings",
            ", ".join(f"{k}={v}" for k, v in postgres.get("key_settings", {}).items()),
        ],
    ]


def _settings(server: ServerEntry, servers: int) -> str:
    settings = [
        [name, value.get("shown") or _with_unit(value), value["source"]]
        for name, value in redacted_settings(
            server.postgres.get("non_default_settings", {})
        ).items()
    ]
    of = f" (PostgreSQL {server.pg_version})" if servers > 1 else ""
    return (
        f"<details><summary>PostgreSQL settings not at their built-in default{of}</summary>"
        + _html_table(["setting", "value", "source"], settings)
        + "</details>"
    )


def _with_unit(value: dict[str, Any]) -> str:
    """A setting recorded before `shown` was: its raw value and the unit it counts in."""
    unit = value.get("unit")
    return f"{value['setting']} x {unit}" if unit else str(value["setting"])


def _queue(entry: QueueProvenance) -> str:
    """Its record's fields that say something, `name: value` each."""
    shown = entry.model_dump(exclude_defaults=True)
    return "; ".join(f"{key}: {value}" for key, value in shown.items())
