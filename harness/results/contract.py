"""The contract of a run folder: every file a run can write there, raw or derived.

Raw files are what a run measured; they are written while it runs and never rewritten,
but for run.json, whose status and list of files change as the run goes. Derived files
are made from the raw ones alone, by `render_run` at the end of a complete run and again
by `harness report RUN_DIR`, which replaces them; every derived CSV's first column is
`run_id`. docs/results-format.md lists the same
entries (a test keeps the two alike).

A pattern is a path relative to the run folder; `<variant>` and `<strategy>` stand for a
name as the scenario spells it, `<plot>` for one of PLOTS, `<major>` for a PostgreSQL
major (in a run of several, harness run --pg-version 15,16,17,18).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Literal

PLOTS = (
    "waits_over_time",
    "backlog",
    "waits",
    "claim_latency",
    "timeline",
    "tenant_share",
    "scaling",
    "plans",
    "bloat",
    "horizon",
)
_NAME = r"[a-z0-9][a-z0-9_-]{0,62}"  # the scenario's Name: strategies and variants
NAME_PATTERN = f"^{_NAME}$"  # a <variant> or <strategy> in a file's path
_PLACEHOLDERS = {
    "variant": _NAME,
    "strategy": _NAME,
    "plot": "|".join(PLOTS),
    "major": "[0-9]{1,3}",
}
_PLACEHOLDER = re.compile(r"<([a-z_]+)>")


@dataclass(frozen=True)
class RunFile:
    pattern: str
    kind: Literal["raw", "derived"]
    when: str
    what: str


_RENDER = "at every render: the end of a complete run, and each `harness report`"

RUN_FILES: tuple[RunFile, ...] = (
    RunFile(
        "scenario.yaml",
        "raw",
        "first, when the run folder is made",
        "the scenario file exactly as read; its sha256 is in run.json",
    ),
    RunFile(
        "run.json",
        "raw",
        "when the folder is made (status running), rewritten when the run ends and at every render",
        "format version, status, provenance, options, one entry per repetition and per "
        "plan capture, the simulator's policy per strategy, the files written",
    ),
    RunFile(
        "../../latest",
        "raw",
        "right after run.json is first written; replaced by the next run",
        "symbolic link results/latest -> <scenario>/<run id>, the newest run",
    ),
    RunFile(
        "jobs.csv",
        "raw",
        "when the run ends (complete, failed or interrupted), if a repetition finished",
        "one row per job of every finished repetition: the data every figure comes from",
    ),
    RunFile(
        "monitor.csv",
        "raw",
        "when the run ends, if a strategy has a `monitor` block",
        "the monitor block's samples, every 20 ms while the workers ran",
    ),
    RunFile(
        "bloat.csv",
        "raw",
        "as sampled (appended row by row), with `long_transaction`",
        "the long transaction's samples: xmin age, live and dead tuples, sizes, vacuums, "
        "one dequeue's buffers",
    ),
    RunFile(
        "fetch-plans.csv",
        "raw",
        "as explained (a library's: when its repetition ends or is cut), with "
        "`long_transaction.explain_fetches` or `horizon`",
        "one row per fetch of the library's timed workers",
    ),
    RunFile(
        "horizon.csv",
        "raw",
        "as sampled (appended row by row), with `horizon`",
        "every sample_s: the oldest xmin's age, WAL bytes, the notification queue's use, "
        "the queue's tables and indexes together (live, dead, sizes, autovacuums)",
    ),
    RunFile(
        "horizon-relations.csv",
        "raw",
        "as sampled (appended row by row), with `horizon`",
        "every sample_s, each table and index of the queue's own schemas: tuples, size, "
        "(auto)vacuum and (auto)analyze counts and ages, index scans",
    ),
    RunFile(
        "horizon-waits.csv",
        "raw",
        "as sampled (appended row by row), with `horizon`",
        "every second: the database's active sessions per wait event",
    ),
    RunFile(
        "horizon-pgstattuple.csv",
        "raw",
        "as sampled, with `horizon` and pgstattuple on the server",
        "at each phase boundary, each table's dead and free percentages (pgstattuple)",
    ),
    RunFile(
        "explain/<variant>/<strategy>.json",
        "raw",
        "as each plan capture finishes",
        "every JSON plan of a capture, its dequeue text, the backlog's shape, the figures",
    ),
    RunFile(
        "explain/<variant>/<strategy>.txt",
        "raw",
        "as each plan capture finishes",
        "the text plan of the capture's first execution, under the dequeue's text",
    ),
    RunFile(
        "explain/pg<major>/<variant>/<strategy>.json",
        "raw",
        "as each plan capture finishes, in a run of several majors",
        "the same, of the capture on that major's server",
    ),
    RunFile(
        "explain/pg<major>/<variant>/<strategy>.txt",
        "raw",
        "as each plan capture finishes, in a run of several majors",
        "the same, of the capture on that major's server",
    ),
    RunFile(
        "summary.csv",
        "derived",
        _RENDER + ", with a timed workload",
        "per strategy, workers, repetition and tenant class: waits, makespan, throughput",
    ),
    RunFile(
        "throughput.csv",
        "derived",
        _RENDER + ", with a drained backlog (`backlog.drain`)",
        "per strategy, workers and repetition: jobs, the drain's length and jobs/s, the "
        "claim latency's p50 and p95",
    ),
    RunFile(
        "tenants.csv",
        "derived",
        _RENDER + ", with a timed workload",
        "per repetition and tenant: jobs, head wait, makespan, makespan alone, slowdown",
    ),
    RunFile(
        "fairness.csv",
        "derived",
        _RENDER + ", with a timed workload",
        "per repetition: Jain's index over slowdowns, the worst-served tenant",
    ),
    RunFile(
        "ideal.csv",
        "derived",
        _RENDER + ", with a timed workload and the strategies' simulator policies",
        "per strategy, workers, class and figure: measured against the ideal schedule",
    ),
    RunFile(
        "calibration.json",
        "derived",
        _RENDER + ", with a timed workload and the strategies' simulator policies",
        "the run's claim, completion and poll costs per strategy and workers, as "
        "distributions, and their growth with the workers: the costs of ideal.csv's costed "
        "ideal and of `harness simulate --calibration`",
    ),
    RunFile(
        "plans.csv",
        "derived",
        _RENDER + ", with plan captures",
        "one row per captured JSON execution: backlog, times, buffers, scans, flags",
    ),
    RunFile(
        "properties.csv",
        "derived",
        _RENDER + ", with `checks`",
        "each property per strategy, workers and repetition: measured, bound, held",
    ),
    RunFile(
        "faults.csv",
        "derived",
        _RENDER + ", with faults",
        "per repetition: lost, duplicated, stuck, dead-lettered, recovery, reconnects",
    ),
    RunFile(
        "library-faults.csv",
        "derived",
        _RENDER
        + ", with `faults.worker_kills`, `backend_kills`, `server_crash` or "
        + "`connection_exhaustion`",
        "per repetition: kills, sessions terminated, server crashes, connections held, "
        "exits, restarts, and "
        "every job's outcome (ok, duplicated, stranded, abandoned, waiting, lost), those "
        "unreported and unrecorded, the jobs never enqueued it ran (unexpected), those run "
        "again unasked (rerun); the jobs a kill interrupted, started again, recovery p50 and "
        "max, the throughput dip, the library's promise and the verdict beside it",
    ),
    RunFile(
        "recovery-waits.csv",
        "derived",
        _RENDER + ", with `faults.worker_kills`",
        "per worker kill and tenant class: the median wait of the jobs started before the "
        "kill and of those queued during its recovery (until its throughput was back)",
    ),
    RunFile(
        "bloat-summary.csv",
        "derived",
        _RENDER + ", with `long_transaction`",
        "per repetition: claim latency and waits before, during and after the hold, bloat",
    ),
    RunFile(
        "horizon-windows.csv",
        "derived",
        _RENDER + ", with `horizon`",
        "per repetition, window_s window and tenant class (and all): jobs started, jobs/s, "
        "wait p50, p95 and p99, the phase",
    ),
    RunFile(
        "horizon-drift.csv",
        "derived",
        _RENDER + ", with `horizon`",
        "per repetition: each figure's steady first and last window, the change with its "
        "bootstrap interval, Theil-Sen slopes per hour, the held phase's peak, the verdict",
    ),
    RunFile(
        "idle.csv",
        "derived",
        _RENDER + ", with `idle`",
        "per repetition: the idle window's length, the jobs done in it, the fetches and "
        "statements its workers made (pg_stat_statements), each a second, the server's CPU "
        "seconds and share of a core (/proc), the fetch marker, and what was not measured",
    ),
    RunFile(
        "mappings.csv",
        "derived",
        _RENDER + ", with `report.mappings` and two tenant classes or more",
        "per repetition: the others' wait p50 and p95 beside the flood's (the class with the "
        "most jobs) makespan and that over the first strategy's, Jain's index, and an idle "
        "window's fetches/s and server CPU share",
    ),
    RunFile(
        "thresholds.csv",
        "derived",
        _RENDER + ", with `thresholds` or `--threshold`",
        "per threshold: its text, the measured value (the median over repetitions), unit, "
        "range, samples and whether it was kept",
    ),
    RunFile(
        "results.json",
        "derived",
        _RENDER,
        "the headline figures for other tools: each a name, unit, value (median), range, "
        "lower-is-better and its reference; the run's id, commit and host",
    ),
    RunFile(
        "summary.md",
        "derived",
        _RENDER,
        "the reference figures beside the measured ones, and every table as ranges",
    ),
    RunFile(
        "<plot>.png",
        "derived",
        _RENDER + ", for the plots the run's data allows",
        "a plot as PNG: " + ", ".join(PLOTS),
    ),
    RunFile(
        "<plot>.svg",
        "derived",
        _RENDER + ", for the plots the run's data allows",
        "the same plot as SVG",
    ),
    RunFile(
        "<plot>-pg<major>.png",
        "derived",
        _RENDER + ", in a run of several majors",
        "a plot of one major's measurements, as PNG",
    ),
    RunFile(
        "<plot>-pg<major>.svg",
        "derived",
        _RENDER + ", in a run of several majors",
        "the same plot as SVG",
    ),
    RunFile(
        "report.html",
        "derived",
        _RENDER,
        "one self-contained page: scenario, provenance, tables, plots, text plans",
    ),
)


def matching(name: str) -> RunFile | None:
    """The entry a path relative to the run folder belongs to, or None."""
    for entry, pattern in _compiled():
        if pattern.fullmatch(name):
            return entry
    return None


@cache
def _compiled() -> tuple[tuple[RunFile, re.Pattern[str]], ...]:
    return tuple((entry, _regex(entry.pattern)) for entry in RUN_FILES)


def _regex(pattern: str) -> re.Pattern[str]:
    parts = _PLACEHOLDER.split(pattern)  # literal, placeholder, literal, ...
    pieces = [
        f"(?:{_PLACEHOLDERS[part]})" if index % 2 else re.escape(part)
        for index, part in enumerate(parts)
    ]
    return re.compile("".join(pieces))


def listed(name: str, kind: Literal["raw", "derived"]) -> str:
    """`name`, if the contract lists it as `kind`: the writers ask before they write, so a
    run folder never holds a file the contract (and docs/results-format.md) does not say."""
    entry = matching(name)
    if entry is None or entry.kind != kind:
        raise ValueError(f"{name} is not a {kind} file of the run-folder contract")
    return name


# The folders `harness check` and `harness overhead` make beside the run folders,
# results/<folder>/<run id>/: every file in them is written once.
OTHER_FOLDERS: dict[str, tuple[RunFile, ...]] = {
    "check": (
        RunFile(
            "probes.json",
            "raw",
            "when the probes are measured",
            "every probe measured, in the baseline's format: usable as --baseline",
        ),
        RunFile(
            "results.json",
            "raw",
            "when the probes are measured",
            "per probe: buffers, rows removed, claim latency and its ratio to the reference "
            "query, each with the baseline's figure and whether it regressed",
        ),
    ),
    "overhead": (
        RunFile("overhead.json", "raw", "when both arms are measured", "every measurement"),
        RunFile("overhead.md", "raw", "when both arms are measured", "the table and the goals"),
        RunFile(
            "results.json",
            "raw",
            "when both arms are measured",
            "per load: each arm's throughput, makespan and claim latency, and harness / pgbench",
        ),
    ),
}
