"""The queue seam: what a repetition asks of a queue, whatever implements it.

A repetition (harness/run/repetition.py) drives every kind of queue the same way:

  1. `install(conn)`: the queue's objects, fresh, in the run's own schema (the
     connection's search_path is that schema), and in the schemas its library insists
     on by name (`outside_schemas()`), which the harness makes afresh beside it;
  2. `load_backlog(conn, rows)`: the scenario's pre-loaded queue, if it has one, once
     every process is connected and just before the clock starts;
  3. `workers(count)` and `enqueuers(schedules)`: the programs of the repetition's
     processes. The crew (harness/run/crew.py) starts each in a process of its own,
     waits until every one is connected, then sets the start signal: enqueuers insert
     their batches at their offsets, workers claim and work until the stop signal;
  4. `ledger(conn, reports)`: every job as the queue's own state records it, beside
     the claims the workers reported: what the books check and what jobs.csv holds.

Optional sides are said, not guessed: `recovery()` and `explainer()` return the side
(faults; a library's captured fetch) or None.

Implementations: the built-in SQL strategies (harness/queues/sql/queue.py), real queue
libraries driven through their own code, workers on other hosts. A program is a
module-level function and a picklable spec, so the same program runs in a local process
or, registered by name (harness/queues/programs.py) and sent through the fleet's
tables as data, on another host.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.queues import Queue as ProcessQueue
from multiprocessing.synchronize import Event
from typing import TYPE_CHECKING, Any, Literal, Protocol

import psycopg

from harness.errors import HarnessError
from harness.scenario.traits import QueueTraits

if TYPE_CHECKING:  # annotations only: every spawned process loads this module, and the
    # scenario model (pydantic) would cost it a tenth of a second to import
    from harness.results.document import QueueProvenance
    from harness.scenario.arrivals import Arrivals
    from harness.scenario.inputs import RunInputs
    from harness.scenario.workload import BacklogRows


class QueueRefused(HarnessError):
    """A queue cannot run on this server as configured (awa's queue per tenant needs a
    connection per tenant), said by the queue itself as it installs: one line for a run,
    its `reason` a capture's skip reason for harness explain."""

    def __init__(self, queue: str, reason: str) -> None:
        super().__init__(f"{queue} cannot run here: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class Site:
    """Where a queue lives: the server, and the run's own schema on it."""

    dsn: str
    schema: str


@dataclass(frozen=True)
class Signals:
    """Shared between the runner and the processes of one repetition.

    Shared memory without locks: each process writes only its own slot."""

    ready: ctypes.Array[Any]  # 1 once connected
    done: ctypes.Array[Any]  # jobs each process has completed
    holding: ctypes.Array[Any]  # the job each worker is working on, 0 between jobs
    start: Event  # the clock starts: enqueuers begin their schedules, workers claim
    stop: Event
    reports: ProcessQueue  # type: ignore[type-arg]  # each process's WorkerReport


ProgramMain = Callable[[int, Any, Signals], None]


@dataclass(frozen=True)
class Program:
    """What one process of a repetition runs.

    `main(index, spec, signals)` connects, sets `signals.ready[index] = 1`, waits for
    `signals.start`, and works until `signals.stop` (an enqueuer until its schedule is
    done and then the stop); it counts its completed jobs in `signals.done[index]` and,
    before it exits, puts one WorkerReport (its `error` set if it failed) on
    `signals.reports`. `main` must be a module-level function and `spec` picklable."""

    role: Literal["worker", "enqueuer"]
    main: ProgramMain
    spec: Any
    name: str = ""  # shown in errors: 'harness-worker-3'


@dataclass(frozen=True)
class TaskRun:
    """One run of a queue library's task, as the task saw it: the harness's number for the
    job (carried in its payload), its tenant, and the library's own id for it. A library
    that keeps no record of finished jobs (graphile-worker deletes them) has the task read
    the job's times from the server before it returns; the others leave them None and
    their ledger takes them from the library's tables."""

    job: int
    tenant: int
    library_id: str
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    claim_ms: float | None = None  # the library's fetch that brought it, where it is timed


@dataclass
class WorkerReport:
    """What a process sends back when it stops: each claim it made, or why it failed."""

    worker: int
    claims: list[tuple[int, int, float]] = field(default_factory=list)  # job, tenant, ms
    empty_polls: int = 0
    lost_races: int = 0
    error: str | None = None
    reconnects: int = 0  # connections re-opened after the server went away
    reconnects_refused: int = 0  # attempts the server refused meanwhile (down, or full)
    in_doubt: int = 0  # claims whose commit was cut by a disconnect (resolved on reconnect)
    failed_attempts: int = 0
    leases_lost: int = 0  # jobs finished after their lease ran out: someone else ran them
    # A library's task log: one entry per run of its task (the claims of a queue whose
    # library, not the harness, claims the jobs; `claims` then holds no latency).
    task_runs: list[TaskRun] = field(default_factory=list)
    # A library's worker killed by faults.worker_kills: when (s from the start), each time.
    kills: list[float] = field(default_factory=list)
    # Each kill's moment (time.time(): one clock for every process of a run), the jobs its
    # worker held then (its adapter's `started`, no `job` or `requeued` since), and the
    # killed adapter process's pid.
    kills_holding: list[tuple[float, list[int], int]] = field(default_factory=list)
    # A library's task log's starts, where its adapter says them: job, time.time() as the
    # harness read it (a line written before a kill may be read after it), the adapter
    # process's pid.
    starts: list[tuple[int, float, int]] = field(default_factory=list)
    # When each run of its task was reported done (time.time()): its throughput over time.
    finishes: list[float] = field(default_factory=list)
    # Under faults.backend_kills: each time it exited or failed on its own (or failed to
    # start again), s from the start, and why (its error, its stderr's last line).
    exits: list[tuple[float, str]] = field(default_factory=list)
    restarts: int = 0  # its supervisor's restarts of it, after a kill or an exit


@dataclass(frozen=True)
class JobRecord:
    """One job after a repetition, as the queue's own state and the workers recorded it.

    The timestamps are the server's clock. `worker` is the process slot that finished
    it (the last claim's), `claim_ms` that claim's latency as the worker saw it (None
    where no live worker reported it: a killed one never does)."""

    job_id: int
    tenant_id: int
    status: str  # done, dead (dead-lettered), or anything else: not finished
    # None: a job its worker reported done and its library holds no record of, its
    # enqueue's moment with it (under a library's faults only: Ledger.unrecorded)
    enqueued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    worker: int | None = None
    claim_ms: float | None = None
    failed_attempts: int = 0
    dead_lettered: bool = False  # the queue's own dead-letter mark (status says 'dead' too)

    @staticmethod
    def unfinished(state: str) -> str:
        """The status of a job a library's table holds, not done, in `state`."""
        return f"not finished ({state})"

    @property
    def left_as(self) -> str | None:
        """The library's state of a job `unfinished` made the status of; else None."""
        inside = self.status.removeprefix("not finished (")
        return inside.removesuffix(")") if inside != self.status else None


@dataclass(frozen=True)
class Ledger:
    """What the books are checked against: every job, and the job of every committed
    claim, one entry per claim (a job claimed twice appears twice)."""

    records: list[JobRecord]
    claims: list[int]
    # Reported done by a worker, absent from the library's table at the end (its record
    # lost to a library's fault): done once by the task log, with no moments of its own.
    unrecorded: list[int] = field(default_factory=list)


class Queue(Protocol):
    """One kind of queue, set up for one scenario on one site."""

    @property
    def name(self) -> str: ...

    @property
    def traits(self) -> QueueTraits:
        """What it cannot take (faults, a backlog, ...), and why."""

    @property
    def site(self) -> Site: ...

    def install(self, conn: psycopg.Connection[Any], rows: BacklogRows | None = None) -> None:
        """Fresh queue objects in the run's schema (the connection's search_path), for the
        scenario's tenants and those of `rows` (the backlog about to be loaded: an explain
        variant's); QueueRefused where it cannot run here as configured."""

    def outside_schemas(self) -> tuple[str, ...]:
        """Schemas its library creates by a fixed name beside the run's (awa's `awa`): the
        harness refuses a run if one exists that it did not make, makes them afresh with
        the run's schema for every repetition, and drops them with it. () for a queue that
        keeps everything in the run's schema."""

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        """The pre-loaded queue, with statistics, before the clock starts."""

    def workers(self, count: int) -> list[Program]:
        """The worker processes for `count` workers: one each, or one process that runs
        the library's own loop with `count` as its concurrency."""

    def enqueuers(self, schedules: list[Arrivals]) -> list[Program]:
        """One process per schedule: its batches, in order of their offsets."""

    def ledger(self, conn: psycopg.Connection[Any], reports: list[WorkerReport]) -> Ledger:
        """Every job and every committed claim, once the workers have stopped."""

    def dequeue_sql(self) -> str | None:
        """The statement that picks the next job, exactly as the workers run it: what
        EXPLAIN captures and the long transaction's sampling run. None if unknown."""

    def fetch_marker(self) -> str | None:
        """A text its fetch statement holds, as its workers send it: what an idle
        window's fetches are counted by (pg_stat_statements). None if unknown."""

    def monitor(self, conn: psycopg.Connection[Any]) -> tuple[int, float] | None:
        """Sampled while the workers run: stranded jobs and the oldest one's age (s), for
        queues that can strand a job; None otherwise."""

    def provenance(self) -> QueueProvenance:
        """What run.json records of this queue: versions, effective settings."""

    def recovery(self) -> Recovery | None:
        """Its side of the fault features (the reaper, the retry scheduler, the test for
        the end), or None for a queue that cannot take faults (its traits say why)."""

    def explainer(self) -> FetchExplainer | None:
        """Its own worker's fetch, captured, for a queue with no one dequeue statement to
        EXPLAIN (`dequeue_sql()` is None); None otherwise."""


@dataclass(frozen=True)
class ExplainedFetch:
    """One fetch a queue's own worker ran, as auto_explain reported it: the text the
    library sent, and its plan in the shape of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON),
    without a planning time (auto_explain has none)."""

    query: str
    explained: list[dict[str, Any]]


@dataclass(frozen=True)
class TimedFetch:
    """A fetch of a timed run's worker: when its plan reached the harness (time.monotonic,
    one clock for every process of this host) and the plan, as auto_explain gave it."""

    at: float
    fetch: ExplainedFetch


class FetchExplainer(Protocol):
    """A queue whose fetch is no one statement to EXPLAIN (built inside a library, in a
    function, per call): its own worker runs on the loaded backlog with auto_explain on,
    each fetched job held, and its fetches' plans are read back. Its timed workers can
    run with auto_explain on too, nothing held, their fetches' plans stamped with the
    moment they arrived (a held snapshot's `explain_fetches`)."""

    def capture_workers(self, count: int, plans_file: str) -> list[Program]:
        """The worker of a capture: `count` slots, each job held until the stop, every
        plan notice appended to `plans_file`."""

    def explained(self, plans_file: str) -> list[ExplainedFetch]:
        """The fetches among the plans the capture's worker wrote, in order."""

    def explained_workers(
        self, count: int, plans_dir: str, gate: str | None = None
    ) -> list[Program]:
        """The timed workers for `count` workers, as `workers` makes them, each process's
        plan notices appended, stamped, to a file of its own in `plans_dir`; with `gate`,
        only those that arrive while that file exists (a horizon's moments)."""

    def timed_fetches(self, plans_dir: str) -> list[TimedFetch]:
        """The fetches among the plans the timed workers wrote, in the order they arrived."""


class Recovery(Protocol):
    """The runner's side of the fault features, for a queue that can take them (its
    traits say so): the reaper, the retry scheduler, and the test for the end."""

    def reap_expired(self, conn: psycopg.Connection[Any]) -> int:
        """Jobs whose lease ran out, put back in the queue."""

    def requeue_due(self, conn: psycopg.Connection[Any]) -> int:
        """Failed jobs whose backoff has ended, put back in the queue."""

    def progress(self, conn: psycopg.Connection[Any], held: list[int]) -> tuple[int, int]:
        """Jobs finished for good (done or dead), and of `held` those still running."""


QueueFactory = Callable[[Site, "RunInputs"], Queue]
Say = Callable[[str], None]  # one line of progress for the user


@dataclass(frozen=True)
class Missing:
    """What a queue needs and this installation lacks: `what` it is, and how to `install`
    it. Queues whose needs share an install line are named in one sentence."""

    what: str
    install: str


class Requirement(Protocol):
    """Something a queue needs beyond the harness's own dependencies (a Python package of
    an extra, a runtime on the PATH: an adapter's, harness/queues/contract/runtime.py),
    asked before any server starts."""

    def missing(self) -> Missing | None:
        """None when it is there."""

    def prepare(self, say: Say) -> None:
        """Made ready before any server starts (an install of its own, showing its
        progress); only called when nothing is missing."""


@dataclass(frozen=True)
class QueueEntry:
    """A queue a scenario can name in `strategies`: what it can take, how to make it for
    a run, what `harness sql NAME` shows of it, and what it needs installed."""

    name: str
    traits: QueueTraits
    make: QueueFactory
    simulate_as: str | None = None  # the simulator's policy for its order, if it has one
    shown: Callable[[], str] | None = None  # the SQL it runs, as `harness sql` prints it
    requires: tuple[Requirement, ...] = ()  # checked before any server starts
