"""What a fault scenario's faults did, per repetition, from run.json (pure)."""

from __future__ import annotations

import pandas as pd

from harness.report.cells import count, number
from harness.report.sections import Section, Table
from harness.results.document import RunDocument

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


def faults_section(table: pd.DataFrame) -> Section:
    rows = Table.of(
        fault_rows(table),
        "Faults: lost, duplicated, stuck, dead-lettered, recovery (s) per repetition",
    )
    return Section("faults", "Faults", FAULTS_NOTE, tables=[rows], console=[rows])
