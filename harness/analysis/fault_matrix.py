"""A suite's library-by-fault matrix: each scenario of the suite is one fault (a column),
each of its strategies a library's mapping (a row), and every job of every repetition in
one outcome, from the runs' own tables (library-faults.csv, bloat-summary.csv, run.json).

Pure: the tables in, the matrix and its sections out; reading the run folders and
writing the suite's is harness/run/suite.py's.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.analysis.faults import KILL_FIGURES, dip_words
from harness.report.cells import count, missing, number, whole
from harness.report.sections import Section, Table
from harness.results.document import RunDocument

# Every job of a repetition is in exactly one of these (harness/run/faults.py), in the
# order a reader weighs them: what the library got wrong first.
OUTCOMES = ["lost", "duplicated", "abandoned", "stranded", "waiting", "ok"]
# Done once by the task log, but not where the library's table says (counted in ok).
NOTED = ["unrecorded", "unreported", "unexpected", "rerun"]
MATRIX_COLUMNS = [
    "fault",
    "run_id",
    "strategy",
    "library",
    "mapping",
    "workers",
    "repetition",
    "enqueued",
    *OUTCOMES,
    *NOTED,
    "effect",
    *KILL_FIGURES,
    "recovery_waits",
    "promise",
    "verdict",
    "verdict_why",
]


@dataclass(frozen=True)
class Case:
    """One scenario of a suite, run: the fault it stands for and what its run measured."""

    fault: str
    document: RunDocument
    enqueued: int  # per repetition, from the scenario (count_jobs)
    library_faults: pd.DataFrame | None = None  # library-faults.csv
    bloat: pd.DataFrame | None = None  # bloat-summary.csv
    recovery_waits: pd.DataFrame | None = None  # recovery-waits.csv


def fault_matrix(cases: list[Case]) -> pd.DataFrame:
    """fault-matrix.csv: one row per repetition of each case's strategies."""
    rows = [row for case in cases for row in _case_rows(case)]
    return pd.DataFrame(rows, columns=MATRIX_COLUMNS)


def unaccounted(matrix: pd.DataFrame) -> list[str]:
    """Rows whose outcomes do not add up to the jobs enqueued: the harness lost track of
    a job (never a library's result), one sentence each."""
    sums = matrix[OUTCOMES].sum(axis=1)
    wrong = matrix[sums != matrix["enqueued"]]
    return [
        f"{r['fault']}: {r['strategy']} #{r['repetition']}: {int(s)} jobs in outcomes of "
        f"{r['enqueued']} enqueued"
        for (_, r), s in zip(wrong.iterrows(), sums[wrong.index], strict=True)
    ]


def _case_rows(case: Case) -> list[dict[str, Any]]:
    by_key = {
        (str(r["strategy"]), int(r["workers"]), int(r["repetition"])): r
        for frame in (case.library_faults, case.bloat)
        if frame is not None
        for r in frame.to_dict("records")
    }
    waits = _waits_said(case.recovery_waits)
    rows = []
    for entry in case.document.repetitions:
        queue = case.document.queues.get(entry.strategy)
        found = by_key.get((entry.strategy, entry.workers, entry.repetition))
        row: dict[str, Any] = {
            "fault": case.fault,
            "run_id": case.document.run_id,
            "strategy": entry.strategy,
            "library": queue.library if queue is not None else None,
            "mapping": queue.mapping if queue is not None else None,
            "workers": entry.workers,
            "repetition": entry.repetition,
            "enqueued": case.enqueued,
        }
        if entry.library_faults is not None and found is not None:
            row |= _fault_outcomes(found)
            row["recovery_waits"] = waits.get((entry.strategy, entry.workers, entry.repetition))
        else:  # no library fault: a run whose books balance did every job once
            row |= {name: 0 for name in [*OUTCOMES, *NOTED]} | {"ok": entry.jobs}
            row["effect"] = _held_effect(found) if found is not None else ""
        rows.append(row)
    return rows


def _waits_said(table: pd.DataFrame | None) -> dict[tuple[str, int, int], str]:
    """Per repetition, each tenant class's median wait before its kills and during their
    recovery: "small 0.77 -> 2.29 s" (recovery-waits.csv), each kill's joined by "; "."""
    said: dict[tuple[str, int, int], list[str]] = {}
    for r in table.to_dict("records") if table is not None else []:
        key = (str(r["strategy"]), int(r["workers"]), int(r["repetition"]))
        before, during = number(r["wait_p50_before_s"]), number(r["wait_p50_during_s"])
        said.setdefault(key, []).append(f"{r['tenant_class']} {before} -> {during} s")
    return {key: "; ".join(parts) for key, parts in said.items()}


def _fault_outcomes(r: Mapping[Hashable, Any]) -> dict[str, Any]:
    return {
        **{name: int(r[name]) for name in [*OUTCOMES, *NOTED]},
        "effect": _fault_effect(r),
        **{name: r[name] for name in KILL_FIGURES},
        **{name: _text(r[name]) for name in ("promise", "verdict", "verdict_why")},
    }


def _text(value: Any) -> str | None:
    return None if missing(value) or value == "" else str(value)


def _fault_effect(r: Mapping[Hashable, Any]) -> str:
    """What was done to the library, and what its workers did of it, in a phrase."""
    said = []
    if r["worker_kills"]:
        said.append(f"{count(r['worker_kills'])} worker kill(s)")
    if r["backend_kills"]:
        said.append(
            f"{count(r['sessions_terminated'])} sessions cut in {count(r['backend_kills'])}"
        )
    if r["server_crashes"]:
        said.append(f"{count(r['server_crashes'])} crash(es)")
    if r["connections_held"]:
        said.append(f"{count(r['connections_held'])} connections held")
    said.append(f"exits {count(r['exits'])}, restarts {count(r['restarts'])}")
    return "; ".join(said)


def _held_effect(r: Mapping[Hashable, Any]) -> str:
    """A held snapshot's cost: the dead versions kept, the waits' p95 moved, and where
    its fetches were explained, the median buffers of one fetch."""
    if "jobs_dead_versions_peak" not in r:
        return ""
    before, during = r["wait_p95_before_s"], r["wait_p95_during_s"]
    moved = (
        f"; wait p95 {number(before * 1000)} ms before, {number(during * 1000)} ms during"
        if not missing(before) and not missing(during)
        else ""
    )
    return f"{whole(r['jobs_dead_versions_peak'])} dead versions at the peak{moved}" + _fetched(r)


def _fetched(r: Mapping[Hashable, Any]) -> str:
    if missing(r.get("fetch_buffers_p50_before")) or missing(r.get("fetch_buffers_p50_during")):
        return ""
    before, during = r["fetch_buffers_p50_before"], r["fetch_buffers_p50_during"]
    return f"; fetch buffers p50 {number(before)} before, {number(during)} during"


# ---- the sections: the cross table a team reads, then every row


def matrix_sections(matrix: pd.DataFrame, runs: list[tuple[str, str, str]]) -> list[Section]:
    """The suite's page: strategy by fault, each cell its jobs' outcomes; the worker
    kills beside each library's promise; every row; where each run is."""
    faults = list(dict.fromkeys(matrix["fault"]))
    sections = [
        Section(
            "matrix",
            "Library by fault",
            MATRIX_NOTE,
            tables=[Table.of(cross_rows(matrix, faults))],
            console=[Table.of(cross_rows(matrix, faults), "Library by fault: every job's outcome")],
        )
    ]
    killed = matrix[matrix["verdict"].notna()]
    if len(killed):
        kills = Table.of(_kill_rows(killed), "Worker kills beside each library's promise")
        sections.append(
            Section("kills", "Worker kills", KILLS_NOTE, tables=[kills], console=[kills])
        )
    sections.append(
        Section("rows", "Every repetition", ROWS_NOTE, tables=[Table.of(_every_row(matrix))])
    )
    sections.append(
        Section(
            "runs",
            "The runs",
            "Each case is a run folder of its own: its report, tables and raw data.",
            tables=[Table(["fault", "scenario", "run"], [list(run) for run in runs])],
        )
    )
    return sections


MATRIX_NOTE = (
    "Each cell: a library's mapping (row) under one fault (column), every job of its "
    "repetitions in one outcome: lost (enqueued, then nowhere), duplicated (finished "
    "more than once), abandoned (marked failed by the library), stranded (still held by a "
    "worker that is gone), waiting (queued still at the window's end), ok (done once); "
    "unrecorded: done, then gone from the library's table. The worker kill's cell ends "
    "with the verdict against the library's documented recovery. Counts are summed over "
    "repetitions."
)
KILLS_NOTE = (
    "The jobs each kill interrupted (its adapter's `started` events), the time until a "
    "worker started them again, the throughput around the kill, each tenant class's "
    "median wait before the kill and during its recovery (recovery-waits.csv), and the library's "
    "documented promise for such a job (its manifest's `recovery`, with its source in "
    "docs/faults.md)."
)
ROWS_NOTE = "fault-matrix.csv, one row per repetition: what the cross table sums."


def cross_rows(matrix: pd.DataFrame, faults: list[str]) -> tuple[list[str], list[list[str]]]:
    strategies = list(dict.fromkeys(matrix["strategy"]))
    rows = []
    for strategy in strategies:
        mine = matrix[matrix["strategy"] == strategy]
        rows.append([strategy, *(_cell(mine[mine["fault"] == fault]) for fault in faults)])
    return ["strategy", *faults], rows


def _cell(rows: pd.DataFrame) -> str:
    """A cell of the cross table: "120 ok", "118 ok, 2 stranded; as promised"."""
    if rows.empty:
        return "-"
    sums = {name: int(rows[name].sum()) for name in [*OUTCOMES, "unrecorded"]}
    said = [f"{sums['ok']:,} ok"] + [
        f"{sums[name]:,} {name}" for name in [*OUTCOMES[:-1], "unrecorded"] if sums[name]
    ]
    verdicts = [str(v) for v in rows["verdict"] if not missing(v)]
    worst = _worst(verdicts)
    return ", ".join(said) + (f"; {worst}" if worst else "")


_VERDICT_ORDER = [
    "worse",
    "not reached",
    "not said",
    "no promise",
    "no job held",
    "better",
    "as promised",
]


def _worst(verdicts: list[str]) -> str:
    for verdict in _VERDICT_ORDER:
        if verdict in verdicts:
            return verdict
    return ""


def _kill_rows(matrix: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [
        "strategy",
        "fault",
        "rep",
        "recovery p50 / max (s)",
        "throughput",
        "p50 wait before -> during the recovery",
        "promise",
        "verdict",
    ]
    rows = [
        [
            str(r["strategy"]),
            str(r["fault"]),
            count(r["repetition"]),
            f"{number(r['recovery_p50_s'])} / {number(r['recovery_max_s'])}",
            dip_words(r),
            _text(r["recovery_waits"]) or "-",
            str(r["promise"] or "-"),
            str(r["verdict"]),
        ]
        for r in matrix.to_dict("records")
    ]
    return headers, rows


def _every_row(matrix: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = ["fault", "strategy", "rep", "enqueued", *OUTCOMES, "unrecorded", "what was done"]
    rows = [
        [
            str(r["fault"]),
            str(r["strategy"]),
            count(r["repetition"]),
            count(r["enqueued"]),
            *(count(r[name]) for name in [*OUTCOMES, "unrecorded"]),
            str(r["effect"] or "-"),
        ]
        for r in matrix.to_dict("records")
    ]
    return headers, rows
