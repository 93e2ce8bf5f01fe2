"""Plan captures of a scenario's library strategies: each explain variant's backlog
through the library's own enqueue, then its own worker's fetches under auto_explain
(harness/queues/libraries/captures.py). `harness explain` EXPLAINs a queue's dequeue
statement, which a library does not have; this is the libraries' way until the two meet.

    python -m tests.integration.capture_driver tests/integration/real-queues-plans.yaml OUT
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml
from psycopg import sql

from harness.queues import libraries
from harness.queues.base import Site
from harness.queues.libraries.captures import LibraryCapture, capture
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.scenario.workload import backlog_rows
from harness.server.connections import connect
from harness.server.providers import choose_provider, open_server
from harness.server.schema import create_marked

SCHEMA = "real_queue_plans"


def fresh_schema(dsn: str, schema: str) -> None:
    drop_schema(dsn, schema)
    with connect(dsn) as conn:
        create_marked(conn, schema)


def drop_schema(dsn: str, schema: str) -> None:
    with connect(dsn) as conn:
        conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))


def capture_variant(
    dsn: str, scenario: Scenario, name: str, variant: str, fetches: int
) -> LibraryCapture:
    backlog = scenario.variant_backlog(variant)
    reshaped = scenario.model_copy(update={"backlog": backlog})
    inputs = RunInputs.of(reshaped)
    entry = next(entry for entry in libraries.entries() if entry.name == name)
    fresh_schema(dsn, SCHEMA)
    try:
        queue = entry.make(Site(dsn, SCHEMA), inputs)
        return capture(
            queue, Site(dsn, SCHEMA), inputs, backlog_rows(reshaped, backlog), fetches, variant
        )
    finally:
        drop_schema(dsn, SCHEMA)


def summary(result: LibraryCapture) -> dict[str, Any]:
    figures = [plan.figures() for plan in result.plans]
    later = figures[1:] or figures
    return {
        "strategy": result.strategy,
        "variant": result.variant,
        "first_ms": figures[0]["duration_ms"],
        "first_buffers": figures[0]["shared_buffers"],
        "later_ms_median": statistics.median(f["duration_ms"] for f in later),
        "later_buffers_max": max(f["shared_buffers"] for f in later),
        "later_rows_removed_max": max(f["rows_removed"] for f in later),
        "scans": sorted({scan for f in figures for scan in f["scans"]}),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", type=Path)
    parser.add_argument("out", type=Path)
    arguments = parser.parse_args()
    scenario = Scenario.model_validate(yaml.safe_load(arguments.scenario.read_text()))
    assert scenario.explain is not None
    names = [name for name in scenario.strategies if name in libraries.MAPPINGS]
    fetches = scenario.explain.repeat + 1
    results = []
    with open_server(choose_provider("embedded", None, {}, False)) as server:
        for variant in [v.name for v in scenario.explain.variants]:
            for name in names:
                result = capture_variant(server.dsn, scenario, name, variant, fetches)
                results.append(result)
                print(json.dumps(summary(result)), flush=True)
    arguments.out.mkdir(parents=True, exist_ok=True)
    (arguments.out / "captures.json").write_text(
        json.dumps([asdict(result) for result in results], indent=1)
    )


if __name__ == "__main__":
    main()
