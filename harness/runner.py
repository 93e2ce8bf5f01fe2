"""Scenario -> repetitions -> workers -> the books checked -> one row per job.

For every repetition the run's own schema is dropped and created afresh, so each starts
from the article's empty tables. Worker processes connect first; the clock starts when
all of them are ready, and the batches go in at their offsets from the main process.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import psycopg
from psycopg import sql

from harness.books import JobRow, check_books
from harness.errors import HarnessError, RunFailed
from harness.scenario import Scenario
from harness.strategies import Strategy, schema_blocks
from harness.workers import WorkerReport, WorkerSignals, WorkerSpec, worker_main
from harness.workload import (
    BacklogRows,
    Batch,
    backlog_rows,
    build_batches,
    durations_ms,
    tenant_classes,
)

_SPAWN = multiprocessing.get_context("spawn")
READY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60


@dataclass(frozen=True)
class Repetition:
    strategy: str
    workers: int
    index: int  # 1-based, counted per strategy and worker count

    @property
    def label(self) -> str:
        return f"{self.strategy} x{self.workers} #{self.index}"


@dataclass
class RepetitionResult:
    repetition: Repetition
    jobs: list[dict[str, Any]]
    empty_polls: int
    started_at: datetime
    finished_at: datetime


class Observer(Protocol):
    """Progress of a run, for whoever shows it (the CLI's progress bar)."""

    def repetition_started(self, repetition: Repetition, jobs: int) -> None: ...

    def jobs_done(self, done: int) -> None: ...

    def repetition_finished(self, result: RepetitionResult) -> None: ...


def plan(scenario: Scenario) -> list[Repetition]:
    """Repetitions interleaved (all strategies once, then again) so drift hits all alike."""
    return [
        Repetition(strategy=strategy, workers=workers, index=index)
        for index in range(1, scenario.repetitions + 1)
        for workers in scenario.workers
        for strategy in scenario.strategies
    ]


@contextmanager
def own_schema(dsn: str, schema: str) -> Iterator[None]:
    """The run's schema: refused if it exists already, dropped at the end."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("select 1 from pg_namespace where nspname = %s", (schema,))
        if exists.fetchone():
            raise HarnessError(
                f"schema {schema} exists already on this server; "
                "the harness only works in a schema it creates"
            )
        conn.execute(sql.SQL("create schema {}").format(sql.Identifier(schema)))
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))


def reset_schema(conn: psycopg.Connection, schema: str, strategy: Strategy) -> None:
    """Empty tables for a repetition: the article's schema, then the strategy's setup."""
    name = sql.Identifier(schema)
    conn.execute(sql.SQL("drop schema {} cascade").format(name))
    conn.execute(sql.SQL("create schema {}").format(name))
    conn.execute(sql.SQL("set search_path to {}").format(name))
    for block in schema_blocks().values():
        conn.execute(block.sql)  # type: ignore[arg-type]  # our own files, not user input
    if strategy.has("setup"):
        conn.execute(strategy.sql("setup"))  # type: ignore[arg-type]


def load_backlog(conn: psycopg.Connection, strategy: Strategy, rows: BacklogRows) -> None:
    """The pre-loaded queue, set-based in three statements, then statistics."""
    conn.execute(
        strategy.sql("backlog_tenants"),  # type: ignore[arg-type]
        {"tenant_ids": rows.tenant_ids, "rotation": rows.rotation},
    )
    conn.execute(
        strategy.sql("backlog_jobs"),  # type: ignore[arg-type]
        {"tenant_ids": rows.tenant_ids, "jobs": rows.jobs},
    )
    conn.execute(strategy.sql("after_load"))  # type: ignore[arg-type]


def run_repetition(
    dsn: str,
    schema: str,
    scenario: Scenario,
    strategy: Strategy,
    repetition: Repetition,
    observer: Observer,
) -> RepetitionResult:
    with psycopg.connect(dsn, autocommit=True, options="-c TimeZone=UTC") as conn:
        reset_schema(conn, schema, strategy)
        if scenario.backlog is not None:
            load_backlog(conn, strategy, backlog_rows(scenario, scenario.backlog))
        observer.repetition_started(repetition, scenario.total_jobs)
        spec = worker_spec(dsn, schema, strategy, scenario.poll_interval_ms, durations_ms(scenario))
        started_at = _now(conn)
        reports = _run_workers(conn, spec, repetition.workers, scenario, strategy, observer)
        finished_at = _now(conn)
        rows = read_books(conn, strategy)
    claims = [claim for report in reports for claim in report.claims]
    problems = check_books(scenario.total_jobs, rows, [job for job, _, _ in claims])
    if problems:
        raise RunFailed(f"{repetition.label}: the books do not balance: " + "; ".join(problems))
    jobs = _job_records(scenario, repetition, rows, reports)
    result = RepetitionResult(
        repetition=repetition,
        jobs=jobs,
        started_at=started_at,
        finished_at=finished_at,
        empty_polls=sum(report.empty_polls for report in reports),
    )
    observer.repetition_finished(result)
    return result


def _now(conn: psycopg.Connection) -> datetime:
    row = conn.execute("select clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def worker_spec(
    dsn: str,
    schema: str,
    strategy: Strategy,
    poll_interval_ms: float,
    durations: dict[int, float],
) -> WorkerSpec:
    """What a worker process needs: where to connect and the strategy's claim statements."""
    return WorkerSpec(
        dsn=dsn,
        schema=schema,
        dequeue=strategy.sql("dequeue"),
        start=strategy.sql("start"),
        complete=strategy.sql("complete"),
        served=strategy.sql("served") if strategy.has("served") else None,
        poll_interval_s=poll_interval_ms / 1000,
        durations_ms=durations,
    )


def _run_workers(
    conn: psycopg.Connection,
    spec: WorkerSpec,
    count: int,
    scenario: Scenario,
    strategy: Strategy,
    observer: Observer,
) -> list[WorkerReport]:
    signals = WorkerSignals(
        ready=_SPAWN.Array("b", count, lock=False),
        done=_SPAWN.Array("q", count, lock=False),
        stop=_SPAWN.Event(),
        reports=_SPAWN.Queue(),
    )
    processes = [
        _SPAWN.Process(
            target=worker_main,
            args=(index, spec, signals),
            daemon=True,
            name=f"harness-worker-{index}",
        )
        for index in range(count)
    ]
    try:
        for process in processes:
            process.start()
        _wait_ready(signals, processes)
        _feed_and_watch(conn, strategy, scenario, signals, processes, observer)
        signals.stop.set()
        reports = _collect_reports(signals, processes)
    finally:
        signals.stop.set()
        _end_processes(processes)
    return reports


def _wait_ready(signals: WorkerSignals, processes: list[Any]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while sum(signals.ready) < len(processes):
        _fail_if_a_worker_died(signals, processes)
        if time.monotonic() > deadline:
            raise RunFailed(f"workers not connected after {READY_TIMEOUT_S} s")
        time.sleep(0.01)


def _feed_and_watch(
    conn: psycopg.Connection,
    strategy: Strategy,
    scenario: Scenario,
    signals: WorkerSignals,
    processes: list[Any],
    observer: Observer,
) -> None:
    """Enqueue each batch at its offset; return when every job is done."""
    pending = build_batches(scenario)
    total = scenario.total_jobs
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        while pending and pending[0].at_s <= elapsed:
            enqueue(conn, strategy, pending.pop(0))
        done = sum(signals.done)
        observer.jobs_done(done)
        if done >= total and not pending:
            return
        _fail_if_a_worker_died(signals, processes)
        if elapsed > scenario.timeout_s:
            raise RunFailed(
                f"only {done} of {total} jobs done after the scenario's "
                f"timeout_s={scenario.timeout_s:g}"
            )
        until_next = pending[0].at_s - elapsed if pending else 0.05
        time.sleep(max(0.0, min(0.05, until_next)))


def enqueue(conn: psycopg.Connection, strategy: Strategy, batch: Batch) -> None:
    conn.execute(strategy.sql("enqueue"), {"tenant_ids": batch.tenant_ids})  # type: ignore[arg-type]


def _fail_if_a_worker_died(signals: WorkerSignals, processes: list[Any]) -> None:
    dead = [process for process in processes if process.exitcode is not None]
    if not dead:
        return
    try:
        report: WorkerReport = signals.reports.get(timeout=1)
        reason = report.error or "stopped early"
    except queue.Empty:
        reason = f"exit code {dead[0].exitcode}"
    raise RunFailed(f"a worker failed: {reason.strip().splitlines()[-1]}")


def _collect_reports(signals: WorkerSignals, processes: list[Any]) -> list[WorkerReport]:
    reports = []
    for _ in processes:
        try:
            reports.append(signals.reports.get(timeout=STOP_TIMEOUT_S))
        except queue.Empty as error:
            raise RunFailed(f"a worker did not stop within {STOP_TIMEOUT_S} s") from error
    failed = [report for report in reports if report.error]
    if failed:
        raise RunFailed(
            f"worker {failed[0].worker} failed: {failed[0].error.strip().splitlines()[-1]}"
        )  # type: ignore[union-attr]
    return reports


def _end_processes(processes: list[Any]) -> None:
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)


def read_books(conn: psycopg.Connection, strategy: Strategy) -> list[JobRow]:
    return [JobRow(*row) for row in conn.execute(strategy.sql("books"))]  # type: ignore[arg-type]


def _job_records(
    scenario: Scenario, repetition: Repetition, rows: list[JobRow], reports: list[WorkerReport]
) -> list[dict[str, Any]]:
    """One row per job: the contract that analysis, notebooks and checks read."""
    by_job = {
        job: (report.worker, claim_ms) for report in reports for job, _, claim_ms in report.claims
    }
    classes = tenant_classes(scenario)
    durations = durations_ms(scenario)
    return [
        {
            "scenario": scenario.name,
            "strategy": repetition.strategy,
            "workers": repetition.workers,
            "repetition": repetition.index,
            "job_id": row.job_id,
            "tenant_id": row.tenant_id,
            "tenant_class": classes[row.tenant_id],
            "enqueued_at": _iso(row.enqueued_at),
            "started_at": _iso(row.started_at),
            "finished_at": _iso(row.finished_at),
            "worker": by_job[row.job_id][0],
            "duration_ms": durations[row.tenant_id],
            "claim_ms": round(by_job[row.job_id][1], 4),
        }
        for row in rows
    ]


def _iso(moment: datetime | None) -> str:
    assert moment is not None  # the books check has made sure of it
    return moment.isoformat(timespec="microseconds")
