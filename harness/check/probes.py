"""The probes of `harness check`, measured: plan figures, then timed claims in that state."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from functools import partial
from pathlib import Path

import psycopg

from harness.check.verdict import Probe
from harness.errors import HarnessError
from harness.queues.base import Site
from harness.queues.sql.claim import ClaimSql, claim
from harness.queues.sql.queue import SqlQueue
from harness.queues.sql.session import Plain
from harness.queues.sql.strategies import Strategy
from harness.run.captures import CaptureObserver, capture, requests
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.scenario.workload import backlog_rows
from harness.server.connections import connect
from harness.sqlfiles import builtin_blocks

WARM_UP = 8
REFERENCE_SQL = builtin_blocks("harness.check", "reference.sql")["reference"].sql


def probed_strategies(
    listed: list[str],
    known: Collection[str],
    theirs: dict[str, Path],
    named: Collection[str] = (),
    strategies_dir: Path | None = None,
) -> list[str]:
    """The strategies a check probes: those `named` (--strategy), else every one of
    --strategies-dir (`theirs`, the user's SQL: what the check is installed to guard),
    else those the probe scenario lists. Refused in one line where a name is unknown, or
    where a --strategies-dir is given and none of its strategies would be measured."""
    unknown = [name for name in named if name not in known]
    if unknown:
        raise HarnessError(
            f"--strategy: no strategy named {', '.join(unknown)}; the built-ins and those of "
            f"--strategies-dir are {', '.join(sorted(known))}"
        )
    chosen = list(dict.fromkeys(named)) or list(theirs) or listed
    if strategies_dir is not None and not set(chosen) & set(theirs):
        held = f"its strategies are {', '.join(theirs)}" if theirs else "it holds no .sql file"
        raise HarnessError(
            f"{strategies_dir}: --strategies-dir: the check would measure none of its "
            f"strategies ({held}); name one with --strategy, or leave --strategy out"
        )
    return chosen


def measure(
    site: Site,
    probes: Scenario,
    strategies: dict[str, Strategy],
    samples: int,
    observer: CaptureObserver,
) -> Iterator[Probe]:
    """Every probe of the probe scenario: plan figures, then timed claims in that state."""
    inputs = RunInputs.of(probes)
    with connect(site.dsn, schema=site.schema) as conn:
        for request in requests(probes):
            strategy = strategies[request.strategy]
            queue = SqlQueue(strategy, site, inputs)
            rows = backlog_rows(probes, probes.variant_backlog(request.variant))
            observer.capture_started(request, 2)
            captured = capture(conn, queue, request.variant, rows, 1, observer, inputs.params)
            figures = captured.figures[-1]
            one_claim = partial(
                claim, Plain(conn), ClaimSql.of(strategy), inputs.params, own_transaction=False
            )
            claim_ms, reference_ms = time_claims(conn, one_claim, samples)
            yield Probe(
                strategy.name,
                request.variant,
                figures.shared_buffers,
                figures.outer_scan,
                figures.jobs_scan,
                figures.rows_removed,
                list(figures.flags),
                claim_ms,
                reference_ms,
            )


def time_claims(
    conn: psycopg.Connection, claim: Callable[[], object], samples: int
) -> tuple[list[float], list[float]]:
    """Claims and reference queries, alternately, each in a transaction rolled back."""

    def timed(action: Callable[[], object]) -> float:
        began = time.perf_counter()
        with conn.transaction(force_rollback=True):
            action()
        return (time.perf_counter() - began) * 1000

    def reference() -> object:
        return conn.execute(REFERENCE_SQL, {"job_id": 1}).fetchone()  # type: ignore[arg-type]

    # Warm-up: past psycopg's prepare threshold (5), so every timed execution runs the
    # same prepared statement, and with caches filled.
    for _ in range(WARM_UP):
        timed(reference), timed(claim)
    pairs = [(timed(reference), timed(claim)) for _ in range(samples)]
    return [claim_ms for _, claim_ms in pairs], [ref_ms for ref_ms, _ in pairs]
