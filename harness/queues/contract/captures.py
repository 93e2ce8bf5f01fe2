"""Plan captures of a library's real fetch, as its own worker runs it.

A library's fetch is not one statement the harness could EXPLAIN: procrastinate's is
inside a plpgsql function, pgqueuer's is composed per call by its query builder, pg-boss's
and graphile-worker's are built in JavaScript. So the library's own worker runs on the
loaded backlog with auto_explain in every session (`session_preload_libraries`, which
needs a superuser: the embedded server's), its plans sent to the client as notices: the
EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of every statement the library runs, nested ones
included, with the text the library gave it. The fetches are the plans with a LockRows
node whose text has the library's mark of its fetch (`fetch_marker`: foreign-key checks
and maintenance statements lock rows too); a library whose costly step picks its jobs
before a statement of its own locks them (DBOS's sweep of a partitioned queue) marks that
step, and no LockRows node is asked of it (`fetch_locks`); a library that polls queues
without work too (awa's dispatcher per queue) counts only the fetches that returned a
job (`fetch_rows`).

The harness's plan captures (harness/run/captures.py) run that worker through the
`FetchExplainer` side of the queue (harness/queues/base.py). The worker runs with
`fetches` concurrency and tasks that hold their jobs until the stop,
so fetch k runs with the k - 1 jobs before it still running: the first is the one an idle
worker makes on the backlog; the later ones are the steady state of a busy pool (for a
lock or a cap per tenant, the large tenant's first job is running and its backlog must be
passed over). auto_explain gives no planning time; its duration is the executor's.

A timed run's workers under a held snapshot (`long_transaction.explain_fetches`) run the
same way but as they always do, nothing held, with auto_explain's timing of each node off
(`explain_options(timing=False)`: the buffers and rows are what is read, and the clock
read at every node would slow every statement); each worker process stamps a plan with the moment it
reached the harness (`append_stamped`), so that the fetch can be placed before, during or
after the hold.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.errors import Diagnostic

from harness.analysis.plans import nodes
from harness.queues.base import ExplainedFetch

EXPLAIN_SETTINGS = {
    "session_preload_libraries": "auto_explain",
    "auto_explain.log_min_duration": "0",
    "auto_explain.log_analyze": "on",
    "auto_explain.log_buffers": "on",
    "auto_explain.log_timing": "on",
    "auto_explain.log_format": "json",
    "auto_explain.log_nested_statements": "on",
    "auto_explain.log_level": "notice",
    "client_min_messages": "notice",
}
SEPARATOR = "\x1e"  # between the notices a capture's worker appends to its plans file
_DURATION = re.compile(r"^duration: (?P<ms>[0-9.]+) ms\s+plan:\s*", re.DOTALL)


def explain_options(timing: bool = True) -> str:
    """auto_explain's settings as a connection's `options` (libpq, node-postgres);
    without `timing`, no node's own time (a timed run's: the executor's total stays)."""
    settings = EXPLAIN_SETTINGS | ({} if timing else {"auto_explain.log_timing": "off"})
    return " ".join(f"-c {name}={value}" for name, value in settings.items())


def append_notice(path: str, message: str) -> None:
    """A plan notice into the capture's file, as the worker's connection receives it."""
    if message.startswith("duration:"):
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(message + SEPARATOR)


def append_stamped(path: str, message: str, gate: str | None = None) -> None:
    """A timed run's plan notice into its worker process's file, after the moment it
    arrived (time.monotonic: one clock for every process of this host) and a tab; with
    `gate`, only while that file exists (a horizon explains at moments: the file stays
    small over hours)."""
    if gate is not None and not Path(gate).exists():
        return
    if message.startswith("duration:"):
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(f"{time.monotonic():.6f}\t{message}{SEPARATOR}")


def notice_handler(path: str) -> Callable[[Diagnostic], None]:
    """A psycopg connection's notice handler that appends its plans to `path`."""
    return lambda notice: append_notice(path, notice.message_primary or "")


def pool_configure(path: str) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]:
    """A psycopg_pool's `configure`: each connection it opens hands its plans to `path`."""

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        conn.add_notice_handler(notice_handler(path))

    return configure


@dataclass(frozen=True)
class FetchPlan:
    """One fetch as auto_explain reported it."""

    duration_ms: float
    query: str
    plan: dict[str, Any]

    def fetch(self) -> ExplainedFetch:
        """As the harness's plan captures hold a plan (analysis/plans.py reads it)."""
        return ExplainedFetch(self.query, [{"Plan": self.plan, "Execution Time": self.duration_ms}])

    def figures(self) -> dict[str, Any]:
        every = list(nodes(self.plan))
        scans = [node for node in every if "Relation Name" in node]
        return {
            "duration_ms": self.duration_ms,
            "shared_buffers": int(self.plan.get("Shared Hit Blocks", 0))
            + int(self.plan.get("Shared Read Blocks", 0)),
            "rows_removed": sum(_removed(node) for node in every),
            "max_loops": max((int(node.get("Actual Loops", 0)) for node in scans), default=0),
            "scans": sorted({_scan(node) for node in scans}),
        }


def _removed(node: dict[str, Any]) -> int:
    per_loop = float(node.get("Rows Removed by Filter", 0)) + float(
        node.get("Rows Removed by Join Filter", 0)
    )
    return round(per_loop * int(node.get("Actual Loops", 1)))


def _scan(node: dict[str, Any]) -> str:
    index = node.get("Index Name")
    return f"{node['Node Type']}{f' using {index}' if index else ''} on {node['Relation Name']}"


def parse_notice(
    message: str, marker: str, locks: bool = True, rows: bool = False
) -> FetchPlan | None:
    """A fetch's plan from auto_explain's notice; None for any other statement. `locks`:
    only a plan that locks rows (a LockRows node) is a fetch; `rows`: only one that
    returned a row."""
    found = _DURATION.match(message)
    if found is None:
        return None
    document = json.loads(message[found.end() :])
    plan, query = document["Plan"], str(document.get("Query Text", ""))
    locked = any(node.get("Node Type") == "LockRows" for node in nodes(plan))
    if (locks and not locked) or marker not in " ".join(query.split()):
        return None
    if rows and not plan.get("Actual Rows"):
        return None
    return FetchPlan(float(found["ms"]), query, plan)


def explained(
    path: str, marker: str, locks: bool = True, rows: bool = False
) -> list[ExplainedFetch]:
    """The fetches a capture's worker wrote to `path`: the FetchExplainer's reading."""
    return [plan.fetch() for plan in read_plans(Path(path), marker, locks, rows)]


def read_plans(path: Path, marker: str, locks: bool = True, rows: bool = False) -> list[FetchPlan]:
    """The file's complete notices. It is read while the worker still appends to it, and a
    notice is complete only once its separator is written: what follows the last one is a
    notice being written (a plan of tens of kilobytes may be read half written), or
    nothing."""
    found = (parse_notice(text, marker, locks, rows) for text in _complete_notices(path))
    return [plan for plan in found if plan is not None]


def _complete_notices(path: Path) -> list[str]:
    """A plans file's notices whose separator is written (none if there is no file)."""
    if not path.exists():
        return []
    *complete, _being_written = path.read_text(encoding="utf-8").split(SEPARATOR)
    return complete


def read_stamped(
    path: Path, marker: str, locks: bool = True, rows: bool = False
) -> list[tuple[float, FetchPlan]]:
    """The fetches of a timed run's worker process (append_stamped's file), each with the
    moment its plan arrived."""
    found = []
    for text in _complete_notices(path):
        stamp, _, message = text.partition("\t")
        plan = parse_notice(message, marker, locks, rows)
        if plan is not None:
            found.append((float(stamp), plan))
    return found
