"""A library's fetches explained while a snapshot is held (`long_transaction.explain_fetches`).

A library's fetch is no statement the long transaction's sampler could EXPLAIN (its
dequeue_buffers stay empty for one), so its own timed workers run with auto_explain on, as
a plan capture's do but holding nothing (harness/queues/contract/captures.py): each
worker process appends the plans it is sent, stamped with their arrival, to a file of its
own in a folder of the repetition's. Once the workers have stopped, the fetches among them
become fetch-plans.csv's rows, each placed before, during or after the hold
(harness/analysis/held_fetches.py).

Where they cannot be explained, the run goes on without, and run.json's hold says why:
a server that refuses auto_explain to this role, a fleet's workers on other hosts, a
strategy whose fetch cannot be told among its plans or that is the harness's own.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg

from harness.analysis.held_fetches import fetch_figures, phase_of
from harness.queues.base import FetchExplainer, Program, Queue
from harness.run.captures import why_not_captured
from harness.run.crew import LOCAL, Placement, Workers
from harness.run.long_transaction import HoldRecord
from harness.scenario.inputs import RunInputs

OWN_STRATEGY = "the harness's own strategy: its dequeue is explained at each sample instead"
FLEET = "a fleet's workers run on other hosts, whose plans the harness does not gather"


class ExplainedFetches:
    """The timed workers of a FetchExplainer with auto_explain on, and their fetches read
    back; the folder of their plans removed on close."""

    def __init__(self, explainer: FetchExplainer, gated: bool = False) -> None:
        """`gated`: a horizon's, whose holder opens the gate at its moments."""
        self.explainer = explainer
        self.folder = tempfile.mkdtemp(prefix="tqb-held-plans-")
        self.gate = str(Path(self.folder) / "gate") if gated else None

    def workers(self, count: int) -> list[Program]:
        return self.explainer.explained_workers(count, self.folder, self.gate)

    def record(self, hold: HoldRecord) -> None:
        """The fetches as rows of fetch-plans.csv (but for the repetition's keys) in the
        hold's record, on its clock and placed in its phases."""
        assert hold.origin is not None, "the clock started"
        rows = [
            {"at_s": round(timed.at - hold.origin, 4)}
            | fetch_figures(
                timed.fetch.explained[0]["Plan"], timed.fetch.explained[0]["Execution Time"]
            )
            for timed in self.explainer.timed_fetches(self.folder)
        ]
        if rows:
            at_s = pd.Series([row["at_s"] for row in rows])
            for row, phase in zip(rows, phase_of(at_s, hold.began_s, hold.ended_s), strict=True):
                row["phase"] = phase
        hold.keep("fetch-plans.csv", rows)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def explained_fetches(
    queue: Queue, inputs: RunInputs, placement: Placement, conn: psycopg.Connection[Any]
) -> ExplainedFetches | str | None:
    """The repetition's explained workers, or why its fetches cannot be explained; None
    when the scenario does not ask for them."""
    hold = inputs.long_transaction
    if hold is None or not hold.explain_fetches:
        return None
    explainer = queue.explainer()
    if explainer is None:
        if queue.dequeue_sql() is not None and inputs.horizon is not None:
            return None  # the holder explains its dequeue at the horizon's moments
        return OWN_STRATEGY if queue.dequeue_sql() is not None else str(queue.traits.explain)
    if placement is not LOCAL:
        return FLEET
    refused = why_not_captured(conn, queue)
    gated = inputs.horizon is not None
    return refused if refused is not None else ExplainedFetches(explainer, gated)


def workers_of(queue: Queue, explained: ExplainedFetches | str | None) -> Workers:
    """The factory of the repetition's workers: the explained ones where there are."""
    return explained.workers if isinstance(explained, ExplainedFetches) else queue.workers
