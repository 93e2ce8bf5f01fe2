"""What a fault scenario's faults did, per repetition, from run.json, and the planned
faults that never happened (pure)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.report.cells import count, number
from harness.report.sections import Section, Table
from harness.results.document import RunDocument
from harness.scenario.model import Crash, Scenario

FAULT_COLUMNS = [
    "strategy",
    "workers",
    "repetition",
    "crashes",
    "lost",
    "duplicates",
    "stuck",
    "dead_lettered",
    "retried_done",
    "recovery_max_s",
    "recovery_p50_s",
    "server_restarts",
    "held_at_restart",
    "in_doubt_claims",
    "reconnects",
]


def fault_table(document: RunDocument) -> pd.DataFrame | None:
    """faults.csv: one row per repetition of what its faults did, from run.json."""
    rows = [
        {
            "strategy": entry.strategy,
            "workers": entry.workers,
            "repetition": entry.repetition,
            **{
                column: faults.get(column)
                for column in FAULT_COLUMNS[4:]
                if column != "held_at_restart"
            },
            "crashes": len(faults["crashes"]),
            "held_at_restart": faults.get("restart_held_at_restart"),
        }
        for entry in document.repetitions
        if (faults := entry.faults) is not None
    ]
    return pd.DataFrame(rows, columns=FAULT_COLUMNS) if rows else None


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
        [str(r["strategy"]), *(count(r[c]) for c in list(r)[1:9])]
        + [number(r["recovery_max_s"]), number(r["recovery_p50_s"])]
        + [count(r[c]) for c in list(r)[11:]]
        for r in table.to_dict("records")
    ]
    return headers, rows


def faults_section(table: pd.DataFrame, warnings: list[str]) -> Section:
    rows = Table.of(
        fault_rows(table),
        "Faults: lost, duplicated, stuck, dead-lettered, recovery (s) per repetition",
    )
    return Section(
        "faults", "Faults", FAULTS_NOTE, tables=[rows], console=[rows], warnings=warnings
    )


# run.json's library_faults counts, as they are recorded (0 where an older run has none)
_AS_RECORDED = [
    "backend_kills",
    "sessions_terminated",
    "server_crashes",
    "connections_held",
    "exits",
    "restarts",
    "ok",
    "duplicated",
    "stranded",
    "abandoned",
    "waiting",
    "lost",
]
# run.json's lists of job ids, counted
_LISTED = ["unreported", "unrecorded", "unexpected"]
LIBRARY_FAULT_COLUMNS = [
    "strategy",
    "workers",
    "repetition",
    "worker_kills",
    *_AS_RECORDED,
    *_LISTED,
    "window_s",
]


def library_fault_table(document: RunDocument) -> pd.DataFrame | None:
    """library-faults.csv: one row per repetition of a queue behind the adapter contract
    under faults.worker_kills or backend_kills, from run.json: what was done to its
    workers, and its jobs in their outcomes."""
    rows = [
        {
            "strategy": entry.strategy,
            "workers": entry.workers,
            "repetition": entry.repetition,
            "worker_kills": faults["kills"],
            **{column: faults.get(column, 0) for column in _AS_RECORDED},
            **{column: len(faults.get(column, [])) for column in _LISTED},
            "window_s": faults["window_s"],
        }
        for entry in document.repetitions
        if (faults := entry.library_faults) is not None
    ]
    return pd.DataFrame(rows, columns=LIBRARY_FAULT_COLUMNS) if rows else None


LIBRARY_FAULTS_NOTE = (
    "Per repetition, from run.json, every job in one outcome: ok = finished once; "
    "duplicated = finished more than once; stranded = still running or locked by a worker "
    "that is gone when the window (timeout_s) ended; abandoned = marked failed by the "
    "library itself; waiting = queued still, not taken up again within the window; lost = "
    "enqueued, then neither in the library's table at the end nor ever run. What "
    "the library recovers after the window is not waited for. Worker kills: SIGKILL of a "
    "worker's process group (restarts: by the harness, as a supervisor would); backend "
    "kills: the times its workers' sessions were terminated, and how many sessions; server "
    "crashes: an immediate shutdown and start (when, in run.json); conns held: idle "
    "connections the harness held through a connection exhaustion, leaving the library "
    "none to open (of max_connections, when, and the refusal that stopped it short, in "
    "run.json); exits: "
    "a worker that exited or failed on its own (each reason in run.json); unreported: "
    "done by the library's table, its worker killed before it said so (ok, no moments); "
    "unrecorded: reported done, absent from the library's table at the end (ok, no moments); "
    "unexpected: run or held by the library, never enqueued (in no outcome)."
)


def missed_library_faults(document: RunDocument, scenario: Scenario) -> list[str]:
    """The planned library faults that never happened, one sentence per repetition that
    missed some: a server crash, backend kills, worker kills or a connection exhaustion
    planned after the run ended (every job done first), or kills a late tick made one.
    The repetition measured fewer faults than its scenario says."""
    planned = scenario.faults
    if planned is None:
        return []
    cuts = sum(len(kill.moments()) for kill in planned.backend_kills)
    warnings = []
    for entry in document.repetitions:
        done = entry.library_faults
        if done is None:
            continue
        missed = []
        if planned.server_crash is not None and not done.get("server_crashes"):
            missed.append(f"the server crash at {planned.server_crash.at_s:g} s")
        exhaustion = planned.connection_exhaustion
        if exhaustion is not None and not done.get("connection_exhaustions"):
            missed.append(f"the connection exhaustion from {exhaustion.from_s:g} s")
        if done.get("backend_kills", 0) < cuts:
            missed.append(f"{cuts - done.get('backend_kills', 0)} of {cuts} backend kills")
        if done.get("kills", 0) < len(planned.worker_kills):  # each at least at its at_s
            kills = len(planned.worker_kills)
            missed.append(f"{kills - done.get('kills', 0)} of {kills} worker kills")
        if missed:
            label = f"{entry.strategy} x{entry.workers} #{entry.repetition}"
            warnings.append(
                f"{label}: {', '.join(missed)} never happened: the run ended first (every "
                "job done), or a tick came late and made one kill of several; this "
                "repetition measured fewer faults than planned"
            )
    return warnings


def library_faults_section(table: pd.DataFrame, warnings: list[str] | None = None) -> Section:
    headers = [
        "strategy",
        "workers",
        "rep",
        "worker kills",
        "backend kills",
        "sessions cut",
        "server crashes",
        "conns held",
        "exits",
        "restarts",
        "ok",
        "duplicated",
        "stranded",
        "abandoned",
        "waiting",
        "lost",
        "unreported",
        "unrecorded",
        "unexpected",
        "window (s)",
    ]
    counted = LIBRARY_FAULT_COLUMNS[1:-1]
    rows = [
        [str(r["strategy"]), *(count(r[c]) for c in counted), number(r["window_s"])]
        for r in table.to_dict("records")
    ]
    shown = Table.of((headers, rows), "A library's faults: every job's outcome, per repetition")
    return Section(
        "library_faults",
        "A library's faults",
        LIBRARY_FAULTS_NOTE,
        tables=[shown],
        console=[shown],
        warnings=warnings or [],
    )


def missed_faults(document: RunDocument, scenario: Scenario) -> list[str]:
    """The planned faults that never happened, one sentence per repetition that missed
    some: a crash whose worker held no job again before the run ended, a restart planned
    after the last job was done. The run measured less than its scenario says."""
    planned = scenario.faults
    if planned is None:
        return []
    warnings = []
    for entry in document.repetitions:
        if entry.faults is None:
            continue
        missed = _missed_crashes(planned.crashes, entry.faults["crashes"])
        restart = planned.server_restart
        if restart is not None and not entry.faults.get("server_restarts"):
            missed.append(f"the server restart at {restart.at_s:g} s")
        if missed:
            label = f"{entry.strategy} x{entry.workers} #{entry.repetition}"
            warnings.append(
                f"{label}: {', '.join(missed)} never happened: the run ended first, or the "
                "worker held no job again; this repetition measured fewer faults than planned"
            )
    return warnings


def _missed_crashes(planned: list[Crash], fired: list[dict[str, Any]]) -> list[str]:
    """Each planned crash (worker, at_s) not among those fired, matched one for one."""
    left = [(entry["worker"], entry["at_s"]) for entry in fired]
    missed = []
    for crash in sorted(planned, key=lambda crash: crash.at_s):
        match = next((f for f in left if f[0] == crash.worker and f[1] >= crash.at_s), None)
        if match is None:
            missed.append(f"the crash of worker {crash.worker} at {crash.at_s:g} s")
        else:
            left.remove(match)
    return missed
