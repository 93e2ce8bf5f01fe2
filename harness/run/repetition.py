"""One repetition: a queue driven through its seam, the books checked, one row per job.

Every repetition, whatever the queue and whether or not the scenario has faults, takes
the same path: the run's schema dropped and created afresh, the queue installed in it,
the crew of processes started and connected, the backlog loaded, the clock started; then
the watch loop ticks the fault driver (a null one without faults), samples the queue's
monitor, shows progress, until the driver says the run is over; then the workers stop,
the queue's ledger is read and the books are checked.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import psycopg

from harness.errors import HarnessError, RunFailed
from harness.queues.base import JobRecord, Queue, Site, WorkerReport
from harness.results.series import Sink
from harness.run.books import FINISHED, Books, check_books
from harness.run.crew import LOCAL, Crew, Placement
from harness.run.faults import (
    Crasher,
    Driver,
    Exhaustion,
    FaultDriver,
    LibraryFaultDriver,
    NullDriver,
    SessionCuts,
    fault_summary,
    tenant_class,
)
from harness.run.held_fetches import ExplainedFetches, explained_fetches, workers_of
from harness.run.idle import IdleProbe
from harness.run.long_transaction import Holder, HoldRecord
from harness.scenario.distributions import job_duration_ms
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.server.connections import connect
from harness.server.schema import recreate

MONITOR_INTERVAL_S = 0.02


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
    jobs: list[dict[str, Any]]  # jobs.csv's rows
    empty_polls: int
    started_at: datetime
    finished_at: datetime
    lost_races: int = 0
    monitor: list[tuple[float, int, float]] = field(default_factory=list)  # s, stranded, age s
    faults: dict[str, Any] | None = None  # what the faults did (harness/run/faults.py)
    books: str = "balanced"  # or "stuck: N" (jobs held forever by killed workers)
    hold: HoldRecord | None = None  # the scenario's long_transaction, if it has one
    fleet: list[dict[str, Any]] | None = None  # the fleet members' share, with --fleet
    # faults.worker_kills, backend_kills: harness/run/faults.py fault_summary
    library_faults: dict[str, Any] | None = None
    idle: dict[str, Any] | None = None  # the scenario's idle window (harness/run/idle.py)


class Observer(Protocol):
    """Progress of a run, for whoever shows it (the CLI's progress bar)."""

    def repetition_started(self, repetition: Repetition, jobs: int) -> None: ...

    def jobs_done(self, done: int) -> None: ...

    def horizon_progress(self, line: str) -> None:
        """A horizon's state, once a second: elapsed, phase, jobs/s, dead tuples."""

    def repetition_finished(self, result: RepetitionResult) -> None: ...


def plan(scenario: Scenario) -> list[Repetition]:
    """Repetitions interleaved (all strategies once, then again) so drift hits all alike."""
    return [
        Repetition(strategy=strategy, workers=workers, index=index)
        for index in range(1, scenario.repetitions + 1)
        for workers in scenario.workers
        for strategy in scenario.strategies
    ]


@dataclass(frozen=True)
class Measured:
    """What the workers did, before the books are checked."""

    reports: list[WorkerReport]
    monitor: list[tuple[float, int, float]]
    hold: HoldRecord | None
    hosts: dict[int, tuple[str, int]]  # worker slot -> (host, fleet member) it ran on
    fleet: list[dict[str, Any]] | None  # where a fleet's members ran their workers
    idle: dict[str, Any] | None = None  # the idle window's record


def run_repetition(
    queue: Queue,
    site: Site,
    inputs: RunInputs,
    repetition: Repetition,
    observer: Observer,
    restart: Callable[[], None] | None = None,
    placement: Placement = LOCAL,
    crash: Callable[[float], list[str]] | None = None,
    sink: Sink | None = None,
) -> RepetitionResult:
    """`restart` stops and starts the server (one the harness started): a fault scenario's
    restart; `crash` crashes it, starts it again (faults.server_crash) and says what its
    log said of the recovery; `placement` is where the programs run (here, or over a
    fleet); `sink`: where the long transaction's and horizon's rows go as they are taken
    (the run folder's files: what an interrupt keeps)."""
    with connect(site.dsn, schema=site.schema, utc=True) as conn:
        recreate(conn, site.schema, queue.outside_schemas())
        queue.install(conn, inputs.backlog)
        observer.repetition_started(repetition, inputs.total_jobs)
        before = time.time()
        started_at = _now(conn)
        # the server's clock less the harness's (0 on this host but for the round trip):
        # a kill's moment (the harness's) on the clock of jobs.csv's times
        clock_offset_s = started_at.timestamp() - (before + time.time()) / 2
        driver = _driver(queue, inputs, site, conn, restart, crash)
        try:
            measured = _measure(queue, inputs, repetition, driver, observer, placement, sink)
        finally:
            driver.close()
    with connect(site.dsn, schema=site.schema, utc=True) as conn:  # the server may have restarted
        finished_at = _now(conn)
        ledger = queue.ledger(conn, measured.reports)
    library = driver if isinstance(driver, LibraryFaultDriver) else None
    killed = library is not None
    books = check_books(inputs.total_jobs, ledger, driver.held, driver.at_least_once, killed)
    if books.problems:
        problems = "; ".join(books.problems)
        raise RunFailed(f"{repetition.label}: the books do not balance: {problems}")
    result = RepetitionResult(
        repetition=repetition,
        jobs=job_rows(inputs, repetition, _timed(ledger.records, books), measured.hosts),
        started_at=started_at,
        finished_at=finished_at,
        empty_polls=sum(report.empty_polls for report in measured.reports),
        lost_races=sum(report.lost_races for report in measured.reports),
        monitor=measured.monitor,
        faults=driver.summary(books, ledger.records, measured.reports),
        books=books.status,
        hold=measured.hold,
        fleet=measured.fleet,
        idle=measured.idle,
        library_faults=(
            fault_summary(
                books,
                ledger.records,
                measured.reports,
                inputs.scenario.timeout_s,
                library.cuts.terminations if library else None,
                library.crasher.record if library else None,
                library.exhaustion.record if library and library.exhaustion else None,
                clock_offset_s,
            )
            if killed
            else None
        ),
    )
    observer.repetition_finished(result)
    return result


def _measure(
    queue: Queue,
    inputs: RunInputs,
    repetition: Repetition,
    driver: Driver,
    observer: Observer,
    placement: Placement,
    sink: Sink | None = None,
) -> Measured:
    spares = len(inputs.faults.crashes) if inputs.faults is not None else 0
    enqueuers = queue.enqueuers(inputs.schedules)
    explained = explained_fetches(queue, inputs, placement, driver.conn)
    holder, hold = None, None
    idle: IdleProbe | None = None
    try:
        workers = workers_of(queue, explained)
        crew = placement.crew(workers, repetition.workers, enqueuers, spares)
        gate = explained.gate if isinstance(explained, ExplainedFetches) else None
        holder = _holder(queue, inputs, crew, gate, sink)
        with holder or nullcontext(), _idle(queue, inputs) as idle, crew:
            # The backlog goes in once every process is connected, just before the clock
            # starts, so that its waits do not include the processes' start-up.
            if inputs.backlog is not None:
                queue.load_backlog(driver.conn, inputs.backlog)
            crew.go()
            progress = _horizon_progress(holder, observer)
            samples = _watch(driver, crew, queue, inputs, observer, progress, idle)
            reports = crew.stop()
        hold = holder.record if holder is not None else None
        if hold is not None:
            _keep_fetches(hold, explained)
    except BaseException:
        # cut short: the library's fetches explained so far go to the sink too
        if hold is None and holder is not None and isinstance(explained, ExplainedFetches):
            with contextlib.suppress(Exception):
                explained.record(holder.record)
        raise
    finally:
        if isinstance(explained, ExplainedFetches):
            explained.close()
    record = idle.record if idle is not None else None
    return Measured(reports, samples, hold, crew.hosts(), crew.members(), record)


@contextlib.contextmanager
def _idle(queue: Queue, inputs: RunInputs) -> Iterator[IdleProbe | None]:
    """The scenario's idle window's probe, on a connection of its own; or none."""
    window = inputs.scenario.idle
    if window is None:
        yield None
        return
    probe = IdleProbe(queue.site, window, queue.fetch_marker())
    try:
        yield probe
    finally:
        probe.close()


def _keep_fetches(hold: HoldRecord, explained: ExplainedFetches | str | None) -> None:
    """The explained fetches in the hold's record, or why there are none."""
    if isinstance(explained, ExplainedFetches):
        explained.record(hold)
    else:
        hold.fetches_skipped = explained


def _watch(
    driver: Driver,
    crew: Crew,
    queue: Queue,
    inputs: RunInputs,
    observer: Observer,
    progress: Callable[[float, int], None] | None = None,
    idle: IdleProbe | None = None,
) -> list[tuple[float, int, float]]:
    """Progress until the driver says the run is over; the queue's monitor sampled, the
    idle window's ends read."""
    start, samples, timeout_s = time.monotonic(), [], inputs.scenario.timeout_s
    while True:
        elapsed = time.monotonic() - start
        driver.tick(crew, elapsed)
        if idle is not None:
            idle.tick(elapsed, crew.done())
        sample = queue.monitor(driver.conn)  # the driver's: a new one after a restart
        if sample is not None:
            samples.append((round(elapsed, 4), *sample))
        observer.jobs_done(crew.done())
        if progress is not None:
            progress(elapsed, crew.done())
        if driver.finished(crew, inputs.total_jobs):
            return samples
        crew.fail_if_one_died()
        if elapsed > timeout_s:
            raise RunFailed(
                f"only {crew.done()} of {inputs.total_jobs} jobs done after the scenario's "
                f"timeout_s={timeout_s:g}"
            )
        time.sleep(MONITOR_INTERVAL_S)


def _driver(
    queue: Queue,
    inputs: RunInputs,
    site: Site,
    conn: psycopg.Connection[Any],
    restart: Callable[[], None] | None,
    crash: Callable[[float], list[str]] | None,
) -> Driver:
    cuts, crasher = SessionCuts(inputs.backend_kills), Crasher(inputs.server_crash, crash)
    crasher.checkpoint(conn)  # the queue is installed: what is left to replay is the run's
    exhaustion = inputs.connection_exhaustion
    full = Exhaustion(exhaustion, site.dsn) if exhaustion is not None else None
    if inputs.library_faults and queue.provenance().kind == "adapter":
        return LibraryFaultDriver(
            conn, inputs.scenario.timeout_s, cuts, crasher, site=site, exhaustion=full
        )
    if inputs.faults is None:
        return NullDriver(conn)
    recovery = queue.recovery()
    if recovery is None:  # validation refuses it before anything runs (the queue's traits)
        raise HarnessError(f"{queue.name} cannot take faults: {queue.traits.faults}")
    own = connect(site.dsn, schema=site.schema, utc=True)
    return FaultDriver(inputs.faults, recovery, site, own, restart, cuts, crasher, full)


def _holder(
    queue: Queue, inputs: RunInputs, crew: Crew, gate: str | None, sink: Sink | None
) -> Holder | None:
    """The scenario's long transaction (or its horizon's held phase and sampler), timed
    from the crew's start; nothing without one."""
    hold = inputs.long_transaction
    if hold is None:
        return None
    # a library's tables are its own: every table of its schemas is sampled
    library = queue.provenance().kind == "adapter"
    schemas = (queue.site.schema, *queue.outside_schemas()) if library else None
    return Holder(
        queue.site,
        hold,
        crew.signals.start,
        queue.dequeue_sql(),
        inputs.params,
        schemas,
        horizon=inputs.horizon,
        gate=gate,
        sink=sink,
    )


PROGRESS_EVERY_S = 1.0


def _horizon_progress(
    holder: Holder | None, observer: Observer
) -> Callable[[float, int], None] | None:
    """A horizon's line on the console, once a second: elapsed, phase, jobs/s over the
    last ten seconds, the queue's dead tuples at the latest sample."""
    if holder is None or holder.horizon is None or holder.record.horizon is None:
        return None
    record, duration = holder.record.horizon, holder.horizon.duration_s
    seen: list[tuple[float, int]] = []

    def show(elapsed: float, done: int) -> None:
        if seen and elapsed - seen[-1][0] < PROGRESS_EVERY_S:
            return
        seen.append((elapsed, done))
        del seen[:-12]
        then, before = next((t, d) for t, d in seen if elapsed - t <= 10)
        rate = (done - before) / (elapsed - then) if elapsed > then else 0.0
        phase, _, dead = record.progress()
        dead_text = f"{dead:,}" if dead is not None else "-"
        observer.horizon_progress(
            f"{elapsed:,.0f}/{duration:,.0f} s, {phase}, {rate:,.1f} jobs/s, "
            f"dead tuples {dead_text}"
        )

    return show


def _timed(records: list[JobRecord], books: Books) -> list[JobRecord]:
    """The records jobs.csv can hold: all but those done with no moments of their own
    (a killed worker's, finished but never reported: run.json's worker_kills has them),
    and those of no enqueued job (run.json's `unexpected`)."""
    untimed = set(books.unreported) | set(books.unrecorded) | set(books.unexpected)
    return [record for record in records if record.job_id not in untimed]


def _now(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("select clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def job_rows(
    inputs: RunInputs,
    repetition: Repetition,
    records: list[JobRecord],
    hosts: dict[int, tuple[str, int]],
) -> list[dict[str, Any]]:
    """jobs.csv's rows for the jobs finished (done or dead): the contract that analysis,
    notebooks and checks read. Stuck jobs are in run.json."""
    return [
        {
            "scenario": inputs.scenario.name,
            "strategy": repetition.strategy,
            "workers": repetition.workers,
            "repetition": repetition.index,
            "job_id": record.job_id,
            "tenant_id": record.tenant_id,
            "tenant_class": tenant_class(inputs.classes[record.tenant_id], record),
            "enqueued_at": _iso(record.enqueued_at),
            "started_at": _iso(record.started_at),
            "finished_at": _iso(record.finished_at),
            "worker": record.worker,
            "duration_ms": job_duration_ms(
                inputs.seed, record.job_id, inputs.durations[record.tenant_id]
            ),
            "claim_ms": round(record.claim_ms, 4) if record.claim_ms is not None else None,
            **_where(hosts, record.worker),
        }
        for record in records
        if record.status in FINISHED
    ]


def _where(hosts: dict[int, tuple[str, int]], worker: int | None) -> dict[str, Any]:
    """The host and fleet member (0: the coordinator's own) of the job's worker."""
    host, member = hosts.get(worker, (None, None)) if worker is not None else (None, None)
    return {"host": host, "member": member}


def _iso(moment: datetime | None) -> str:
    assert moment is not None  # the books check has made sure of it
    return moment.isoformat(timespec="microseconds")
