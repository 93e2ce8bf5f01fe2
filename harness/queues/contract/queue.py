"""ContractQueue: any declared adapter as an implementation of the queue seam, whatever
its language (docs/adapters.md).

Each of the repetition's programs (a worker, an enqueuer) is a harness process that
starts the adapter's process in the program's role and speaks protocol 1 with it: the
config on stdin, then `start`, `enqueue` and `stop`; its events (`ready`, `job`,
`enqueued`, `stopped`, ...) validated as they arrive. The one-shot roles run from the
coordinator: `install` (its objects in the run's schema), `versions` (what run.json
records), `ledger` (the jobs its library's tables still hold). The books are checked
against the task log (one `job` event per run of its task, with its three moments on the
server's clock) and the ledger, as for every library.

A spec travels to a fleet member as the adapter's name and its folder's digest, never a
path: the member runs its own install's adapter of that name, refused if it differs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import psycopg
from pydantic import BaseModel, ConfigDict, Field

from harness.queues.base import (
    ExplainedFetch,
    JobRecord,
    Ledger,
    ProgramMain,
    QueueEntry,
    Signals,
    Site,
    TaskRun,
    WorkerReport,
)
from harness.queues.contract import runtime
from harness.queues.contract.manifest import Adapter, MappingDecl, MappingName, load_adapters
from harness.queues.contract.process import STOP_BOUND_S, AdapterProcess, run_role
from harness.queues.contract.protocol import (
    AdapterFailed,
    Config,
    Connection,
    Enqueued,
    Installed,
    JobDone,
    ProtocolError,
    Ready,
    Record,
    Recorded,
    Requeued,
    Stopped,
    Versions,
    command,
    enqueue_command,
)
from harness.queues.libraries import captures, common
from harness.queues.libraries.library import LibraryQueue
from harness.queues.process import run_program
from harness.queues.programs import (
    Concurrency,
    Local,
    Refused,
    Registered,
    SchemaName,
    TenantCap,
    TenantId,
    Wire,
    register,
)
from harness.results.document import TUNED, UNLIKE_THE_SCENARIO
from harness.scenario.inputs import RunInputs
from harness.scenario.traits import QueueTraits
from harness.scenario.workload import BacklogRows
from harness.server.connections import connect, session_name
from harness.server.dsn import password_for

BACKLOG_CHUNK = 10_000
# A mapping's option read by the harness as well as the adapter: how many of the workers
# one of its processes runs (graphile-worker's perfTest: 24 jobs a process); the harness
# starts as many worker processes as that takes and shares the workers among them.
JOBS_PER_PROCESS = "jobs_per_process"
TUNED_SUFFIX = "_tuned"  # a strategy at its library's maintainers' settings: its options
PollMs = Annotated[float, Field(gt=0, le=10_000)]


@dataclass(frozen=True)
class ContractSpec:
    """What an adapter's programs are handed (picklable): the adapter, its mapping,
    where its queue is, and the program's part."""

    adapter: Adapter
    mapping: str
    site: Site  # where it connects: on a fleet member, the member's own way to the server
    poll_interval_ms: float
    cap: int = 1
    concurrency: int = 1
    tenants: tuple[int, ...] = ()
    schedule: common.Schedule | None = None
    plans_file: str | None = None  # a plan capture: auto_explain's notices go there

    def config(self, role: str, connection: Connection | None = None) -> Config:
        declared = self.adapter.declared(self.mapping)
        return Config.model_validate(
            {
                "role": role,
                "adapter": self.adapter.name,
                "mapping": self.mapping,
                "options": declared.options,
                "schema": self.site.schema,
                "connection": connection or connection_of(self.site.dsn),
                "concurrency": self.concurrency,
                "poll_interval_ms": self.poll_interval_ms,
                "cap": self.cap,
                "tenants": list(self.tenants),
                "hold": self.plans_file is not None,
                "explain_options": captures.explain_options() if self.plans_file else None,
            }
        )


def connection_of(dsn: str) -> Connection:
    """The server as libpq reaches it for `dsn` (its environment, service file and
    defaults applied), in parts, with the password libpq would send."""
    given = psycopg.conninfo.conninfo_to_dict(dsn)
    with connect(dsn, connect_timeout=10) as conn:
        info = conn.info
        host, port, user, dbname = info.host, info.port, info.user, info.dbname
    return Connection(
        host=host,
        port=port,
        user=user,
        password=password_for(dsn),
        dbname=dbname,
        sslmode=_text(given.get("sslmode")),
        options=_text(given.get("options")),
        application_name=session_name(),
    )


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


# -- the programs ---------------------------------------------------------------------


def worker_main(index: int, spec: ContractSpec, signals: Signals) -> None:
    run_program(index, signals, lambda report: _work(index, spec, signals, report))


def _work(index: int, spec: ContractSpec, signals: Signals, report: WorkerReport) -> None:
    adapter = AdapterProcess(spec.adapter, spec.config("worker"), _plans_sink(spec))
    try:
        adapter.expect(Ready)
        signals.ready[index] = 1
        signals.start.wait()
        adapter.send(command("start"))
        reader = _Reader(adapter, index, signals, report)
        reader.start()
        while not signals.stop.wait(0.05) and reader.is_alive():
            pass  # an adapter that fails stops the reader: its error is this program's
        _stop(adapter, reader)
    finally:
        adapter.close()


def _stop(adapter: AdapterProcess, reader: _Reader) -> None:
    if reader.error is not None:
        raise reader.error
    adapter.send(command("stop"))
    reader.join(timeout=STOP_BOUND_S)
    if reader.error is not None:
        raise reader.error
    if reader.is_alive():
        raise AdapterFailed(
            f"adapter {adapter.adapter.name} did not stop within {STOP_BOUND_S:g} s of `stop`"
        )


def _plans_sink(spec: ContractSpec) -> Any:
    if spec.plans_file is None:
        return None
    return partial(captures.append_notice, spec.plans_file)


class _Reader(threading.Thread):
    """The worker's events while it runs: each job done goes into the task log."""

    def __init__(
        self, adapter: AdapterProcess, index: int, signals: Signals, report: WorkerReport
    ) -> None:
        super().__init__(daemon=True)
        self.adapter, self.index, self.signals, self.report = adapter, index, signals, report
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            while not isinstance(event := self.adapter.next_event(), Stopped):
                self._take(event)
        except Exception as error:
            self.error = error

    def _take(self, event: object) -> None:
        if isinstance(event, JobDone):
            common.record_run(self.report, self.signals, self.index, task_run(event))
        elif isinstance(event, Requeued):
            self.report.lost_races += 1  # the task found its tenant at its cap
        else:
            raise ProtocolError(
                f"adapter {self.adapter.adapter.name}: protocol: stdout line "
                f"{self.adapter.lines}: '{event.event}' while working"  # type: ignore[attr-defined]
            )


def task_run(event: JobDone) -> TaskRun:
    return TaskRun(
        job=event.job,
        tenant=event.tenant,
        library_id=event.id,
        enqueued_at=event.enqueued_at,
        started_at=event.started_at,
        finished_at=event.finished_at,
    )


def enqueuer_main(index: int, spec: ContractSpec, signals: Signals) -> None:
    run_program(index, signals, lambda report: _enqueue(index, spec, signals))


def _enqueue(index: int, spec: ContractSpec, signals: Signals) -> None:
    adapter = AdapterProcess(spec.adapter, spec.config("enqueuer"))
    try:
        adapter.expect(Ready)
        signals.ready[index] = 1
        signals.start.wait()
        began = time.monotonic()
        for at_s, jobs in spec.schedule or []:
            delay = at_s - (time.monotonic() - began)
            if delay > 0:
                time.sleep(delay)
            if signals.stop.is_set():
                break
            enqueue(adapter, jobs)
        signals.stop.wait()
        adapter.send(command("stop"))
        adapter.expect(Stopped)
    finally:
        adapter.close()


def enqueue(adapter: AdapterProcess, jobs: list[common.Job]) -> None:
    """One batch, acknowledged with its count."""
    adapter.send(enqueue_command(jobs))
    said = adapter.expect(Enqueued)
    if said.count != len(jobs):
        raise ProtocolError(
            f"adapter {adapter.adapter.name}: protocol: enqueued {said.count} of a batch of "
            f"{len(jobs)}"
        )


# -- how a spec travels to a fleet member ----------------------------------------------


class _WireSpec(BaseModel):
    """A spec as a fleet member receives it, every field checked: the adapter by name and
    digest (the member's own install must have it), never a path."""

    model_config = ConfigDict(extra="forbid")

    adapter: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
    digest: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    mapping: MappingName
    schema_: SchemaName = Field(alias="schema")
    poll_interval_ms: PollMs
    cap: TenantCap = 1
    concurrency: Concurrency = 1
    tenants: tuple[TenantId, ...] = ()
    schedule: common.Schedule | None = None


def _send(spec: ContractSpec) -> Wire:
    if spec.plans_file is not None:
        raise ValueError("a plan capture runs on the coordinator's host only")
    wire = _WireSpec.model_validate(
        {
            "adapter": spec.adapter.name,
            "digest": spec.adapter.digest,
            "mapping": spec.mapping,
            "schema": spec.site.schema,
            "poll_interval_ms": spec.poll_interval_ms,
            "cap": spec.cap,
            "concurrency": spec.concurrency,
            "tenants": spec.tenants,
            "schedule": spec.schedule,
        }
    )
    return wire.model_dump(mode="json", by_alias=True)


def _receive(data: Wire, local: Local) -> ContractSpec:
    wire = _WireSpec.model_validate(data)
    adapter = local_adapter(local, wire.adapter, wire.digest)
    try:
        adapter.declared(wire.mapping)
    except ValueError as error:
        raise Refused(str(error)) from None
    return ContractSpec(
        adapter=adapter,
        mapping=wire.mapping,
        site=Site(local.dsn, wire.schema_),
        poll_interval_ms=wire.poll_interval_ms,
        cap=wire.cap,
        concurrency=wire.concurrency,
        tenants=wire.tenants,
        schedule=wire.schedule,
    )


def local_adapter(local: Local, name: str, digest: str) -> Adapter:
    """The member's own adapter of that name, if its folder is the coordinator's."""
    found = local.adapters.get(name)
    if found is None:
        raise Refused(
            f"adapter '{name}' is not in this member's install; an adapter of the "
            "coordinator's --adapters-dir needs the same folder here (harness worker "
            "--adapters-dir DIR)"
        )
    if found.digest != digest:
        raise Refused(
            f"adapter '{name}': this member's folder differs from the coordinator's (its "
            f"digest is {found.digest[:12]}... here, {digest[:12]}... there); run the same "
            "harness version and --adapters-dir on every host"
        )
    return found


register(Registered("adapter.worker", "worker", worker_main, ContractSpec, _send, _receive))
register(Registered("adapter.enqueuer", "enqueuer", enqueuer_main, ContractSpec, _send, _receive))


# -- the queue ------------------------------------------------------------------------


class ContractQueue(LibraryQueue):
    """A declared adapter's mapping as a queue of the seam."""

    def __init__(
        self, name: str, adapter: Adapter, mapping: str, site: Site, inputs: RunInputs
    ) -> None:
        runtime.require(adapter)  # one line naming what to install, before anything starts
        runtime.run_dir(adapter)  # prepared before any process starts (`npm ci`, once)
        self.adapter, self.label = adapter, adapter.name
        self.fetch_marker = adapter.manifest.fetch_marker or ""
        spec = ContractSpec(
            adapter=adapter,
            mapping=mapping,
            site=site,
            poll_interval_ms=inputs.scenario.poll_interval_ms,
            cap=inputs.scenario.tenant_cap or 1,
            tenants=tuple(common.tenant_ids(inputs, inputs.backlog)),
        )
        super().__init__(name, site, inputs, spec)

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        return worker_main, enqueuer_main

    def processes(self, count: int) -> int:
        return worker_processes(self.adapter.declared(self.spec.mapping), count)

    def install(self, conn: psycopg.Connection[Any]) -> None:
        run_role(self.adapter, self.spec.config("install"), Installed)

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        self.spec = replace(self.spec, tenants=tuple(common.tenant_ids(self.inputs, rows)))
        adapter = AdapterProcess(self.adapter, self.spec.config("enqueuer"))
        try:
            adapter.expect(Ready)
            jobs = common.backlog_jobs(self.inputs, rows)
            for start in range(0, len(jobs), BACKLOG_CHUNK):
                enqueue(adapter, jobs[start : start + BACKLOG_CHUNK])
            adapter.send(command("stop"))
            adapter.expect(Stopped)
        finally:
            adapter.close()
        common.analyze(conn)

    def ledger(self, conn: psycopg.Connection[Any], reports: list[WorkerReport]) -> Ledger:
        records, _ = run_role(self.adapter, self.spec.config("ledger"), Recorded, (Record,))
        return ledger_of(records, reports)

    def explained(self, plans_file: str) -> list[ExplainedFetch]:
        return captures.explained(plans_file, self.fetch_marker)

    def provenance(self) -> dict[str, Any]:
        _, versions = run_role(self.adapter, self.spec.config("versions"), Versions)
        manifest = self.adapter.manifest
        return {
            "adapter": self.adapter.name,
            "protocol": manifest.protocol,
            "library": manifest.library,
            "language": manifest.language,
            "adapter_sha256": self.adapter.digest,
            "versions": versions.versions,
            "mapping": self.spec.mapping,
            "settings": versions.settings,
            UNLIKE_THE_SCENARIO: versions.unlike_the_scenario,
            **self._tuned(),
        }

    def _tuned(self) -> dict[str, Any]:
        return tuned_settings(self.adapter.declared(self.spec.mapping))


def worker_processes(declared: MappingDecl, count: int) -> int:
    """How many worker processes share `count` workers: one, or as many as the mapping's
    `jobs_per_process` takes."""
    per_process = declared.options.get(JOBS_PER_PROCESS)
    if not isinstance(per_process, int) or per_process < 1:
        return 1
    return -(-count // per_process)


def tuned_settings(declared: MappingDecl) -> dict[str, Any]:
    """A `_tuned` strategy's settings, for the tables that set it beside its default: its
    mapping's options, as the manifest names them; nothing for any other strategy."""
    if not declared.strategy.endswith(TUNED_SUFFIX):
        return {}
    return {TUNED: dict(declared.options)}


def ledger_of(records: list[Record], reports: list[WorkerReport]) -> Ledger:
    """Every job: from the task log (its `job` events), marked unfinished where the
    library's tables say so; a job only the tables hold is not finished."""
    runs = {run.job: (report.worker, run) for report in reports for run in report.task_runs}
    state = {record.job: record for record in records}
    jobs = sorted(set(runs) | set(state))
    ledger = [_record(job, runs.get(job), state.get(job)) for job in jobs]
    claims = [run.job for report in reports for run in report.task_runs]
    return Ledger(ledger, claims)


def _record(job: int, seen: tuple[int, TaskRun] | None, record: Record | None) -> JobRecord:
    if seen is None:
        assert record is not None  # a job only the library's tables hold: never reported run
        return JobRecord(job, record.tenant, "not finished", record.enqueued_at, None, None)
    worker, run = seen
    status = "done"
    if record is not None and record.state != "done":  # the library has it otherwise
        status = f"not finished ({record.state})"
    return JobRecord(
        job_id=job,
        tenant_id=run.tenant,
        status=status,
        enqueued_at=_moment(run.enqueued_at),
        started_at=run.started_at,
        finished_at=run.finished_at,
        worker=worker,
    )


def _moment(value: datetime | None) -> datetime:
    assert value is not None  # a `job` event always carries its three moments
    return value


# -- the catalog ----------------------------------------------------------------------


def entries(adapters_dir: Path | None = None) -> list[QueueEntry]:
    """Every declared adapter's mappings as queues a scenario may name."""
    found = []
    for adapter in load_adapters(adapters_dir).values():
        traits = _traits(adapter)
        for declared in adapter.manifest.mappings:
            make = partial(ContractQueue, declared.strategy, adapter, declared.mapping)
            requires = (runtime.AdapterRuntime(adapter),)
            found.append(QueueEntry(declared.strategy, traits, make, requires=requires))
    return found


def _traits(adapter: Adapter) -> QueueTraits:
    if adapter.manifest.fetch_marker is not None:
        return common.LIBRARY_TRAITS
    return replace(
        common.LIBRARY_TRAITS,
        explain="its manifest names no fetch_marker: its fetch cannot be told among its plans",
    )
