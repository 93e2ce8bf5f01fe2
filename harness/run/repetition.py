"""Scenario -> repetitions -> workers -> the books checked -> one row per job.

For every repetition the run's own schema is dropped and created afresh, so each starts
from the article's empty tables. Worker and enqueuer processes connect first; then the
backlog, if any, is loaded, the clock starts, workers begin to claim and enqueuers insert
their batches at their offsets.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import psycopg
from psycopg import sql

from harness.errors import RunFailed
from harness.queues.sql.strategies import Strategy, schema_blocks
from harness.queues.sql.worker import (
    EnqueuerSpec,
    WorkerReport,
    WorkerSignals,
    WorkerSpec,
    enqueuer_main,
    worker_main,
)
from harness.run.books import JobRow, check_books
from harness.run.faults import (
    FaultDriver,
    FaultOutcome,
    books_status,
    check_strategy,
    create_tables,
    fault_books,
    fault_spec,
    runner_connection,
    tenant_class,
)
from harness.run.long_transaction import Holder, HoldRecord
from harness.scenario.distributions import Duration, job_duration_ms
from harness.scenario.model import Scenario
from harness.scenario.workload import (
    BacklogRows,
    Batch,
    Workload,
    backlog_rows,
    build_batches,
    generate,
    tenant_classes,
    tenant_durations,
)
from harness.server.connections import connect
from harness.server.schema import create_marked

_SPAWN = multiprocessing.get_context("spawn")
READY_TIMEOUT_S = 60
MONITOR_INTERVAL_S = 0.02
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
    lost_races: int = 0
    monitor: list[tuple[float, int, float]] = field(default_factory=list)  # s, stranded, age s
    faults: dict[str, Any] | None = None  # what the faults did (harness/faults.py)
    books: str = "balanced"  # or "stuck: N" (jobs held forever by killed workers)
    hold: HoldRecord | None = None  # the scenario's long_transaction, if it has one


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


def reset_schema(conn: psycopg.Connection, schema: str, strategy: Strategy) -> None:
    """Empty tables for a repetition: the article's schema, then the strategy's setup."""
    name = sql.Identifier(schema)
    conn.execute(sql.SQL("drop schema {} cascade").format(name))
    create_marked(conn, schema)
    conn.execute(sql.SQL("set search_path to {}").format(name))
    for block in schema_blocks().values():
        conn.execute(block.sql)  # type: ignore[arg-type]  # our own files, not user input
    if strategy.has("setup"):
        conn.execute(strategy.sql("setup"))  # type: ignore[arg-type]


def load_backlog(
    conn: psycopg.Connection,
    strategy: Strategy,
    rows: BacklogRows,
    params: dict[str, Any] | None = None,
) -> None:
    """The pre-loaded queue, set-based in three statements, then statistics."""
    values = {**(params or {}), **rows.params()}
    for block in ("backlog_tenants", "backlog_jobs", "after_load"):
        conn.execute(strategy.sql(block), values)  # type: ignore[arg-type]


def run_repetition(
    dsn: str,
    schema: str,
    scenario: Scenario,
    strategy: Strategy,
    repetition: Repetition,
    observer: Observer,
    restart: Callable[[], None] | None = None,
) -> RepetitionResult:
    if not scenario.uses_faults:
        return _run_plain(dsn, schema, scenario, strategy, repetition, observer)
    return _run_with_faults(dsn, schema, scenario, strategy, repetition, observer, restart)


def _run_plain(
    dsn: str,
    schema: str,
    scenario: Scenario,
    strategy: Strategy,
    repetition: Repetition,
    observer: Observer,
) -> RepetitionResult:
    with connect(dsn, utc=True) as conn:
        reset_schema(conn, schema, strategy)
        workload = generate(scenario)
        observer.repetition_started(repetition, workload.total_jobs)
        started_at = _now(conn)
        crew = Crew.for_repetition(dsn, schema, scenario, strategy, repetition.workers)
        with _holder(dsn, schema, scenario, strategy, crew) as holder:
            reports, samples = crew.run(conn, scenario, workload, strategy, observer)
        finished_at = _now(conn)
        rows = read_books(conn, strategy)
    claims = [claim for report in reports for claim in report.claims]
    problems = check_books(workload.total_jobs, rows, [job for job, _, _ in claims])
    if problems:
        raise RunFailed(f"{repetition.label}: the books do not balance: " + "; ".join(problems))
    result = RepetitionResult(
        repetition=repetition,
        jobs=_job_records(scenario, repetition, rows, reports),
        started_at=started_at,
        finished_at=finished_at,
        empty_polls=sum(report.empty_polls for report in reports),
        lost_races=sum(report.lost_races for report in reports),
        monitor=samples,
        hold=holder.record if holder is not None else None,
    )
    observer.repetition_finished(result)
    return result


def _run_with_faults(
    dsn: str,
    schema: str,
    scenario: Scenario,
    strategy: Strategy,
    repetition: Repetition,
    observer: Observer,
    restart: Callable[[], None] | None,
) -> RepetitionResult:
    """As _run_plain, with the fault tables, the fault driver and the fault books."""
    check_strategy(strategy)
    with connect(dsn, utc=True) as conn:
        reset_schema(conn, schema, strategy)
        create_tables(conn, scenario)
        workload = generate(scenario)
        observer.repetition_started(repetition, workload.total_jobs)
        started_at = _now(conn)
        crew = Crew.for_repetition(dsn, schema, scenario, strategy, repetition.workers)
        driver = FaultDriver(scenario, dsn, schema, runner_connection(dsn, schema), restart)
        try:
            reports, samples = crew.run(conn, scenario, workload, strategy, observer, driver)
        finally:
            driver.close()
    with runner_connection(dsn, schema) as conn:  # a fresh one: the server may have restarted
        finished_at = _now(conn)
        rows = read_books(conn, strategy)
        outcome = fault_books(conn, workload.total_jobs, rows, driver, reports)
    if outcome.books.problems:
        raise RunFailed(
            f"{repetition.label}: the books do not balance: " + "; ".join(outcome.books.problems)
        )
    result = RepetitionResult(
        repetition=repetition,
        jobs=_fault_job_records(scenario, repetition, rows, reports, outcome),
        started_at=started_at,
        finished_at=finished_at,
        empty_polls=sum(report.empty_polls for report in reports),
        lost_races=sum(report.lost_races for report in reports),
        monitor=samples,
        faults=outcome.summary,
        books=books_status(outcome.books),
    )
    observer.repetition_finished(result)
    return result


def _holder(
    dsn: str, schema: str, scenario: Scenario, strategy: Strategy, crew: Crew
) -> Holder | nullcontext[None]:
    """The scenario's long transaction, timed from the crew's start; nothing without one."""
    if scenario.long_transaction is None:
        return nullcontext()
    return Holder(
        dsn,
        schema,
        scenario.long_transaction,
        crew.signals.start,
        strategy.sql("dequeue"),
        scenario_params(scenario),
    )


def _now(conn: psycopg.Connection) -> datetime:
    row = conn.execute("select clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def worker_spec(
    dsn: str,
    schema: str,
    strategy: Strategy,
    poll_interval_ms: float,
    seed: int,
    durations: dict[int, Duration],
    params: dict[str, Any] | None = None,
) -> WorkerSpec:
    """What a worker process needs: where to connect and the strategy's claim statements."""

    def optional(block: str) -> str | None:
        return strategy.sql(block) if strategy.has(block) else None

    return WorkerSpec(
        dsn=dsn,
        schema=schema,
        dequeue=strategy.sql("dequeue"),
        start=strategy.sql("start"),
        complete=strategy.sql("complete"),
        served=optional("served"),
        retire=optional("retire"),
        hold_lock=strategy.hold_lock,
        poll_interval_s=poll_interval_ms / 1000,
        seed=seed,
        durations=durations,
        params=params or {},
    )


def scenario_params(scenario: Scenario) -> dict[str, Any]:
    """Parameters every statement of a run may use, beside its own."""
    return {"tenant_cap": scenario.tenant_cap or 2**31 - 1}


@dataclass
class Crew:
    """The processes of one repetition: workers, then spare slots for the replacements of
    killed workers, then enqueuers, all sharing their signals."""

    signals: WorkerSignals
    processes: list[Any]
    spec: WorkerSpec | None = None
    current: dict[int, int] = field(default_factory=dict)  # scenario's worker -> its slot
    killed: set[int] = field(default_factory=set)  # slots killed on purpose
    spare: int = 0  # the next free slot for a replacement

    @classmethod
    def for_repetition(
        cls, dsn: str, schema: str, scenario: Scenario, strategy: Strategy, workers: int
    ) -> Crew:
        spec = worker_spec(
            dsn,
            schema,
            strategy,
            scenario.poll_interval_ms,
            scenario.seed,
            tenant_durations(scenario),
            scenario_params(scenario),
        )
        if scenario.uses_faults:
            spec = replace(spec, faults=fault_spec(scenario))
        spares = len(scenario.faults.crashes) if scenario.faults is not None else 0
        schedules = enqueuer_schedules(scenario, strategy)
        signals = _signals(workers + spares + len(schedules))
        processes = _worker_processes(spec, signals, workers)
        processes += [
            _SPAWN.Process(
                target=enqueuer_main,
                args=(
                    workers + spares + index,
                    EnqueuerSpec(dsn, schema, strategy.sql("enqueue"), batches),
                    signals,
                ),
                daemon=True,
                name=f"harness-enqueuer-{index}",
            )
            for index, batches in enumerate(schedules)
        ]
        current = {index: index for index in range(workers)}
        return cls(signals, processes, spec, current, spare=workers)

    def kill_mid_job(self, worker: int) -> tuple[int, int] | None:
        """SIGKILL the worker if it is working on a job: (its slot, the job), else None."""
        slot = self.current[worker]
        process = self._process(slot)
        job = int(self.signals.holding[slot])
        if job == 0 or process.exitcode is not None:
            return None
        os.kill(process.pid, signal.SIGKILL)
        self.killed.add(slot)
        process.join(timeout=5)
        return slot, job

    def replace(self, worker: int) -> None:
        """A supervisor's move: a new worker process in the next spare slot."""
        assert self.spec is not None
        process = _worker_process(self.spare, self.spec, self.signals)
        process.start()
        self.processes.append(process)
        self.current[worker], self.spare = self.spare, self.spare + 1

    def holding(self) -> int:
        """How many workers are working on a claimed job right now."""
        return sum(1 for job in self.signals.holding if job)

    def _process(self, slot: int) -> Any:
        return next(p for p in self.processes if p.name == f"harness-worker-{slot}")

    @classmethod
    def workers_only(cls, spec: WorkerSpec, workers: int) -> Crew:
        """Workers without enqueuers, for a queue loaded beforehand (see drain)."""
        signals = _signals(workers)
        return cls(signals, _worker_processes(spec, signals, workers))

    def run(
        self,
        conn: psycopg.Connection,
        scenario: Scenario,
        workload: Workload,
        strategy: Strategy,
        observer: Observer,
        driver: FaultDriver | None = None,
    ) -> tuple[list[WorkerReport], list[tuple[float, int, float]]]:
        try:
            self._start_processes()
            # The backlog goes in once every process is connected, just before the clock
            # starts, so that its waits do not include the processes' start-up.
            if scenario.backlog is not None:
                load_backlog(
                    conn,
                    strategy,
                    backlog_rows(scenario, scenario.backlog),
                    scenario_params(scenario),
                )
            self.signals.start.set()
            samples = self._watch(conn, scenario, workload.total_jobs, strategy, observer, driver)
            self.signals.stop.set()
            return self._collect_reports(), samples
        finally:
            self.signals.stop.set()
            self.signals.start.set()  # lets a process still waiting for the start see stop
            _end_processes(self.processes)

    def drain(self, total: int, timeout_s: float) -> list[WorkerReport]:
        """Workers claim from the queue as it stands until `total` jobs are done."""
        try:
            self._start_processes()
            self.signals.start.set()
            start = time.monotonic()
            while (done := sum(self.signals.done)) < total:
                self._fail_if_one_died()
                if time.monotonic() - start > timeout_s:
                    raise RunFailed(f"only {done} of {total} jobs done after {timeout_s:g} s")
                time.sleep(MONITOR_INTERVAL_S)
            self.signals.stop.set()
            return self._collect_reports()
        finally:
            self.signals.stop.set()
            self.signals.start.set()
            _end_processes(self.processes)

    def _start_processes(self) -> None:
        for process in self.processes:
            process.start()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while sum(self.signals.ready) < len(self.processes):
            self._fail_if_one_died()
            if time.monotonic() > deadline:
                raise RunFailed(f"workers not connected after {READY_TIMEOUT_S} s")
            time.sleep(0.01)

    def _watch(
        self,
        conn: psycopg.Connection,
        scenario: Scenario,
        total: int,
        strategy: Strategy,
        observer: Observer,
        driver: FaultDriver | None = None,
    ) -> list[tuple[float, int, float]]:
        """Progress until every job is done; the strategy's monitor sampled meanwhile."""
        start, samples = time.monotonic(), []
        monitor = strategy.sql("monitor") if strategy.has("monitor") else None
        while True:
            elapsed = time.monotonic() - start
            if driver is not None:
                driver.tick(self, elapsed)
                conn = driver.conn  # a new one after a server restart
            if monitor is not None:
                row = conn.execute(monitor).fetchone()  # type: ignore[arg-type]
                samples.append((round(elapsed, 4), int(row[0]), float(row[1] or 0)))  # type: ignore[index]
            done = sum(self.signals.done)
            observer.jobs_done(done)
            if driver.finished(total) if driver is not None else done >= total:
                return samples
            self._fail_if_one_died()
            if elapsed > scenario.timeout_s:
                raise RunFailed(
                    f"only {done} of {total} jobs done after the scenario's "
                    f"timeout_s={scenario.timeout_s:g}"
                )
            time.sleep(MONITOR_INTERVAL_S)

    def _fail_if_one_died(self) -> None:
        dead = [
            process
            for process in self.processes
            if process.exitcode is not None and not self._killed(process)
        ]
        if not dead:
            return
        try:
            report: WorkerReport = self.signals.reports.get(timeout=1)
            reason = report.error or "stopped early"
        except queue.Empty:
            reason = f"exit code {dead[0].exitcode}"
        raise RunFailed(f"{dead[0].name} failed: {reason.strip().splitlines()[-1]}")

    def _killed(self, process: Any) -> bool:
        return any(process.name == f"harness-worker-{slot}" for slot in self.killed)

    def _collect_reports(self) -> list[WorkerReport]:
        reports = []
        for _ in [process for process in self.processes if not self._killed(process)]:
            try:
                reports.append(self.signals.reports.get(timeout=STOP_TIMEOUT_S))
            except queue.Empty as error:
                raise RunFailed(f"a worker did not stop within {STOP_TIMEOUT_S} s") from error
        failed = [report for report in reports if report.error]
        if failed:
            reason = (failed[0].error or "").strip().splitlines()[-1]
            raise RunFailed(f"process {failed[0].worker} failed: {reason}")
        return reports


def _signals(processes: int) -> WorkerSignals:
    return WorkerSignals(
        ready=_SPAWN.Array("b", processes, lock=False),
        done=_SPAWN.Array("q", processes, lock=False),
        holding=_SPAWN.Array("q", processes, lock=False),
        start=_SPAWN.Event(),
        stop=_SPAWN.Event(),
        reports=_SPAWN.Queue(),
    )


def _worker_processes(spec: WorkerSpec, signals: WorkerSignals, workers: int) -> list[Any]:
    return [_worker_process(index, spec, signals) for index in range(workers)]


def _worker_process(index: int, spec: WorkerSpec, signals: WorkerSignals) -> Any:
    return _SPAWN.Process(
        target=worker_main, args=(index, spec, signals), daemon=True, name=f"harness-worker-{index}"
    )


def enqueuer_schedules(
    scenario: Scenario, strategy: Strategy
) -> list[list[tuple[float, dict[str, Any]]]]:
    """The batches dealt round-robin to the scenario's enqueuers, each list by offset."""
    batches = build_batches(scenario)
    schedules: list[list[tuple[float, dict[str, Any]]]] = [
        [] for _ in range(min(scenario.enqueuers, max(len(batches), 1)))
    ]
    for index, batch in enumerate(batches):
        schedules[index % len(schedules)].append((batch.at_s, batch_params(scenario, batch)))
    return schedules


def batch_params(scenario: Scenario, batch: Batch) -> dict[str, Any]:
    return {
        **scenario_params(scenario),
        "tenant_ids": batch.tenant_ids,
        "weights": batch.weights,
        "priorities": batch.priorities,
    }


def _end_processes(processes: list[Any]) -> None:
    for process in processes:
        if process.pid is None:
            continue  # never started: a start before it failed, and that error matters
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
    if not reports:  # the fault path fills worker and claim latency itself
        by_job = {row.job_id: (-1, 0.0) for row in rows}
    classes = tenant_classes(scenario)
    durations = tenant_durations(scenario)
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
            "duration_ms": job_duration_ms(scenario.seed, row.job_id, durations[row.tenant_id]),
            "claim_ms": round(by_job[row.job_id][1], 4),
        }
        for row in rows
    ]


def _fault_job_records(
    scenario: Scenario,
    repetition: Repetition,
    rows: list[JobRow],
    reports: list[WorkerReport],
    outcome: FaultOutcome,
) -> list[dict[str, Any]]:
    """As _job_records, for jobs finished (done or dead): the worker from the claim log
    (killed workers never report), retried and dead jobs in classes of their own; a
    claim latency only where a live worker reported it. Stuck jobs are in run.json."""
    finished = [row for row in rows if row.status in ("done", "dead")]
    latency = {job: ms for report in reports for job, _, ms in report.claims}
    records = _job_records(scenario, repetition, finished, [])
    for record in records:
        job = record["job_id"]
        record["worker"] = outcome.claims[job]
        record["claim_ms"] = round(latency[job], 4) if job in latency else None
        record["tenant_class"] = tenant_class(record["tenant_class"], job, outcome.failures)
    return records


def _iso(moment: datetime | None) -> str:
    assert moment is not None  # the books check has made sure of it
    return moment.isoformat(timespec="microseconds")
