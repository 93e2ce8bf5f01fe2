"""An idle queue's cost: a scenario's `idle` window, measured beside the repetition.

From the window's start to its end the queue should hold nothing to do: its workers
poll. At each end the probe reads, on a connection of its own, every statement the
database has counted (pg_stat_statements, which the embedded server loads for such a
scenario) and the CPU time of the server's processes (utime + stime in /proc/<pid>/stat,
of every process pg_stat_activity knows and the postmaster, on a server on this host).
Between the two: the fetches (the calls of the statements that hold the queue's fetch
marker), every statement, the server's CPU seconds, and the jobs done meanwhile (0 for a
window that was idle).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from harness.queues.base import Site
from harness.scenario.model import IdleWindow
from harness.server.connections import connect
from harness.sqlfiles import builtin_blocks

SQL = builtin_blocks("harness.run", "idle.sql")
PROC = Path("/proc")
NO_STATS = "the server has no pg_stat_statements loaded and installed in this database"
NO_MARKER = "the queue does not say how its fetch statement is told (no fetch marker)"
NOT_HERE = "the server's processes are not on this host"


@dataclass(frozen=True)
class Snapshot:
    at: float  # monotonic s
    calls: dict[tuple[int, str], int] | None  # (queryid, text) -> calls; None: not counted
    cpu_ticks: dict[int, int] | None  # each server process's utime + stime; None: not here
    done: int  # jobs done so far


def marker_pattern(marker: str) -> re.Pattern[str]:
    """The marker as pg_stat_statements shows a statement: its constants (quoted text,
    numbers, true and false) and parameters (%(name)s) may read $n there; case and
    spacing as given."""
    parts = re.split(r"('[^']*'|%\(\w+\)s|\b\d+\b|\b(?:true|false)\b)", marker, flags=re.I)
    pattern = "".join(
        r"\$\d+"
        if part.startswith("%(")
        else f"(?:{re.escape(part)}|\\$\\d+)"
        if part.startswith("'") or part.isdigit() or part.lower() in ("true", "false")
        else re.escape(part)
        for part in parts
    )
    return re.compile(pattern, re.IGNORECASE)


def fetch_calls(
    before: dict[tuple[int, str], int], after: dict[tuple[int, str], int], marker: str
) -> int:
    """The calls made between two readings of the statements that hold `marker`, their
    text's spacing collapsed (as a plan capture reads it: SQLAlchemy breaks lines)."""
    pattern = marker_pattern(marker)
    return sum(
        calls - before.get(key, 0)
        for key, calls in after.items()
        if pattern.search(" ".join(key[1].split()))
    )


def process_ticks(pid: int) -> int | None:
    """utime + stime of a process of the server (its name `postgres`), in clock ticks;
    None where it is no such process here."""
    try:
        if (PROC / str(pid) / "comm").read_text().strip() != "postgres":
            return None
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # stat's 14th and 15th fields


def parent_pid(pid: int) -> int | None:
    try:
        return int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def server_ticks(pids: list[int]) -> dict[int, int] | None:
    """The CPU ticks of each of the server's processes: those named and their postmaster."""
    if not pids:
        return None
    postmaster = parent_pid(pids[0])
    every = {*pids, *([postmaster] if postmaster else [])}
    ticks = {pid: process_ticks(pid) for pid in every}
    found = {pid: tick for pid, tick in ticks.items() if tick is not None}
    return found or None


def window_ticks(first: dict[int, int], last: dict[int, int]) -> int:
    """The ticks the server's processes spent between two readings: each process's
    growth, a process started meanwhile all of its own; one that ended meanwhile took
    its ticks with it (uncounted)."""
    return sum(max(0, ticks - first.get(pid, 0)) for pid, ticks in last.items())


class IdleProbe:
    """Reads the two ends of the window as the repetition's watch loop passes them."""

    def __init__(self, site: Site, window: IdleWindow, marker: str | None) -> None:
        self.window, self.marker = window, marker
        self.conn: psycopg.Connection[Any] = connect(site.dsn)
        row = self.conn.execute(SQL["stats_schema"].sql).fetchone()
        self.counted = row is not None
        if row is not None:
            self.conn.execute(SQL["search_stats"].sql, {"schema": row[0]})
        self.first: Snapshot | None = None
        self.record: dict[str, Any] | None = None

    def tick(self, elapsed: float, done: int) -> None:
        if self.first is None and elapsed >= self.window.from_s:
            self.first = self._snapshot(done)
        elif self.first is not None and self.record is None and elapsed >= self.window.until_s:
            self.record = window_record(self.first, self._snapshot(done), self.marker)

    def close(self) -> None:
        self.conn.close()

    def _snapshot(self, done: int) -> Snapshot:
        calls = None
        if self.counted:
            rows = self.conn.execute(SQL["statements"].sql).fetchall()
            calls = {(int(queryid), str(text)): int(n) for queryid, text, n in rows}
        pids = [int(pid) for (pid,) in self.conn.execute(SQL["server_pids"].sql).fetchall()]
        return Snapshot(time.monotonic(), calls, server_ticks(pids), done)


def window_record(first: Snapshot, last: Snapshot, marker: str | None) -> dict[str, Any]:
    """What run.json records of the window: its length, the fetches and statements made
    in it (each a count and a rate), the server's CPU, the jobs done in it, and why a
    figure is missing."""
    seconds = last.at - first.at
    record: dict[str, Any] = {"window_s": round(seconds, 4), "jobs_done": last.done - first.done}
    record["fetch_marker"] = marker
    missing: list[str] = []
    if first.calls is None or last.calls is None:
        missing.append(NO_STATS)
        record |= {"fetches": None, "statements": None}
    else:
        before = first.calls
        record["statements"] = sum(n - before.get(key, 0) for key, n in last.calls.items())
        record["fetches"] = fetch_calls(before, last.calls, marker) if marker else None
        if marker is None:
            missing.append(NO_MARKER)
    if first.cpu_ticks is None or last.cpu_ticks is None:
        missing.append(NOT_HERE)
        record["server_cpu_s"] = None
    else:
        ticks = window_ticks(first.cpu_ticks, last.cpu_ticks)
        record["server_cpu_s"] = ticks / os.sysconf("SC_CLK_TCK")
    record["unmeasured"] = "; ".join(missing) or None
    return record
