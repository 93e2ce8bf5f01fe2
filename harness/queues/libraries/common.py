"""What the library adapters share: the jobs as they hand them to a library, their specs
and how those travel to a fleet member, and the ledger built from a library's own tables
and its task log (their programs' process is every program's: harness/queues/process.py).

A library chooses its own job ids (a uuid in pg-boss), so every job carries the harness's
number for it in its payload, with its tenant and its duration: `{"n": 17, "t": 3, "ms":
20.0}`. The numbers are the workload's (backlog first, then the batches in the order the
scenario builds them), so the durations are the ones the SQL strategies draw for the same
job, and jobs.csv joins up with the workload whatever ids the library chose.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from multiprocessing.synchronize import Event
from typing import Any, Protocol, Self, TypeVar

import psycopg
from pydantic import ConfigDict, TypeAdapter

from harness.queues.base import (
    JobRecord,
    Ledger,
    Queue,
    QueueEntry,
    Requirement,
    Signals,
    Site,
    TaskRun,
    WorkerReport,
)
from harness.queues.process import run_program
from harness.queues.programs import (
    Concurrency,
    Local,
    PollInterval,
    Registered,
    SchemaName,
    TenantId,
    Wire,
    register,
)
from harness.scenario.arrivals import Arrivals
from harness.scenario.distributions import job_duration_ms
from harness.scenario.inputs import RunInputs
from harness.scenario.traits import QueueTraits
from harness.scenario.workload import BacklogRows
from harness.sqlfiles import builtin_blocks

Job = tuple[int, int, float]  # the harness's number, the tenant, the duration in ms
Schedule = list[tuple[float, list[Job]]]  # (offset in s, the batch's jobs), by offset
Enqueue = Callable[[list[Job]], Awaitable[None]]  # a batch through the library's own enqueue

# A library's fetch is captured from its own worker with auto_explain (harness explain,
# harness/queues/libraries/captures.py), so explain captures are no refusal.
LIBRARY_TRAITS = QueueTraits(
    faults="crashes, leases and retries are the harness's own; a library has its own",
    long_transaction="its fetch runs inside the library; nothing for the holder to sample",
)
STOP_POLL_S = 0.01
NO_CLAIM_MS = float("nan")  # a fetch the harness cannot time from the outside
LibraryFactory = Callable[[str, str, Site, RunInputs], Queue]  # (name, mapping, site, inputs)


def library_entries(
    mappings: dict[str, str], make: LibraryFactory, requires: tuple[Requirement, ...]
) -> list[QueueEntry]:
    """A library's mappings as queues a scenario may name: strategy name -> the mapping of
    tenants onto its knobs, each made by `make`; `requires`, what it needs installed."""
    return [
        QueueEntry(name, LIBRARY_TRAITS, partial(make, name, mapping), requires=requires)
        for name, mapping in mappings.items()
    ]


def sql(block: str) -> str:
    """A named block of libraries.sql: the ledgers read the libraries' own tables."""
    return builtin_blocks("harness.queues.libraries", "libraries.sql")[block].sql


def numbered_schedules(inputs: RunInputs, schedules: list[Arrivals]) -> list[Schedule]:
    """Each enqueuer's batches with their jobs' numbers, tenants and durations.

    The schedules deal the scenario's batches round-robin (schedule i holds batches i,
    i + n, ...); the numbers follow the batches in that dealt order, after the backlog."""
    count = len(schedules)
    ordered = sorted(
        (index + position * count, index, position)
        for index, schedule in enumerate(schedules)
        for position in range(len(schedule))
    )
    numbered: list[Schedule] = [[] for _ in schedules]
    first = (inputs.backlog.total_jobs if inputs.backlog else 0) + 1
    for _, index, position in ordered:
        batch = schedules[index][position]
        jobs = [_job(inputs, first + k, tenant) for k, tenant in enumerate(batch.tenant_ids)]
        numbered[index].append((batch.at_s, jobs))
        first += batch.size
    return numbered


def backlog_jobs(inputs: RunInputs, rows: BacklogRows) -> list[Job]:
    """The backlog's jobs, numbered from 1 tenant by tenant, as the SQL strategies load it."""
    tenants = [t for t, jobs in zip(rows.tenant_ids, rows.jobs, strict=True) for _ in range(jobs)]
    return [_job(inputs, number, tenant) for number, tenant in enumerate(tenants, start=1)]


def _job(inputs: RunInputs, number: int, tenant: int) -> Job:
    return (number, tenant, job_duration_ms(inputs.seed, number, inputs.durations[tenant]))


def tenant_ids(inputs: RunInputs, rows: BacklogRows | None = None) -> list[int]:
    """Every tenant a worker serving all of them must name (queue or entrypoint per tenant)."""
    backlog = rows.tenant_ids if rows is not None else []
    return sorted(set(backlog) | set(inputs.durations))


def schema_conninfo(spec: LibrarySpec, **more: str) -> str:
    """A libpq DSN for a library that takes one: the site's, in the run's schema, the
    DSN's own options kept, and auto_explain in a plan capture's sessions."""
    from harness.queues.libraries import captures  # it reads plans with pandas: when asked

    options = f"-c search_path={spec.site.schema}"
    if spec.plans_file is not None:
        options += " " + captures.explain_options()
    own = psycopg.conninfo.conninfo_to_dict(spec.site.dsn).get("options") or ""
    return psycopg.conninfo.make_conninfo(spec.site.dsn, options=f"{own} {options}".strip(), **more)


def dsn_keywords(dsn: str, names: dict[str, str]) -> dict[str, Any]:
    """The DSN's parts a driver that reads no libpq DSN takes as keywords (asyncpg,
    node-postgres), renamed as `names` says, the port a number; sslmode is left to each."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    keywords: dict[str, Any] = {
        names[key]: value for key, value in info.items() if key in names and value
    }
    if "port" in keywords:
        keywords["port"] = int(keywords["port"])
    return keywords


@dataclass(frozen=True)
class PythonSpec:
    """What a Python library's programs are handed (picklable, and JSON for a fleet):
    where its queue is, the mapping of tenants onto its knobs, and the program's part.
    The annotations are what a fleet member validates (a library's spec narrows
    `mapping` to its own)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # a field it does not have is refused

    site: Site  # where it connects: on a fleet member, the member's own way to the server
    mapping: str
    concurrency: Concurrency = 1
    poll_interval_s: PollInterval = 0.01
    tenants: tuple[TenantId, ...] = ()  # every tenant a worker must name (a queue per tenant)
    schedule: Schedule | None = None  # an enqueuer's batches
    plans_file: str | None = None  # a plan capture: auto_explain's notices go there

    @classmethod
    def of(cls, site: Site, inputs: RunInputs, mapping: str, **more: Any) -> Self:
        """The spec of a run's queue: its site, the scenario's poll, every tenant named."""
        return cls(
            site=site,
            mapping=mapping,
            poll_interval_s=inputs.scenario.poll_interval_ms / 1000,
            tenants=tuple(tenant_ids(inputs, inputs.backlog)),
            **more,
        )

    @property
    def hold(self) -> bool:
        """In a plan capture each job holds its slot until the stop."""
        return self.plans_file is not None

    def serving(self, inputs: RunInputs, rows: BacklogRows) -> Self:
        """This spec naming the tenants of the backlog being loaded: an explain variant's
        backlog has its own idle tenants, which a worker of a queue or an entrypoint per
        tenant must name too (that is what its captured fetch costs)."""
        return replace(self, tenants=tuple(tenant_ids(inputs, rows)))


class LibrarySpec(Protocol):
    """What every library's spec has: where it connects, and a capture's plans file."""

    @property
    def site(self) -> Site: ...

    @property
    def plans_file(self) -> str | None: ...


SpecT = TypeVar("SpecT", bound=LibrarySpec)


@dataclass(frozen=True)
class _Schema:
    schema: SchemaName  # the schema a spec travels with (its site's; the DSN never does)


_SCHEMA = TypeAdapter(_Schema)
ProgramEntry = Callable[[int, SpecT, Signals], None]


def register_programs(
    library: str, spec: type[SpecT], worker: ProgramEntry[SpecT], enqueuer: ProgramEntry[SpecT]
) -> None:
    """A library's worker and enqueuer as programs a fleet member may run
    (harness/queues/programs.py): its spec travels without its DSN (the member connects
    with its own) and without a plans file (a capture runs on the coordinator's host)."""
    adapter = TypeAdapter(spec)

    def send(program: SpecT) -> Wire:
        if program.plans_file is not None:
            raise ValueError("a plan capture runs on the coordinator's host only")
        data = adapter.dump_python(program, mode="json")
        sent = {key: value for key, value in data.items() if key not in ("site", "plans_file")}
        return {**sent, "schema": program.site.schema}

    def receive(data: Wire, local: Local) -> SpecT:
        fields = dict(data)
        schema = _SCHEMA.validate_python({"schema": fields.pop("schema", None)}).schema
        return adapter.validate_python({**fields, "site": Site(local.dsn, schema)})

    register(Registered(f"{library}.worker", "worker", worker, spec, send, receive))
    register(Registered(f"{library}.enqueuer", "enqueuer", enqueuer, spec, send, receive))


async def wait_event(event: Event) -> None:
    """A multiprocessing event awaited without blocking the event loop's other tasks."""
    while not event.is_set():
        await asyncio.sleep(STOP_POLL_S)


def await_turn(signals: Signals, index: int) -> None:
    """In a plan capture, slot `index` fetches once the slots before it hold their jobs:
    fetch k then runs with the k - 1 jobs before it running, whatever the processes'
    start order."""
    while not all(signals.holding[slot] for slot in range(index)):
        if signals.stop.is_set():
            return
        time.sleep(STOP_POLL_S)


def run_enqueuer(
    index: int,
    signals: Signals,
    schedule: Schedule | None,
    sending: Callable[[], AbstractAsyncContextManager[Enqueue]],
) -> None:
    """An enqueuer process of a Python library: its client opened by `sending`, the slot
    ready once it is, the schedule handed to the enqueue it yields, the client closed."""

    async def enqueuer() -> None:
        assert schedule is not None, "an enqueuer's spec carries its schedule"
        async with sending() as enqueue:
            signals.ready[index] = 1
            await run_schedule(signals, schedule, enqueue)

    run_program(index, signals, lambda report: asyncio.run(enqueuer()))


def load_through(sending: AbstractAsyncContextManager[Enqueue], jobs: list[Job]) -> None:
    """A backlog through the library's own client and enqueue, before the clock starts,
    as its enqueuers send a batch."""

    async def load() -> None:
        async with sending as enqueue:
            await enqueue(jobs)

    asyncio.run(load())


async def run_schedule(signals: Signals, schedule: Schedule, enqueue: Enqueue) -> None:
    """Each batch at its offset from the start, through the library's bulk enqueue."""
    await wait_event(signals.start)
    loop = asyncio.get_running_loop()
    began = loop.time()
    for at_s, jobs in schedule:
        delay = at_s - (loop.time() - began)
        if delay > 0:
            await asyncio.sleep(delay)
        if signals.stop.is_set():
            return
        await enqueue(jobs)
    await wait_event(signals.stop)  # an enqueuer that exits early would look like one that failed


def record_run(report: WorkerReport, signals: Signals, index: int, run: TaskRun) -> None:
    """The task log: one entry per run of the task, and the process's done count."""
    report.task_runs.append(run)
    claim_ms = run.claim_ms if run.claim_ms is not None else NO_CLAIM_MS
    report.claims.append((run.job, run.tenant, claim_ms))
    signals.done[index] += 1


class FetchTimes:
    """The library's fetch call timed from the outside, for each job it brought: what a
    library's claim latency is (a batch's call for each of its jobs). The wrapped call is
    the library's own, unchanged; the task looks its job up once it runs."""

    def __init__(self) -> None:
        self.by_id: dict[str, float] = {}

    def wrap(self, fetch: Callable[..., Awaitable[Any]], ids: Callable[[Any], list[str]]) -> Any:
        """`fetch` timed; `ids` names the jobs of what it returned."""

        async def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            fetched = await fetch(*args, **kwargs)
            elapsed_ms = (time.perf_counter() - began) * 1000
            for job_id in ids(fetched):
                self.by_id[job_id] = elapsed_ms
            return fetched

        return timed

    def claim_ms(self, job_id: str) -> float | None:
        return self.by_id.pop(job_id, None)


def shares(total: int, parts: int) -> list[int]:
    """`total` workers over `parts` processes, as evenly as they go (the first take the
    remainder), none empty."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if index < total % parts else 0) for index in range(parts)]


@dataclass(frozen=True)
class LibraryRow:
    """A job as a library's own tables hold it after a repetition."""

    library_id: str
    job: int | None  # None where the payload is gone with the finished job (pgqueuer)
    tenant: int | None
    done: bool
    enqueued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None


def analyze(conn: psycopg.Connection[Any], schema: str | None = None) -> None:
    """Every table of the run's schema analyzed, or of `schema` (a library's own)."""
    statements = conn.execute(sql("analyze_tables"), {"schema": schema}).fetchall()  # type: ignore[arg-type]
    for (statement,) in statements:
        conn.execute(statement)


def library_rows(
    conn: psycopg.Connection[Any], block: str, params: dict[str, Any] | None = None
) -> list[LibraryRow]:
    found = conn.execute(sql(block), params or {})  # type: ignore[call-overload]
    return [LibraryRow(*row) for row in found]


def ledger_of(rows: list[LibraryRow], reports: list[WorkerReport]) -> Ledger:
    """Every job from the library's tables, completed by its task log; a job the tables no
    longer hold (deleted when done) from the task's own record of it."""
    runs = {run.library_id: (report.worker, run) for report in reports for run in report.task_runs}
    records = [_record(row, runs.get(row.library_id)) for row in rows]
    held = {row.library_id for row in rows}
    records += [_from_run(w, run) for key, (w, run) in runs.items() if key not in held]
    claims = [run.job for report in reports for run in report.task_runs]
    return Ledger(sorted(records, key=lambda record: record.job_id), claims)


def _record(row: LibraryRow, seen: tuple[int, TaskRun] | None) -> JobRecord:
    worker, run = seen if seen is not None else (None, None)
    job = row.job if row.job is not None else (run.job if run else -1)
    tenant = row.tenant if row.tenant is not None else (run.tenant if run else -1)
    enqueued = _first(row.enqueued_at, run.enqueued_at if run else None)
    if enqueued is None:
        raise RuntimeError(f"job {job} (library id {row.library_id}) has no enqueue time")
    return JobRecord(
        job_id=job,
        tenant_id=tenant,
        status="done" if row.done else "not finished",
        enqueued_at=enqueued,
        started_at=_first(row.started_at, run.started_at if run else None),
        finished_at=_first(row.finished_at, run.finished_at if run else None),
        worker=worker,
        claim_ms=run.claim_ms if run else None,
    )


def _from_run(worker: int, run: TaskRun) -> JobRecord:
    assert run.enqueued_at is not None  # a library that deletes done jobs has its task read them
    return JobRecord(
        job_id=run.job,
        tenant_id=run.tenant,
        status="done",
        enqueued_at=run.enqueued_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        worker=worker,
        claim_ms=run.claim_ms,
    )


def _first(*moments: datetime | None) -> datetime | None:
    return next((moment for moment in moments if moment is not None), None)
