"""The runner's side of the faults: a driver the repetition ticks while the workers run.

Every repetition runs one: `NullDriver` without faults (it does nothing, and the run ends
when the workers have done every job), `FaultDriver` with them: it kills workers mid-job
at their planned moments (and starts replacements), restarts the server, runs the
queue's reaper and retry scheduler, decides when the run is over (every job done or
dead, or held by a killed worker that no lease will free), and sums up what the faults
did for run.json. The workers' side is harness/queues/sql/recovery.py. For a queue behind
the adapter contract, `LibraryFaultDriver`: it terminates its workers' sessions and
crashes the server at their moments (its workers' supervisors kill and restart them:
harness/queues/contract/supervisor.py), ends the run at the window, and `fault_summary`
counts every job in one outcome.
"""

from __future__ import annotations

import bisect
import contextlib
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import psycopg

from harness.queues.base import JobRecord, Recovery, Site, WorkerReport
from harness.queues.contract.supervisor import one_line
from harness.run.books import Books
from harness.scenario.inputs import FaultPlan
from harness.scenario.loader import LoadedScenario
from harness.scenario.model import BackendKill, ConnectionExhaustion, ServerCrash
from harness.server.connections import connect, worker_session_name
from harness.server.kinds import ProviderKind
from harness.sqlfiles import builtin_blocks

RETRIED, DEAD = "+retried", "+dead"  # tenant_class suffixes in jobs.csv
SQL = builtin_blocks("harness.run", "faults.sql")


def refuse_restart(loaded: LoadedScenario, provider: ProviderKind) -> None:
    """Only a server the harness started (embedded or container) is ours to restart,
    crash or fill: a scenario whose timed part does so is refused on --dsn, before a
    server starts (`harness run`) or anything runs (`run_scenario`)."""
    faults = loaded.scenario.faults
    if faults is None or not loaded.scenario.timed:
        return
    if faults.connection_exhaustion is not None and provider == "external":
        raise loaded.refusal(
            "faults.connection_exhaustion",
            "holds every connection the server has, which would starve its other clients: "
            "it runs on a server the harness starts (--pg embedded or container); this run "
            "uses --dsn",
        )
    if provider != "external":
        return
    for name, does in (("server_restart", "restarts"), ("server_crash", "crashes")):
        if getattr(faults, name) is not None:
            raise loaded.refusal(
                f"faults.{name}",
                f"{does} the server, which only a server the harness starts can take "
                "(--pg embedded or container); this run uses --dsn",
            )


class CrewControl(Protocol):
    """What the fault driver asks of the crew of processes."""

    def kill_mid_job(self, worker: int) -> tuple[int, int] | None: ...

    def replace(self, worker: int) -> None: ...

    def holding(self) -> int: ...

    def done(self) -> int: ...


class Driver(Protocol):
    conn: psycopg.Connection[Any]  # the runner's connection; a new one after a restart

    @property
    def held(self) -> frozenset[int]:
        """Jobs held by killed workers that nothing will free (no lease)."""

    @property
    def at_least_once(self) -> bool: ...

    def tick(self, crew: CrewControl, elapsed: float) -> None: ...

    def finished(self, crew: CrewControl, total: int) -> bool: ...

    def summary(
        self, books: Books, records: list[JobRecord], reports: list[WorkerReport]
    ) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


@dataclass
class NullDriver:
    """No faults: nothing happens, and the run is over when every job is done."""

    conn: psycopg.Connection[Any]
    held: frozenset[int] = frozenset()
    at_least_once: bool = False

    def tick(self, crew: CrewControl, elapsed: float) -> None:
        pass

    def finished(self, crew: CrewControl, total: int) -> bool:
        return crew.done() >= total

    def summary(
        self, books: Books, records: list[JobRecord], reports: list[WorkerReport]
    ) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        pass


@dataclass
class Exhaustion:
    """faults.connection_exhaustion: from its window's start a thread opens idle
    connections of the harness's own until the server has `margin` of max_connections
    left or refuses one (a role that is no superuser meets the reserved slots first),
    then, every _TOP_UP_S to the window's end, takes the slots others freed meanwhile (a
    killed worker's), as a storm of clients would; at the end it closes them. `record`:
    the most it held, how many of those were freed slots taken back, when the server was
    first full and when it was free again, and the first refusal, if one came."""

    plan: ConnectionExhaustion
    dsn: str
    record: dict[str, Any] = field(default_factory=dict)
    _release: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _held: list[psycopg.Connection[Any]] = field(default_factory=list)

    def tick(self, elapsed: float) -> None:
        plan = self.plan
        if self._thread is None and elapsed >= plan.from_s:
            began = time.monotonic() - elapsed
            self._thread = threading.Thread(
                target=self._hold, args=(began,), name="connection-exhaustion", daemon=True
            )
            self._thread.start()
        elif self._thread is not None and elapsed >= plan.from_s + plan.for_s:
            self._release.set()

    def _hold(self, began: float) -> None:
        self.record["connections_held"] = 0
        try:
            self._fill()
            self.record["full_at_s"] = round(time.monotonic() - began, 3)
            first = len(self._held)
            while not self._release.wait(_TOP_UP_S):
                self._fill()
            self.record["taken_back"] = self.record["connections_held"] - first
        except psycopg.Error as error:  # the server went away: what it held is counted
            self.record.setdefault("refused", one_line(str(error)))
        finally:
            for conn in self._held:
                with contextlib.suppress(psycopg.Error):
                    conn.close()
            self.record["released_at_s"] = round(time.monotonic() - began, 3)

    def _fill(self) -> None:
        """Connections opened until the server has `margin` left, counted on one of those
        held (a probe of its own the first time)."""
        with contextlib.ExitStack() as stack:
            probe = self._held[0] if self._held else stack.enter_context(connect(self.dsn))
            row = probe.execute(SQL["connection_room"].sql).fetchone()  # type: ignore[arg-type]
            assert row is not None
            most, in_use = int(row[0]), int(row[1]) - (0 if self._held else 1)
            self.record["max_connections"] = most
        wanted = most - in_use - self.plan.margin
        if wanted > 0:  # as a storm of clients would: many at once (one takes ~10 ms)
            with ThreadPoolExecutor(min(wanted, _FILL_THREADS)) as pool:
                opened = list(pool.map(self._open, range(wanted)))
            self._held.extend(conn for conn in opened if conn is not None)
        most_held = max(self.record.get("connections_held", 0), len(self._held))
        self.record["connections_held"] = most_held

    def _open(self, _: int) -> psycopg.Connection[Any] | None:
        try:
            return connect(self.dsn)
        except psycopg.OperationalError as error:  # full before the count said so
            self.record.setdefault("refused", one_line(str(error)))
            return None

    def close(self) -> None:
        self._release.set()
        if self._thread is not None:
            self._thread.join(timeout=_EXHAUSTION_JOIN_S)


_TOP_UP_S = 0.02
_FILL_THREADS = 8
EXHAUSTION_FIGURES = (
    "connections_held",
    "max_connections",
    "taken_back",
    "full_at_s",
    "released_at_s",
    "refused",
)
_EXHAUSTION_JOIN_S = 60


def exhaustion_figures(record: dict[str, Any]) -> dict[str, Any]:
    """A connection exhaustion's figures as run.json keeps them: the most connections the
    harness held, of max_connections, and how many of them were slots others freed in the
    window; from when the server was first full to when they were closed; the refusal
    that stopped a fill short, if one did."""
    return {key: record.get(key) for key in EXHAUSTION_FIGURES}


@dataclass
class SessionCuts:
    """faults.backend_kills: at each moment of their windows, every session of the run's
    workers terminated (by the application_name the harness gives them; never its own
    sessions nor the enqueuers'), on the driver's connection; what each moment cut."""

    kills: tuple[BackendKill, ...] = ()
    workers: str = field(default_factory=worker_session_name)  # their application_name
    terminations: list[tuple[float, int]] = field(default_factory=list)  # s, sessions
    moments: list[float] = field(default_factory=list)  # those still to come

    def __post_init__(self) -> None:
        self.moments = sorted(at for kill in self.kills for at in kill.moments())

    def tick(self, conn: psycopg.Connection[Any], elapsed: float) -> None:
        if not self.moments or self.moments[0] > elapsed:
            return
        while self.moments and self.moments[0] <= elapsed:  # a late tick kills once
            self.moments.pop(0)
        row = conn.execute(
            SQL["terminate_workers"].sql,  # type: ignore[arg-type]
            {"application_name": self.workers},
        ).fetchone()
        self.terminations.append((round(elapsed, 3), int(row[0]) if row else 0))


@dataclass
class Crasher:
    """faults.server_crash, once, at its moment: the server down and up again (the tick
    that calls it waits for it); `record` its at_s, back_at_s, and the messages of the
    server's log that say its start recovered from the crash (`recovery`)."""

    plan: ServerCrash | None = None
    crash: Callable[[float], list[str]] | None = None  # the server's (embedded, container)
    record: dict[str, Any] = field(default_factory=dict)

    def checkpoint(self, conn: psycopg.Connection[Any]) -> None:
        """Before the clock starts, with a crash planned: its recovery then replays the
        run's WAL alone (faults.sql `checkpoint`)."""
        if self.plan is not None:
            conn.execute(SQL["checkpoint"].sql)  # type: ignore[arg-type]

    def due(self, elapsed: float) -> bool:
        """Whether it crashed the server at this tick: every connection is gone."""
        plan = self.plan
        if plan is None or self.record or elapsed < plan.at_s:
            return False
        assert self.crash is not None, "refused before the run: refuse_restart"
        began = time.monotonic() - elapsed
        self.record["at_s"] = round(elapsed, 3)
        recovery = self.crash(plan.down_s)
        self.record["back_at_s"] = round(time.monotonic() - began, 3)
        self.record["recovery"] = recovery
        return True


@dataclass
class LibraryFaultDriver:
    """faults.worker_kills, backend_kills and server_crash, for a queue behind the
    adapter contract. Each worker's supervisor kills and restarts it (and, under backend
    kills or a crash, restarts one that exits; harness/queues/contract/supervisor.py);
    here, at each moment of a backend kill's window, every session of the run's workers
    is terminated, and at the crash's the server goes down and up. The run is over when
    every job is done, or at the scenario's timeout_s: what the library has not recovered
    by then is counted (`fault_summary`), never waited for."""

    conn: psycopg.Connection[Any]
    window_s: float
    cuts: SessionCuts = field(default_factory=SessionCuts)
    crasher: Crasher = field(default_factory=Crasher)
    site: Site | None = None  # where to connect again after the crash
    own: psycopg.Connection[Any] | None = None  # the driver's connection after the crash
    held: frozenset[int] = frozenset()
    at_least_once: bool = True  # a job the library hands on after a kill may finish twice
    elapsed: float = 0.0
    exhaustion: Exhaustion | None = None  # faults.connection_exhaustion

    def tick(self, crew: CrewControl, elapsed: float) -> None:
        self.elapsed = elapsed
        if self.crasher.due(elapsed):  # the runner's connection went with the server
            assert self.site is not None, "a crash needs the site to connect again"
            self.own = connect(self.site.dsn, schema=self.site.schema, utc=True)
            self.conn = self.own
        if self.exhaustion is not None:
            self.exhaustion.tick(elapsed)
        self.cuts.tick(self.conn, elapsed)

    def finished(self, crew: CrewControl, total: int) -> bool:
        return crew.done() >= total or self.elapsed >= self.window_s

    def summary(
        self, books: Books, records: list[JobRecord], reports: list[WorkerReport]
    ) -> dict[str, Any] | None:
        return None  # the harness's faults: none; the library's are fault_summary's

    def close(self) -> None:
        if self.exhaustion is not None:
            self.exhaustion.close()
        if self.own is not None:
            self.own.close()


# What the library's own table says of a job its worker did not finish (the contract's
# record states) -> its outcome: held by a worker that died (or locked still), marked
# failed by the library itself, or queued and not taken up again within the window.
UNFINISHED = {"running": "stranded", "failed": "abandoned", "waiting": "waiting"}
# Every enqueued job's outcome: the above, or gone from the library without a run (lost).
OUTCOMES = ("ok", "duplicated", "stranded", "abandoned", "waiting", "lost")
# Left by the library as a dead worker's: held still, or marked failed by its sweep.
UNSAID_HELD = ("stranded", "abandoned")


def fault_summary(
    books: Books,
    records: list[JobRecord],
    reports: list[WorkerReport],
    window_s: float,
    terminations: list[tuple[float, int]] | None = None,
    crash: dict[str, Any] | None = None,
    exhaustion: dict[str, Any] | None = None,
    clock_offset_s: float = 0.0,
) -> dict[str, Any]:
    """run.json's `library_faults` of a repetition: what was done to its workers (kills
    and restarts, sessions terminated, exits), and every job in exactly one outcome:
    finished once (ok), finished more than once (duplicated), not finished when the
    window (timeout_s) ended, by the state its library's table left it in (stranded,
    abandoned, waiting), or neither in its table nor ever run (lost). Apart: the jobs it
    ran or held that were never enqueued (unexpected)."""
    kills = sorted(at for report in reports for at in report.kills)
    exits = sorted(exit for report in reports for exit in report.exits)
    unfinished, duplicated = set(books.lost), set(books.duplicates)
    jobs: dict[str, list[int]] = {outcome: [] for outcome in OUTCOMES}
    jobs["lost"] = list(books.missing)
    for record in records:
        if record.job_id in books.unexpected:
            continue
        if record.job_id in unfinished:
            jobs[UNFINISHED.get(record.left_as or "", "waiting")].append(record.job_id)
        else:
            jobs["duplicated" if record.job_id in duplicated else "ok"].append(record.job_id)
    outcome_of = {job: outcome for outcome, ids in jobs.items() for job in ids}
    held = interrupted(reports, outcome_of, set(books.unreported))
    waits = sorted(
        row["started_again_after_s"] for row in held if row["started_again_after_s"] is not None
    )
    done = {
        "kills": len(kills),
        "killed_at_s": kills,
        "backend_kills": len(terminations or []),
        "sessions_terminated": sum(count for _, count in terminations or []),
        "terminated_at_s": [[at, count] for at, count in terminations or []],
        "exits": len(exits),
        "exited_at_s": [[at, why] for at, why in exits],
        "restarts": sum(report.restarts for report in reports),
        "server_crashes": 1 if crash else 0,
        "crashed_at_s": crash.get("at_s") if crash else None,
        "back_at_s": crash.get("back_at_s") if crash else None,
        "crash_recovery": crash.get("recovery") if crash else None,
        "connection_exhaustions": 1 if exhaustion else 0,
        **(exhaustion_figures(exhaustion) if exhaustion else {}),
    }
    interrupted_jobs = {row["job"] for row in held}
    return {
        **done,
        "window_s": window_s,
        **{outcome: len(ids) for outcome, ids in jobs.items()},
        # the jobs a worker kill interrupted (started, not finished), each with its next
        # start and its outcome: none known where no adapter of the run says its starts
        "starts_said": any(report.starts for report in reports),
        "interrupted": held,
        "started_again": len(waits),
        "recovery_p50_s": round(statistics.median(waits), 3) if waits else None,
        "recovery_max_s": waits[-1] if waits else None,
        "dips": throughput_dips(reports, clock_offset_s),
        # started more than once, though no kill interrupted it: run again unasked
        "rerun": sorted(
            job
            for job, n in Counter(job for r in reports for job, *_ in r.starts).items()
            if n > 1 and job not in interrupted_jobs
        ),
        "jobs": {outcome: ids for outcome, ids in jobs.items() if outcome != "ok" and ids},
        # run or held by the library, never enqueued: in no outcome above
        "unexpected": sorted(books.unexpected),
        # ok, but reported by no worker: done in its table, its worker killed before it said
        "unreported": sorted(books.unreported),
        # ok by the task log, absent from the library's table at the end: its record lost
        "unrecorded": sorted(books.unrecorded),
    }


def interrupted(
    reports: list[WorkerReport], outcome_of: dict[int, str], unreported: set[int] | None = None
) -> list[dict[str, Any]]:
    """Each job a worker kill interrupted (its worker had started it and not finished it),
    by the kill's moment: when the kill came (s from the start), the time until another
    adapter process started it again (None: never, within the window), and its outcome.
    The killed process's own starts are never its recovery: one it said before the kill
    may be read after it, on a busy machine. A job its library's table has done and no
    worker reported (`unreported`), never started again, was finished before the kill:
    its report went with the worker, and the kill interrupted nothing of it.

    A job its library left held (stranded) or failed (abandoned) whose start no adapter
    process ever said was taken by a worker gone before it could say so: a kill between
    the library's claim and the adapter's `started`. Where adapters say their starts, it
    is interrupted too, by no worker known (`worker` None), timed from the last kill:
    the one that leaves its recovery the shortest window, so never judged worse for it."""
    unreported = unreported or set()
    starts: dict[int, list[tuple[float, int]]] = {}
    for report in reports:
        for job, moment, pid in report.starts:
            starts.setdefault(job, []).append((moment, pid))
    rows = []
    kills = sorted(at_s for report in reports for at_s in report.kills)
    if kills and starts:
        for job, outcome in sorted(outcome_of.items()):
            if outcome in UNSAID_HELD and job not in starts:
                rows.append(
                    {
                        "job": job,
                        "worker": None,
                        "killed_at_s": kills[-1],
                        "started_again_after_s": None,
                        "outcome": outcome,
                    }
                )
    for report in reports:
        for at_s, (moment, held, killed) in zip(report.kills, report.kills_holding, strict=True):
            for job in held:
                later = [at for at, pid in starts.get(job, []) if at > moment and pid != killed]
                if job in unreported and not later:
                    continue  # done in its table before the kill; its report died with it
                rows.append(
                    {
                        "job": job,
                        "worker": report.worker,
                        "killed_at_s": at_s,
                        "started_again_after_s": round(min(later) - moment, 3) if later else None,
                        "outcome": outcome_of.get(job),
                    }
                )
    return sorted(rows, key=lambda row: (row["killed_at_s"], row["job"]))


DIP_WINDOW_S = 1.0  # throughput: the jobs reported done in the last second
DIP_STEP_S = 0.1  # read every this often
DIP_BACK = 0.9  # back: at 90 % of the median before the kill


def throughput_dips(reports: list[WorkerReport], offset_s: float = 0.0) -> list[dict[str, Any]]:
    """Each worker kill's dip in throughput, jobs reported done per second over windows
    of DIP_WINDOW_S read every DIP_STEP_S: the median before the kill (windows from the
    first job's to the kill), the lowest of the windows wholly after it until it is back,
    and when it was back: the start of the first such window at DIP_BACK of the median or
    more (0: no dip a window shows; None: not back within the window, or the jobs ran out
    first). A kill less than two windows after the first job done has no median. Each
    with the kill's moment on the server's clock (`killed_at`; `offset_s`: the server's
    clock less the harness's), as jobs.csv's times are: what a tenant's jobs waited
    around it is read from there (harness/analysis/faults.py recovery_waits)."""
    done = sorted(at for report in reports for at in report.finishes)
    kills = sorted(
        (at_s, moment)
        for report in reports
        for at_s, (moment, *_) in zip(report.kills, report.kills_holding, strict=True)
    )
    return [
        {**_dip(done, at_s, moment), "killed_at": _server_time(moment + offset_s)}
        for at_s, moment in kills
    ]


def _server_time(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat()


def _dip(done: list[float], at_s: float, moment: float) -> dict[str, Any]:
    none = {"killed_at_s": at_s, "before_per_s": None, "lowest_per_s": None, "back_after_s": None}
    if not done or moment - done[0] < 2 * DIP_WINDOW_S:
        return none

    def rate(end: float) -> float:  # jobs done in the window (end - DIP_WINDOW_S, end]
        inside = bisect.bisect_right(done, end) - bisect.bisect_right(done, end - DIP_WINDOW_S)
        return inside / DIP_WINDOW_S

    first = done[0] + DIP_WINDOW_S
    steps = int((moment - first) / DIP_STEP_S)
    baseline = statistics.median(rate(first + k * DIP_STEP_S) for k in range(steps + 1))
    after = moment + DIP_WINDOW_S  # the first window's end with nothing before the kill
    ends = [after + k * DIP_STEP_S for k in range(int((done[-1] - after) / DIP_STEP_S) + 1)]
    back = next((end for end in ends if rate(end) >= DIP_BACK * baseline), None)
    lowest = min((rate(end) for end in ends if back is None or end <= back), default=None)
    return {
        **none,
        "before_per_s": round(baseline, 2),
        "lowest_per_s": round(lowest, 2) if lowest is not None else None,
        "back_after_s": round(back - DIP_WINDOW_S - moment, 2) if back is not None else None,
    }


@dataclass
class CrashRecord:
    worker: int  # as the scenario numbers them
    slot: int  # the process's number in jobs.csv's worker column
    job: int  # the job it was working on
    at_s: float  # when it was killed, from the repetition's start
    killed_at: datetime  # the server's clock, just after the kill


@dataclass
class FaultDriver:
    """Fault actions in the runner's watch loop, every tick."""

    plan: FaultPlan
    recovery: Recovery
    site: Site
    conn: psycopg.Connection[Any]
    restart: Callable[[], None] | None = None
    cuts: SessionCuts = field(default_factory=SessionCuts)  # faults.backend_kills
    crasher: Crasher = field(default_factory=Crasher)  # faults.server_crash
    exhaustion: Exhaustion | None = None  # faults.connection_exhaustion
    crashes: list[CrashRecord] = field(default_factory=list)
    requeued: int = 0  # retries queued again after their backoff
    reaped: int = 0  # jobs put back by an expired lease
    restart_record: dict[str, float] = field(default_factory=dict)
    _pending: list[Any] = field(default_factory=list)
    _opened: list[psycopg.Connection[Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pending = list(self.plan.crashes)
        self._opened.append(self.conn)

    @property
    def at_least_once(self) -> bool:
        return self.plan.at_least_once

    @property
    def held(self) -> frozenset[int]:
        return frozenset(crash.job for crash in self.crashes)

    def tick(self, crew: CrewControl, elapsed: float) -> None:
        self._crash_due(crew, elapsed)
        self._restart_due(crew, elapsed)
        if self.crasher.due(elapsed):  # the workers reconnect as after a restart
            self._connect_again()
        if self.exhaustion is not None:
            self.exhaustion.tick(elapsed)
        self.cuts.tick(self.conn, elapsed)
        if self.plan.lease_s is not None:
            self.reaped += self.recovery.reap_expired(self.conn)
        self.requeued += self.recovery.requeue_due(self.conn)

    def finished(self, crew: CrewControl, total: int) -> bool:
        """Every job done or dead, or (no lease) the rest held by killed workers."""
        held = [] if self.at_least_once else sorted(self.held)
        finished, still_held = self.recovery.progress(self.conn, held)
        return finished + still_held >= total

    def close(self) -> None:
        if self.exhaustion is not None:
            self.exhaustion.close()
        for conn in self._opened:
            with contextlib.suppress(Exception):
                conn.close()

    def _crash_due(self, crew: CrewControl, elapsed: float) -> None:
        """Kill at the first moment from at_s when the worker holds a job: mid-job."""
        while self._pending and self._pending[0].at_s <= elapsed:
            crash = self._pending[0]
            killed = crew.kill_mid_job(crash.worker)
            if killed is None:
                return  # between jobs: try again next tick
            self._pending.pop(0)
            killed_at = _now(self.conn)
            self.crashes.append(CrashRecord(crash.worker, killed[0], killed[1], elapsed, killed_at))
            if self.plan.restart_workers:
                crew.replace(crash.worker)

    def _restart_due(self, crew: CrewControl, elapsed: float) -> None:
        due = self.plan.restart_at_s
        if due is None or self.restart_record or elapsed < due:
            return
        assert self.restart is not None, "refused before the run: refuse_restart"
        held, began = crew.holding(), time.monotonic()
        self.restart()
        self.restart_record = {
            "at_s": round(elapsed, 4),
            "took_s": round(time.monotonic() - began, 4),
            "held_at_restart": held,
        }
        self._connect_again()

    def _connect_again(self) -> None:
        """The driver's own connection, gone with the server, opened again."""
        with contextlib.suppress(Exception):
            self.conn.close()
        self.conn = connect(self.site.dsn, schema=self.site.schema, utc=True)
        self._opened.append(self.conn)

    def summary(
        self, books: Books, records: list[JobRecord], reports: list[WorkerReport]
    ) -> dict[str, Any]:
        """run.json's `faults` of a repetition: what the faults did, from the books."""
        crashes = self._crash_entries(records)
        recovery = [c["recovery_s"] for c in crashes if c["recovery_s"] is not None]
        return {
            "crashes_planned": len(self.plan.crashes),
            "crashes": crashes,
            "lease_s": self.plan.lease_s,
            "lost": len(books.lost),  # a run with lost jobs fails: 0 in every written summary
            "stuck": len(books.stuck),
            "stuck_jobs": books.stuck,
            "duplicates": len(books.duplicates),
            "duplicate_jobs": books.duplicates,
            "dead_lettered": len(books.dead),
            "dead_jobs": books.dead,
            "retried_done": len(books.retried),
            "failed_attempts": sum(r.failed_attempts for r in reports),
            "requeued_after_backoff": self.requeued,
            "reaped": self.reaped,
            "recovery_max_s": max(recovery) if recovery else None,
            "recovery_p50_s": statistics.median(recovery) if recovery else None,
            "server_restarts": 1 if self.restart_record else 0,
            **{f"restart_{k}": v for k, v in self.restart_record.items()},
            "backend_kills": len(self.cuts.terminations),
            "sessions_terminated": sum(count for _, count in self.cuts.terminations),
            "terminated_at_s": [[at, count] for at, count in self.cuts.terminations],
            "server_crashes": 1 if self.crasher.record else 0,
            **{f"crash_{k}": v for k, v in self.crasher.record.items()},
            "connection_exhaustions": 1 if self.exhaustion and self.exhaustion.record else 0,
            **(exhaustion_figures(self.exhaustion.record) if self.exhaustion else {}),
            "reconnects": sum(r.reconnects for r in reports),
            "reconnects_refused": sum(r.reconnects_refused for r in reports),
            "in_doubt_claims": sum(r.in_doubt for r in reports),
            "leases_lost": sum(r.leases_lost for r in reports),
        }

    def _crash_entries(self, records: list[JobRecord]) -> list[dict[str, Any]]:
        by_id = {record.job_id: record for record in records}
        return [_crash_entry(crash, by_id.get(crash.job)) for crash in self.crashes]


def _crash_entry(crash: CrashRecord, record: JobRecord | None) -> dict[str, Any]:
    """A kill, and when its job started again (recovered), if it did."""
    started = record.started_at if record else None
    recovered = started if started and started > crash.killed_at else None
    return {
        "worker": crash.worker,
        "slot": crash.slot,
        "job": crash.job,
        "at_s": round(crash.at_s, 4),
        "killed_at": crash.killed_at.isoformat(),
        "recovered_at": recovered.isoformat() if recovered else None,
        "recovery_s": (
            round((recovered - crash.killed_at).total_seconds(), 6) if recovered else None
        ),
    }


def _now(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("select clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def tenant_class(base: str, record: JobRecord) -> str:
    """Retried and dead-lettered jobs as classes of their own, so their waits (which
    include earlier attempts and backoffs) are reported apart."""
    if record.status == "dead":
        return base + DEAD
    return base + RETRIED if record.failed_attempts else base
