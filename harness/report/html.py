"""report.html: one self-contained page per run (images embedded, no network needed)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.report.tables import (
    BLOAT_INTRO,
    FAIRNESS_NOTE,
    FAULTS_NOTE,
    FLAG_LEGEND,
    IDEAL_NOTE,
    RunTables,
    bloat_rows,
    bloat_sentences,
    fairness_rows,
    fault_rows,
    ideal_rows,
    jain_rows,
    plans_rows,
    property_rows,
    reference_rows,
    summary_rows,
)
from harness.scenario.model import Scenario

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
td.text, th.text { text-align: left; white-space: nowrap; } .status { font-weight: bold; }
.complete { color: #17702a; } .failed, .interrupted, .running { color: #a11; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
details { margin: 0.4em 0; } .wide { overflow-x: auto; } summary { cursor: pointer; }
"""
_PLOT_TITLES = {
    "waits": "Waits: distribution per tenant class (ECDF)",
    "timeline": "Timeline: which tenant class each worker served",
    "tenant_share": "Each tenant's share of completed jobs over time",
    "plans": "Dequeue plans: time and buffers per variant",
    "bloat": "Long transaction: claim latency and dead tuples over time (repetition 1)",
}


def report_html(
    run: Path,
    document: dict[str, Any],
    scenario: Scenario,
    tables: RunTables,
    pngs: dict[str, bytes],
) -> str:
    title = f"{scenario.name} — {document['run_id']}"
    parts = [
        f"<h1>{_e(title)}</h1>",
        _status(document),
        f"<p>{_e(scenario.description)}</p>" if scenario.description else "",
        *_sections(tables),
        _plots(pngs),
        _captures(run, document),
        _provenance(document),
        f"<h2 id='scenario'>Scenario</h2><details><summary>scenario.yaml "
        f"(sha256 {document['scenario']['sha256'][:12]}…)</summary><pre>"
        f"{_e((run / 'scenario.yaml').read_text())}</pre></details>",
    ]
    body = "\n".join(part for part in parts if part)
    return (
        f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n"
        "</body></html>\n"
    )


def _sections(tables: RunTables) -> list[str]:
    parts = []
    if tables.reference is not None and len(tables.reference):
        parts += [
            f"<h2 id='reference'>Beside the reference</h2><p>Reference: "
            f"{_e(tables.reference_source)}. Measured: the range over repetitions.</p>",
            _table(*reference_rows(tables.reference)),
        ]
    if tables.summary is not None:
        parts += [
            "<h2 id='waits'>Waits and makespan</h2><p>Seconds; the range over "
            "repetitions. Wait: enqueued_at to started_at. Last done: the class's last "
            "job finished, from the repetition's first enqueue.</p>",
            _table(*summary_rows(tables.summary)),
        ]
    if tables.summary is not None and "slowdown_p50" in tables.summary:
        parts += [
            f"<h2 id='fairness'>Fairness across tenants</h2><p>{_e(FAIRNESS_NOTE)}</p>",
            _table(*fairness_rows(tables.summary)),
        ]
        if tables.fairness is not None and len(tables.fairness):
            parts += [_table(*jain_rows(tables.fairness))]
    if tables.ideal is not None and len(tables.ideal):
        parts += [
            f"<h2 id='ideal'>Against the ideal schedule</h2><p>{_e(IDEAL_NOTE)}</p>",
            _table(*ideal_rows(tables.ideal)),
        ]
    if tables.properties is not None:
        parts += [
            "<h2 id='properties'>Properties checked</h2><p>From the recorded data; "
            "measured is the worst repetition.</p>",
            _table(*property_rows(tables.properties)),
        ]
    if tables.faults is not None:
        parts += [
            f"<h2 id='faults'>Faults</h2><p>{_e(FAULTS_NOTE)}</p>",
            _table(*fault_rows(tables.faults)),
        ]
    if tables.plans is not None:
        parts += [
            "<h2 id='plans'>Dequeue plans</h2><p>EXPLAIN (ANALYZE, BUFFERS) inside "
            f"BEGIN … ROLLBACK; medians over the JSON executions. {_e(FLAG_LEGEND)}.</p>",
            _table(*plans_rows(tables.plans, short_flags=True)),
        ]
    if tables.bloat is not None:
        items = "".join(f"<li>{_e(sentence)}</li>" for sentence in bloat_sentences(tables.bloat))
        parts += [
            f"<h2 id='bloat'>Long transaction and bloat</h2><p>{_e(BLOAT_INTRO)}</p>",
            f"<ul>{items}</ul>",
            _table(*bloat_rows(tables.bloat)),
        ]
    return parts


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _status(document: dict[str, Any]) -> str:
    status = document["status"]
    error = f" — {_e(document['error'])}" if document.get("error") else ""
    return (
        f"<p>Status: <span class='status {_e(status)}'>{_e(status)}</span>{error}. "
        f"Started {_e(document['started_at'])}, finished {_e(document['finished_at'])}.</p>"
    )


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
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


def _plots(pngs: dict[str, bytes]) -> str:
    if not pngs:
        return ""
    figures = [
        f"<h3>{_e(_PLOT_TITLES.get(name, name))}</h3><img alt='{_e(name)}' "
        f"src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
        for name, png in pngs.items()
    ]
    return "<h2 id='plots'>Plots</h2>" + "\n".join(figures)


def _captures(run: Path, document: dict[str, Any]) -> str:
    entries = [entry for entry in document.get("plans", []) if not entry.get("skipped")]
    if not entries:
        return ""
    folded = []
    for entry in entries:
        text = (run / "explain" / entry["variant"] / f"{entry['strategy']}.txt").read_text()
        folded.append(
            f"<details><summary>{_e(entry['variant'])} / {_e(entry['strategy'])}"
            f"</summary><pre>{_e(text)}</pre></details>"
        )
    return "<h2 id='explain'>EXPLAIN captures (text form)</h2>" + "\n".join(folded)


def _provenance(document: dict[str, Any]) -> str:
    meta = document["metadata"]
    postgres, host, harness, python = (
        meta["postgres"],
        meta["host"],
        meta["harness"],
        meta["python"],
    )
    rows = [
        [
            "harness",
            f"{harness['version']} (commit {harness.get('git_commit') or 'unknown'}"
            f"{', dirty' if harness.get('git_dirty') else ''})",
        ],
        ["Python", f"{python['version']} {python['implementation']}"],
        ["packages", ", ".join(f"{k} {v}" for k, v in python["packages"].items())],
        [
            "host",
            f"{host['cpu_count']} CPUs, {host.get('cpu_model')}, "
            f"{host.get('memory_total')}, {host['platform']}",
        ],
        ["PostgreSQL", postgres["version"]],
        ["provider", ", ".join(f"{k}: {v}" for k, v in meta["provider"].items())],
        ["key settings", ", ".join(f"{k}={v}" for k, v in postgres["key_settings"].items())],
    ]
    settings = [
        [name, str(value["setting"]) + (value.get("unit") or ""), value["source"]]
        for name, value in postgres["non_default_settings"].items()
    ]
    return (
        "<h2 id='provenance'>Provenance</h2>"
        + _table(["what", "value"], rows)
        + "<details><summary>PostgreSQL settings not at their built-in default</summary>"
        + _table(["setting", "value", "source"], settings)
        + "</details>"
    )
