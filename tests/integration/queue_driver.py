"""A small driver of the queue seam, for the library adapters' tests until the repetition
drives every Queue: install, processes, the start signal, the books, the ledger."""

from __future__ import annotations

import multiprocessing
import queue as stdlib_queue
import time
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from harness.queues.base import Ledger, Queue, QueueEntry, Signals, Site, WorkerReport
from harness.run.books import JobRow, check_books
from harness.scenario.inputs import RunInputs
from harness.server.connections import connect
from harness.server.schema import create_marked

_SPAWN = multiprocessing.get_context("spawn")


@dataclass
class Driven:
    queue: Queue
    ledger: Ledger
    reports: list[WorkerReport]
    problems: list[str]  # what the books found; empty when they balance


def drive(entry: QueueEntry, dsn: str, schema: str, inputs: RunInputs, workers: int) -> Driven:
    """One repetition of `entry` on a fresh schema, dropped afterwards."""
    fresh_schema(dsn, schema)
    try:
        queue = entry.make(Site(dsn, schema), inputs)
        with connect(dsn, schema=schema, utc=True) as conn:
            queue.install(conn)
            reports = run_programs(queue, conn, inputs, workers)
            ledger = queue.ledger(conn, reports)
    finally:
        drop_schema(dsn, schema)
    return Driven(queue, ledger, reports, books(inputs, ledger))


def fresh_schema(dsn: str, schema: str) -> None:
    drop_schema(dsn, schema)
    with connect(dsn) as conn:
        create_marked(conn, schema)


def drop_schema(dsn: str, schema: str) -> None:
    with connect(dsn) as conn:
        conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))


def run_programs(queue: Queue, conn: Any, inputs: RunInputs, workers: int) -> list[WorkerReport]:
    programs = queue.workers(workers) + queue.enqueuers(inputs.schedules)
    signals = _signals(len(programs))
    processes = [
        _SPAWN.Process(target=p.main, args=(i, p.spec, signals), daemon=True, name=p.name)
        for i, p in enumerate(programs)
    ]
    for process in processes:
        process.start()
    try:
        _wait(lambda: sum(signals.ready) == len(programs), processes, signals, 120, "ready")
        if inputs.backlog is not None:
            queue.load_backlog(conn, inputs.backlog)
        signals.start.set()
        total = inputs.total_jobs
        _wait(
            lambda: sum(signals.done) >= total,
            processes,
            signals,
            inputs.scenario.timeout_s,
            "done",
        )
        signals.stop.set()
        return [signals.reports.get(timeout=60) for _ in programs]
    finally:
        signals.stop.set()
        signals.start.set()
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()


def _wait(
    condition: Any, processes: list[Any], signals: Signals, timeout_s: float, what: str
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        dead = [p for p in processes if p.exitcode is not None]
        if dead:
            raise RuntimeError(f"{dead[0].name} died before {what}: {_error(signals)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"not {what} after {timeout_s} s: {list(signals.done)} done")
        time.sleep(0.02)


def _error(signals: Signals) -> str:
    try:
        report: WorkerReport = signals.reports.get(timeout=5)
    except stdlib_queue.Empty:
        return "no report"
    return report.error or "no error reported"


def _signals(count: int) -> Signals:
    return Signals(
        ready=_SPAWN.Array("b", count, lock=False),
        done=_SPAWN.Array("q", count, lock=False),
        holding=_SPAWN.Array("q", count, lock=False),
        start=_SPAWN.Event(),
        stop=_SPAWN.Event(),
        reports=_SPAWN.Queue(),
    )


def books(inputs: RunInputs, ledger: Ledger) -> list[str]:
    rows = [
        JobRow(r.job_id, r.tenant_id, r.status, r.enqueued_at, r.started_at, r.finished_at)
        for r in ledger.records
    ]
    return check_books(inputs.total_jobs, rows, ledger.claims)


def job_rows(
    name: str, inputs: RunInputs, workers: int, index: int, ledger: Ledger
) -> list[dict[str, Any]]:
    """jobs.csv's columns for one driven repetition."""
    return [
        {
            "scenario": inputs.scenario.name,
            "strategy": name,
            "workers": workers,
            "repetition": index,
            "job_id": r.job_id,
            "tenant_id": r.tenant_id,
            "tenant_class": inputs.classes[r.tenant_id],
            "enqueued_at": r.enqueued_at,
            "started_at": r.started_at,
            "finished_at": r.finished_at,
            "worker": r.worker,
            "duration_ms": inputs.workload.duration_ms(r.job_id),
            "claim_ms": r.claim_ms,
        }
        for r in ledger.records
    ]


def main() -> None:
    """Drive a scenario's library strategies; write their jobs as jobs.csv has them."""
    import argparse
    import csv
    import json
    from pathlib import Path

    import yaml

    from harness.queues import libraries
    from harness.scenario.model import Scenario
    from harness.server.providers import choose_provider, open_server

    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", type=Path)
    parser.add_argument("out", type=Path)
    arguments = parser.parse_args()
    scenario = Scenario.model_validate(yaml.safe_load(arguments.scenario.read_text()))
    inputs = RunInputs.of(scenario)
    names = [name for name in scenario.strategies if name in libraries.MAPPINGS]
    entries = {entry.name: entry for entry in libraries.entries()}
    rows: list[dict[str, Any]] = []
    provenance = {}
    with open_server(choose_provider("embedded", None, {}, False)) as server:
        for index in range(1, scenario.repetitions + 1):
            for name in names:
                for workers in scenario.workers:
                    driven = drive(entries[name], server.dsn, "real_queues", inputs, workers)
                    if driven.problems:
                        raise SystemExit(
                            f"{name} #{index}: the books do not balance: {driven.problems}"
                        )
                    rows += job_rows(name, inputs, workers, index, driven.ledger)
                    provenance[name] = driven.queue.provenance()
                    print(name, index, "balanced", len(driven.ledger.records), flush=True)
    arguments.out.mkdir(parents=True, exist_ok=True)
    with (arguments.out / "jobs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (arguments.out / "provenance.json").write_text(json.dumps(provenance, indent=2, default=str))


if __name__ == "__main__":
    main()
