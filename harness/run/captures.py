"""Plan captures: each strategy's dequeue under EXPLAIN (ANALYZE, BUFFERS), on a backlog.

For every explain variant (a backlog shape) and strategy, the run's schema is built
afresh and the backlog loaded set-based, with statistics gathered. Then the dequeue,
the same text the workers run, is executed under EXPLAIN inside BEGIN ... ROLLBACK: it
locks a job, and nothing is claimed or changed. First once in text form, for people (it
doubles as the warm-up), then `repeat` times in JSON, the data every figure comes from.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg import sql

from harness.analysis.plans import Capture
from harness.errors import HarnessError, RunFailed
from harness.queues.base import ExplainedFetch, FetchExplainer, Queue, QueueRefused, Site
from harness.run.crew import Crew
from harness.scenario.model import Scenario
from harness.scenario.workload import BacklogRows, backlog_rows
from harness.server.connections import connect
from harness.server.schema import recreate

FETCH_TIMEOUT_S = 300


@dataclass(frozen=True)
class CaptureRequest:
    variant: str
    strategy: str
    slow: bool  # the scenario marks it as taking long; skipped unless asked for


class CaptureObserver(Protocol):
    def capture_started(self, request: CaptureRequest, executions: int) -> None: ...

    def capture_step(self) -> None: ...


def requests(
    scenario: Scenario, strategies: list[str] | None = None, variants: list[str] | None = None
) -> list[CaptureRequest]:
    """What to capture: every explain variant x strategy, narrowed by the filters."""
    assert scenario.explain is not None
    chosen = [
        CaptureRequest(variant.name, strategy, strategy in variant.slow)
        for variant in scenario.explain.variants
        if variants is None or variant.name in variants
        for strategy in scenario.explain_strategies
        if strategies is None or strategy in strategies
    ]
    return chosen


def capture_all(
    site: Site,
    scenario: Scenario,
    queues: dict[str, Queue],
    chosen: list[CaptureRequest],
    repeat: int,
    include_slow: bool,
    observer: CaptureObserver,
    params: dict[str, Any],
) -> Iterator[Capture]:
    """Each request's capture, in order; slow ones come back skipped unless asked for,
    and those the server does not allow come back skipped saying why."""
    with connect(site.dsn, schema=site.schema) as conn:
        for request in chosen:
            rows = backlog_rows(scenario, scenario.variant_backlog(request.variant))
            queue = queues[request.strategy]
            skipped = _skip_reason(conn, request, queue, include_slow)
            if skipped is not None:
                yield Capture(request.variant, queue.name, _backlog_shape(rows), skipped=skipped)
                continue
            observer.capture_started(request, repeat + 1)
            yield capture(conn, queue, request.variant, rows, repeat, observer, params)


def _skip_reason(
    conn: psycopg.Connection[Any], request: CaptureRequest, queue: Queue, include_slow: bool
) -> str | None:
    if request.slow and not include_slow:
        return "slow: pass --include-slow to capture it"
    return why_not_captured(conn, queue)


def why_not_captured(conn: psycopg.Connection[Any], queue: Queue) -> str | None:
    """A queue whose fetch is captured from its own worker (a library's: its explainer)
    is captured with auto_explain loaded in its worker's sessions, which only a
    superuser, or a role granted SET on session_preload_libraries, may ask for: on a
    managed server the capture is skipped with the reason, and the strategies the
    harness explains itself are captured as always."""
    if queue.explainer() is None:
        return None
    row = conn.execute("select has_parameter_privilege('session_preload_libraries', 'SET')")
    allowed = row.fetchone()
    if allowed is None or not allowed[0]:
        return (
            "no superuser: its fetch is captured with auto_explain in its sessions, which "
            "needs a superuser or SET granted on session_preload_libraries"
        )
    return (
        None
        if _has_auto_explain(conn)
        else (
            "no auto_explain: its fetch is captured with auto_explain in its sessions, and this "
            "server's build has no such module (a build without contrib: the pgserver wheel's 16)"
        )
    )


def _has_auto_explain(conn: psycopg.Connection[Any]) -> bool:
    """Can the server load auto_explain? Loaded in this session, which it leaves as it
    is: auto_explain logs nothing until its settings ask it to."""
    try:
        with conn.transaction():
            conn.execute("load 'auto_explain'")
    except psycopg.Error:
        return False
    return True


def capture(
    conn: psycopg.Connection[Any],
    queue: Queue,
    variant: str,
    rows: BacklogRows,
    repeat: int,
    observer: CaptureObserver,
    params: dict[str, Any],
) -> Capture:
    """Build the schema, load the backlog, EXPLAIN the dequeue: text once, JSON `repeat`."""
    began = time.perf_counter()
    recreate(conn, queue.site.schema, queue.outside_schemas())
    try:
        queue.install(conn, rows)
    except QueueRefused as refused:  # its library cannot run on this backlog here
        return Capture(variant, queue.name, _backlog_shape(rows), skipped=refused.reason)
    queue.load_backlog(conn, rows)
    result = Capture(
        variant, queue.name, _backlog_shape(rows), load_s=round(time.perf_counter() - began, 3)
    )
    explainer = queue.explainer()
    if explainer is not None:
        return _captured_fetches(explainer, result, repeat, observer)
    dequeue = queue.dequeue_sql()
    if dequeue is None:  # validation refuses it before anything runs (the traits)
        raise HarnessError(f"{queue.name} has no dequeue to explain: {queue.traits.explain}")
    # The text form is the first execution, which also warms up: one execution of a trap
    # variant takes ten seconds, and the backlog has just been loaded, so caches are warm.
    result.text = explain(conn, dequeue, "text", params)
    observer.capture_step()
    for _ in range(repeat):
        result.plans.append(explain(conn, dequeue, "json", params))
        observer.capture_step()
    return result


def _captured_fetches(
    queue: FetchExplainer, result: Capture, repeat: int, observer: CaptureObserver
) -> Capture:
    """A library's own fetches, `repeat` + 1 of them, each job held: the first (an idle
    worker's, on the backlog as loaded) is the text form, the rest the repetitions (the
    fetches of a busy worker, with the jobs before them still running)."""
    fetches = explained_fetches(queue, repeat + 1)
    first = fetches[0]
    result.text = f"{first.query}\n\n{json.dumps(first.explained, indent=2)}\n"
    result.plans = [fetch.explained for fetch in fetches[1:]]
    for _ in fetches:
        observer.capture_step()
    return result


def explained_fetches(queue: FetchExplainer, count: int) -> list[ExplainedFetch]:
    """The queue's capture worker, run until it has fetched `count` times under
    auto_explain; the plans come back through a file of the capture's own."""
    with tempfile.TemporaryDirectory(prefix="tqb-plans-") as folder:
        path = str(Path(folder) / "notices")
        with Crew(queue.capture_workers(count, path)) as crew:
            crew.go()
            deadline = time.monotonic() + FETCH_TIMEOUT_S
            while len(queue.explained(path)) < count:
                crew.fail_if_one_died()
                if time.monotonic() > deadline:
                    raise RunFailed(f"{count} fetches not explained within {FETCH_TIMEOUT_S} s")
                time.sleep(0.05)
            crew.stop()
        return queue.explained(path)[:count]


def explain(
    conn: psycopg.Connection[Any], statement: str, form: str, params: dict[str, Any]
) -> Any:
    """The statement, exactly as the workers run it, under EXPLAIN; rolled back."""
    query = sql.SQL("explain (analyze, buffers, format {}) ").format(sql.SQL(form)) + sql.SQL(
        statement  # type: ignore[arg-type]  # the queue's own statement, never user input
    )
    with conn.transaction(force_rollback=True):
        rows = conn.execute(query, params).fetchall()
    if form == "json":
        return rows[0][0]
    return "\n".join(row[0] for row in rows) + "\n"


def _backlog_shape(rows: BacklogRows) -> dict[str, int]:
    return {
        "registered_tenants": len(rows.tenant_ids),
        "idle_tenants": sum(1 for jobs in rows.jobs if jobs == 0),
        "queued_jobs": rows.total_jobs,
    }
