"""Tables from analysis frames: markdown, console (rich) and JUnit XML."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

import pandas as pd
from rich.table import Table

from harness.analysis.plans import SORTS_TENANTS, WALKS_GLOBAL_INDEX
from harness.analysis.waits import ranges
from harness.check.verdict import Finding

if TYPE_CHECKING:
    from harness.experiments.overhead import LoadSummary

SUMMARY_METRICS = [
    "wait_p50_s",
    "wait_p95_s",
    "wait_p99_s",
    "wait_max_s",
    "makespan_s",
    "throughput_jobs_s",
]
_NUMBERS = re.compile(r"^[-\d.,x() ]*$")
SHORT_FLAGS = {SORTS_TENANTS: "SORTS TENANTS", WALKS_GLOBAL_INDEX: "GLOBAL WALK", "-": "-"}
_HEADERS = {
    "wait_p50_s": "p50 wait",
    "wait_p95_s": "p95 wait",
    "wait_p99_s": "p99 wait",
    "wait_max_s": "max wait",
    "makespan_s": "last done",
    "throughput_jobs_s": "jobs/s",
}


def number(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def span(low: float, high: float) -> str:
    """A range as the article writes them: one number when both ends agree."""
    low_text, high_text = number(low), number(high)
    return low_text if low_text == high_text else f"{low_text}-{high_text}"


def summary_rows(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Per strategy, workers and class: jobs, then each metric's range over repetitions."""
    spans = ranges(summary, SUMMARY_METRICS)
    counts = summary.groupby(["strategy", "workers", "tenant_class"], sort=False)
    headers = [
        "strategy",
        "workers",
        "tenants",
        "jobs",
        "reps",
        *(_HEADERS[m] for m in SUMMARY_METRICS),
    ]
    rows = []
    for record in spans.to_dict("records"):
        group = counts.get_group((record["strategy"], record["workers"], record["tenant_class"]))
        rows.append(
            [
                record["strategy"],
                str(record["workers"]),
                record["tenant_class"],
                str(int(group["jobs"].iloc[0])),
                str(len(group)),
                *(span(record[f"{m}_min"], record[f"{m}_max"]) for m in SUMMARY_METRICS),
            ]
        )
    return headers, rows


def reference_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = ["figure", "reference", "measured", "unit", "reps"]
    rows = [
        [
            record["figure"],
            span(record["reference_low"], record["reference_high"]),
            span(record["measured_low"], record["measured_high"]),
            record["unit"],
            str(record["repetitions"]),
        ]
        for record in table.to_dict("records")
    ]
    return headers, rows


def whole(value: float) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else (f"{value:,.0f}")
    )


_COMPACT_PLAN_COLUMNS = [
    "variant",
    "strategy",
    "tenants (idle)",
    "planning ms",
    "execution ms",
    "total ms",
    "shared buffers",
    "jobs scan",
    "loops",
    "flags",
]


def plans_rows(
    plans: pd.DataFrame, compact: bool = False, short_flags: bool | None = None
) -> tuple[list[str], list[list[str]]]:
    """Per variant and strategy: medians over repetitions, the plan's shape, its flags.

    `compact` (for terminals) keeps the columns that fit; `short_flags` (default: as
    compact) names flags by their short names (SHORT_FLAGS, with a legend beside).
    """
    short = compact if short_flags is None else short_flags
    records = [_plan_cells(record, short) for record in plans.to_dict("records")]
    headers = _COMPACT_PLAN_COLUMNS if compact else list(records[0]) if records else []
    return headers, [[record[column] for column in headers] for record in records]


def _plan_cells(r: dict[Any, Any], short: bool) -> dict[str, str]:
    cells = {
        "variant": r["variant"],
        "strategy": r["strategy"],
        "tenants (idle)": f"{r['registered_tenants']:,} ({r['idle_tenants']:,})",
    }
    if r["skipped"]:
        skipped = "skipped (slow)" if short else r["skipped"]
        return {**cells, **dict.fromkeys(_FIGURE_COLUMNS, "-"), "flags": skipped}
    flags = r["flags"] or "-"
    if short:
        flags = ", ".join(SHORT_FLAGS.get(flag, flag) for flag in flags.split("; "))
    return {
        **cells,
        "planning ms": number(r["planning_ms"]),
        "execution ms": number(r["execution_ms"]),
        "total ms": number(r["total_ms"]),
        "shared buffers": whole(r["shared_buffers"]),
        "shared hit": whole(r["shared_hit"]),
        "shared read": whole(r["shared_read"]),
        "index under the Limit": _index(r["outer_scan"]),
        "jobs scan": _index(r["jobs_scan"]),
        "loops": whole(r["jobs_loops"]),
        "rows removed": whole(r["rows_removed"]),
        "flags": flags,
    }


FLAG_LEGEND = "; ".join(f"{short}: {flag}" for flag, short in SHORT_FLAGS.items() if flag != "-")


_FIGURE_COLUMNS = [
    "planning ms",
    "execution ms",
    "total ms",
    "shared buffers",
    "shared hit",
    "shared read",
    "index under the Limit",
    "jobs scan",
    "loops",
    "rows removed",
]


def _index(scan: str) -> str:
    """'Index Scan using x on jobs' -> 'x'; other scans as they are."""
    return scan.split(" using ", 1)[1].split(" on ", 1)[0] if " using " in scan else scan


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def console_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """Columns of names never wrap or get cut; columns of numbers shrink before them."""
    table = Table(title=title, title_justify="left")
    for index, header in enumerate(headers):
        cells = [row[index] for row in rows]
        is_name = not all(_NUMBERS.match(cell) for cell in cells)
        table.add_column(
            header,
            justify="left" if is_name else "right",
            no_wrap=is_name,
            min_width=max(map(len, cells), default=0) if is_name else None,
        )
    for row in rows:
        table.add_row(*row)
    return table


@dataclass(frozen=True)
class RunTables:
    """The analysed tables of a run, for markdown, HTML and the console alike."""

    summary: pd.DataFrame | None = None
    plans: pd.DataFrame | None = None
    reference: pd.DataFrame | None = None
    reference_source: str | None = None
    properties: pd.DataFrame | None = None
    fairness: pd.DataFrame | None = None  # per repetition: Jain's index, worst tenant
    ideal: pd.DataFrame | None = None  # measured against the simulated ideal
    faults: pd.DataFrame | None = None  # faults.csv: what a fault scenario's faults did
    bloat: pd.DataFrame | None = None  # long_transaction: harness/bloat.py bloat_summary


FAIRNESS_METRICS = ["head_wait_p50_s", "head_wait_max_s", "slowdown_p50", "slowdown_max"]
_FAIRNESS_HEADERS = ["head wait p50", "head wait max", "slowdown p50", "slowdown max"]
FAIRNESS_NOTE = (
    "Head wait: the wait of a tenant's first job. Slowdown: a tenant's makespan (first "
    "enqueue to last finish) over the same jobs' ideal makespan with the workers to "
    "itself. Jain's index over tenants' slowdowns: 1 = all slowed alike, 1/n = one "
    "tenant bears it all. Ranges over repetitions; per tenant: tenants.csv."
)
IDEAL_NOTE = (
    "Ideal: the simulator's schedule of the same jobs under the strategy's policy, "
    "workers never idle while a job is free, zero claim cost (harness/simulate.py); "
    "costed: the same jobs at the run's own costs (calibration.json: claims and "
    "completions drawn from the measured distributions, idle workers polling). Measured: "
    "median over repetitions. Ratios are left out where the ideal is 0."
)


def fairness_rows(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    spans = ranges(summary, FAIRNESS_METRICS)
    headers = ["strategy", "workers", "tenants", *_FAIRNESS_HEADERS]
    rows = [
        [
            record["strategy"],
            str(record["workers"]),
            record["tenant_class"],
            *(span(record[f"{m}_min"], record[f"{m}_max"]) for m in FAIRNESS_METRICS),
        ]
        for record in spans.to_dict("records")
    ]
    return headers, rows


FAULTS_NOTE = (
    "Per repetition, from run.json: lost = jobs neither done nor dead-lettered (0, or the "
    "run fails); duplicates = jobs whose work started again after a crash (at-least-once, "
    "with a lease); stuck = jobs left running by a killed worker (no lease); recovery = "
    "from the kill to the job's new start, in seconds; held at restart = jobs being "
    "worked on when the server restarted; in-doubt claims = claims whose commit the "
    "restart cut (resolved from the claim log)."
)


def fault_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [
        "strategy",
        "workers",
        "rep",
        "crashes",
        "lost",
        "duplicates",
        "stuck",
        "dead-lettered",
        "retried",
        "recovery max",
        "recovery p50",
        "restarts",
        "held at restart",
        "in-doubt claims",
        "reconnects",
    ]
    rows = [
        [str(r["strategy"]), *(_count_or_dash(r[c]) for c in list(r)[1:9])]
        + [number(r["recovery_max_s"]), number(r["recovery_p50_s"])]
        + [_count_or_dash(r[c]) for c in list(r)[11:]]
        for r in table.to_dict("records")
    ]
    return headers, rows


def jain_rows(fairness: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Per strategy and workers: Jain's index range, and the worst-served tenant of the
    repetition where it fared worst."""
    headers = ["strategy", "workers", "reps", "Jain's index", "worst-served tenant", "slowdown"]
    rows = []
    for (strategy, workers), group in fairness.groupby(["strategy", "workers"], sort=False):
        worst = group.sort_values("worst_slowdown").iloc[-1]
        rows.append(
            [
                str(strategy),
                str(workers),
                str(len(group)),
                span(group["jain_index"].min(), group["jain_index"].max()),
                f"{worst['worst_class']} #{worst['worst_tenant']}",
                number(worst["worst_slowdown"]),
            ]
        )
    return headers, rows


def ideal_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    costed = "ideal_costed" in table
    headers = ["strategy", "workers", "tenants", "figure", "measured", "ideal", "measured/ideal"]
    headers += ["ideal, costed", "measured/costed"] if costed else []
    rows = []
    for record in table.to_dict("records"):
        row = [
            record["strategy"],
            str(record["workers"]),
            record["tenant_class"],
            record["figure"],
            number(record["measured"]),
            number(record["ideal"]),
            number(record["ratio"]),
        ]
        if costed:
            row += [number(record["ideal_costed"]), number(record["ratio_costed"])]
        rows.append(row)
    return headers, rows


def _count_or_dash(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return str(int(value))


def property_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [
        "property",
        "strategy",
        "workers",
        "reps",
        "measured (worst)",
        "bound",
        "held",
        "detail",
    ]
    rows = [
        [
            r["check"],
            r["strategy"],
            str(r["workers"]),
            str(r["repetitions"]),
            number(r["measured"]),
            number(r["bound"]),
            "n/a" if r["held"] is None or r["held"] != r["held"] else "yes" if r["held"] else "NO",
            r["detail"],
        ]
        for r in table.to_dict("records")
    ]
    return headers, rows


def summary_markdown(title: str, tables: RunTables) -> str:
    summary, plans, reference, source = (
        tables.summary,
        tables.plans,
        tables.reference,
        tables.reference_source,
    )
    parts = [f"# {title}\n"]
    if reference is not None and len(reference):
        parts += [
            f"## Beside the reference\n\nReference: {source}. Measured: the range over "
            "repetitions.\n",
            markdown_table(*reference_rows(reference)),
        ]
    if summary is not None:
        parts += [
            "## Waits and makespan\n\nSeconds; the range over repetitions. Wait: enqueued_at "
            "to started_at. Last done: the class's last job finished, counted from the "
            "repetition's first enqueue. `all` pools every tenant. Every figure is recomputable "
            "from jobs.csv (harness/analysis.py says how).\n",
            markdown_table(*summary_rows(summary)),
        ]
    if summary is not None and "slowdown_p50" in summary:
        parts += [f"## Fairness across tenants\n\n{FAIRNESS_NOTE}\n"]
        parts += [markdown_table(*fairness_rows(summary))]
        if tables.fairness is not None and len(tables.fairness):
            parts += ["", markdown_table(*jain_rows(tables.fairness))]
    if tables.ideal is not None and len(tables.ideal):
        parts += [
            f"## Against the ideal schedule\n\n{IDEAL_NOTE}\n",
            markdown_table(*ideal_rows(tables.ideal)),
        ]
    if plans is not None:
        parts += [
            "## Dequeue plans\n\nEXPLAIN (ANALYZE, BUFFERS) of each strategy's dequeue on "
            "the backlog, inside BEGIN ... ROLLBACK; medians over the JSON repetitions "
            "(plans.csv has each). Total = planning + execution. Raw plans: explain/.\n",
            markdown_table(*plans_rows(plans)),
        ]
    if tables.properties is not None:
        parts += [
            "## Properties checked\n\nFrom the recorded data (harness/properties.py); "
            "measured is the worst repetition.\n",
            markdown_table(*property_rows(tables.properties)),
        ]
    if tables.faults is not None:
        parts += ["## Faults\n\n" + FAULTS_NOTE + "\n", markdown_table(*fault_rows(tables.faults))]
    if tables.bloat is not None:
        parts += [
            f"## Long transaction and bloat\n\n{BLOAT_INTRO}\n",
            "".join(f"- {sentence}\n" for sentence in bloat_sentences(tables.bloat)),
            markdown_table(*bloat_rows(tables.bloat)),
        ]
    return "\n".join(parts)


_PROBE_COLUMNS = {
    "shared buffers": "buffers",
    "rows removed by filter": "rows removed",
    "index under the Limit": "plan",
    "jobs scan": "plan",
    "dangerous shapes": "flags",
    "claim latency / reference": "claim / reference",
}
_SEVERITY = ["ok", "improved", "noisy", "new", "regression"]


def findings_rows(findings: list[Finding]) -> tuple[list[str], list[list[str]]]:
    """One row per probe: each figure as `baseline -> now`, and the probe's worst verdict."""
    headers = [
        "strategy",
        "backlog",
        "buffers",
        "rows removed",
        "plan",
        "flags",
        "claim / reference",
        "verdict",
    ]
    probes: dict[tuple[str, str], dict[str, str]] = {}
    for f in findings:
        row = probes.setdefault((f.strategy, f.variant), {"verdict": "ok"})
        column = _PROBE_COLUMNS.get(f.figure)
        if column is not None and not (column == "plan" and row.get("plan", "same") != "same"):
            row[column] = _change(f)
        if _SEVERITY.index(f.verdict) > _SEVERITY.index(row["verdict"]):
            row["verdict"] = f.verdict
    return headers, [
        [
            strategy,
            variant,
            *(row.get(h, "-") for h in headers[2:-1]),
            row["verdict"].upper() if row["verdict"] == "regression" else row["verdict"],
        ]
        for (strategy, variant), row in probes.items()
    ]


def _change(f: Finding) -> str:
    if f.figure in ("index under the Limit", "jobs scan"):
        return (
            "same"
            if f.baseline == f.candidate
            else (f"{_index(f.baseline)} -> {_index(f.candidate)}")
        )
    if f.figure == "dangerous shapes":
        return "none" if f.candidate == "none" else "NEW" if f.verdict == "regression" else "same"
    factor = "" if f.factor is None or math.isinf(f.factor) else f" ({f.factor:.2f}x)"
    return f"{f.baseline} -> {f.candidate}{factor}"


def junit_xml(findings: list[Finding]) -> bytes:
    """One test case per probe figure; a regression is a failure."""
    failures = [f for f in findings if f.verdict == "regression"]
    suite = ElementTree.Element(
        "testsuite",
        name="harness check",
        tests=str(len(findings)),
        failures=str(len(failures)),
        errors="0",
        skipped="0",
    )
    for finding in findings:
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=f"{finding.strategy}.{finding.variant}",
            name=finding.figure,
        )
        if finding.verdict == "regression":
            ElementTree.SubElement(case, "failure", message=finding.message)
        elif finding.verdict != "ok":
            ElementTree.SubElement(case, "system-out").text = finding.message
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


def overhead_rows(summaries: list[LoadSummary]) -> tuple[list[str], list[list[str]]]:
    """Per load, both arms (median, range over rounds) and the harness / pgbench ratio
    (the median of the rounds' ratios)."""
    headers = ["work", "jobs", "arm", "jobs/s", "makespan s", "claim ms (mean)"]
    metrics = ("throughput", "makespan_s", "claim_ms")
    rows = []
    for summary in summaries:
        load = summary.load
        for arm in ("pgbench", "harness"):
            spreads = [getattr(getattr(summary, arm), metric) for metric in metrics]
            cells = [f"{number(s.median)} ({span(s.low, s.high)})" for s in spreads]
            rows.append([f"{load.work_ms} ms", str(load.jobs), arm, *cells])
        ratios = [f"{summary.ratio(metric):.3f}" for metric in metrics]
        rows.append([f"{load.work_ms} ms", str(load.jobs), "harness / pgbench", *ratios])
    return headers, rows


_BLOAT_COLUMNS = {
    "claim_p50_before_ms": "claim p50 before (ms)",
    "claim_p50_during_ms": "claim p50 during",
    "claim_p50_after_ms": "claim p50 after",
    "claim_p95_before_ms": "claim p95 before",
    "claim_p95_during_ms": "claim p95 during",
    "claim_p95_after_ms": "claim p95 after",
    "claim_p50_during_vs_before": "p50 during / before (x)",
    "wait_p95_before_s": "wait p95 before (s)",
    "wait_p95_during_s": "wait p95 during",
    "wait_p95_after_s": "wait p95 after",
    "dequeue_buffers_before": "dequeue buffers before",
    "dequeue_buffers_during_peak": "dequeue buffers during (peak)",
    "dequeue_buffers_after": "dequeue buffers after",
    "jobs_dead_versions_peak": "dead versions, jobs (peak)",
    "tenants_dead_versions_peak": "dead versions, queue_tenants (peak)",
    "jobs_dead_versions_end": "dead versions, jobs (end)",
    "jobs_n_dead_tup_peak": "n_dead_tup, jobs (peak)",
    "jobs_kb_grown_during": "jobs + indexes grew during (KB)",
    "autovacuums": "autovacuums",
}


def bloat_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Per strategy and workers: each long-transaction figure's range over repetitions."""
    grouped = table.groupby(["strategy", "workers"], sort=False)
    headers = ["strategy", "workers", "reps", *_BLOAT_COLUMNS.values()]
    rows = [
        [
            str(strategy),
            str(workers),
            str(len(group)),
            *(span(group[column].min(), group[column].max()) for column in _BLOAT_COLUMNS),
        ]
        for (strategy, workers), group in grouped
    ]
    return headers, rows


def bloat_sentences(table: pd.DataFrame) -> list[str]:
    """What the long transaction did, one sentence per strategy and worker count."""
    sentences = []
    for (strategy, workers), group in table.groupby(["strategy", "workers"], sort=False):
        f = {column: span(group[column].min(), group[column].max()) for column in _BLOAT_COLUMNS}
        sentences.append(
            f"{strategy}, {workers} workers: the median claim took "
            f"{f['claim_p50_before_ms']} ms before the hold, {f['claim_p50_during_ms']} ms "
            f"during it ({f['claim_p50_during_vs_before']}x) and {f['claim_p50_after_ms']} ms "
            f"after it (p95: {f['claim_p95_before_ms']}, {f['claim_p95_during_ms']}, "
            f"{f['claim_p95_after_ms']} ms; the p95 wait: {f['wait_p95_before_s']}, "
            f"{f['wait_p95_during_s']}, {f['wait_p95_after_s']} s); one dequeue read "
            f"{f['dequeue_buffers_before']} buffers before, up to "
            f"{f['dequeue_buffers_during_peak']} during and {f['dequeue_buffers_after']} "
            f"after; dead row versions in jobs peaked at {f['jobs_dead_versions_peak']} "
            f"(queue_tenants: {f['tenants_dead_versions_peak']}) and stood at "
            f"{f['jobs_dead_versions_end']} at the end; autovacuum ran {f['autovacuums']} times."
        )
    return sentences


BLOAT_INTRO = (
    "A transaction held a repeatable-read snapshot (the xmin horizon) on its own connection "
    "while the queue churned. Claims are split by the job's started_at: before the hold "
    "began, during it, after it ended. Dead versions: dead row versions still in the heap "
    "(pgstattuple), which pruning removes once the horizon moves; n_dead_tup: the "
    "statistics' count, which only a vacuum lowers. Dequeue buffers: EXPLAIN (ANALYZE, "
    "BUFFERS) of the strategy's dequeue at each sample, rolled back (medians before and "
    "after, the peak during). Raw samples: bloat.csv; per "
    "repetition: bloat-summary.csv."
)
