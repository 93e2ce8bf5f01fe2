"""What every library's queue does alike, whatever the library: its worker and capture
programs, its enqueuers, its ledger from the library's tables and the task log, its
captured fetches, and no dequeue statement or monitor of its own."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg

from harness.queues.base import (
    ExplainedFetch,
    FetchExplainer,
    Ledger,
    Program,
    ProgramMain,
    Site,
    WorkerReport,
)
from harness.queues.libraries import captures, common
from harness.scenario.arrivals import Arrivals
from harness.scenario.inputs import RunInputs
from harness.scenario.workload import BacklogRows


class LibraryQueue:
    """A library's queue: a subclass gives its programs' entry points, its spec (which
    carries the concurrency, the capture's plans file and the enqueuers' schedule), the
    mark of its fetch among a capture's statements, and its ledger's SQL block."""

    traits = common.LIBRARY_TRAITS
    label: str  # the library's name in its processes' names
    ledger_block: str  # libraries.sql: its jobs as its tables hold them
    fetch_marker: str
    fetch_locks = True  # its fetch is a statement that locks rows (captures.parse_notice)
    fetch_rows = False  # only a fetch that returned a job counts (it polls empty queues too)

    def __init__(self, name: str, site: Site, inputs: RunInputs, spec: Any) -> None:
        self.name, self.site, self.inputs, self.spec = name, site, inputs, spec

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        """The worker's and the enqueuer's entry points."""
        raise NotImplementedError

    def capture_concurrency(self, fetches: int) -> int:
        return fetches

    def processes(self, count: int) -> int:
        """How many worker processes share `count` workers: one, unless a tuned mapping
        runs several, as its library recommends for throughput."""
        return 1

    def workers(self, count: int) -> list[Program]:
        main = self.mains()[0]
        return [
            Program(
                "worker", main, replace(self.spec, concurrency=share), name=f"{self.label}-worker"
            )
            for share in common.shares(count, self.processes(count))
        ]

    def capture_workers(self, count: int, plans_file: str) -> list[Program]:
        """The worker of a plan capture (harness/queues/libraries/captures.py)."""
        concurrency = self.capture_concurrency(count)
        spec = replace(self.spec, concurrency=concurrency, plans_file=plans_file)
        return [Program("worker", self.mains()[0], spec, name=f"{self.label}-capture")]

    def explained(self, plans_file: str) -> list[ExplainedFetch]:
        return captures.explained(plans_file, self.fetch_marker, self.fetch_locks, self.fetch_rows)

    def capture_refused(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> str | None:
        return None

    def enqueuers(self, schedules: list[Arrivals]) -> list[Program]:
        numbered = common.numbered_schedules(self.inputs, schedules)
        main = self.mains()[1]
        return [Program("enqueuer", main, replace(self.spec, schedule=s)) for s in numbered]

    def ledger(self, conn: psycopg.Connection[Any], reports: list[WorkerReport]) -> Ledger:
        rows = common.library_rows(conn, self.ledger_block, self.ledger_params())
        return common.ledger_of(rows, reports)

    def ledger_params(self) -> dict[str, Any]:
        """The parameters of its ledger's block, if it has any."""
        return {}

    def outside_schemas(self) -> tuple[str, ...]:
        return ()  # everything in the run's schema, but for a library that says otherwise

    def dequeue_sql(self) -> str | None:
        return None  # its fetch is captured from its own worker instead (explainer)

    def explainer(self) -> FetchExplainer:
        return self

    def recovery(self) -> None:
        return None  # crashes, leases and retries are the harness's own (LIBRARY_TRAITS)

    def monitor(self, conn: psycopg.Connection[Any]) -> tuple[int, float] | None:
        return None
