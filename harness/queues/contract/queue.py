"""ContractQueue: any declared adapter as an implementation of the queue seam, whatever
its language (docs/adapters.md): the one door of every queue library.

Each of the repetition's programs (a worker, an enqueuer) is a harness process that
starts the adapter's process in the program's role and speaks the contract with it: the
config on stdin, then `start`, `enqueue` and `stop`; its events (`ready`, `job`,
`enqueued`, `stopped`, ...) validated as they arrive. The one-shot roles run from the
coordinator: `install` (its objects in the run's schema, or a refusal with its reason),
`versions` (what run.json records), `ledger` (the jobs its library's tables still hold).
The books are checked against the task log (one `job` event per run of its task) and the
ledger's records (harness/queues/contract/jobs.py).

Everything the harness knows of a queue comes from its manifest: its mappings, how many
processes share the workers, what a tuned mapping is tuned to and where its maintainers
say so, how its fetch is told among a capture's plans, the schemas its library insists
on, and so what it cannot take (its traits). A spec travels to a fleet member as the
adapter's name and its folder's digest, never a path: the member runs its own install's
adapter of that name, refused if it differs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Annotated, Any

import psycopg
from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessError
from harness.queues.base import (
    ExplainedFetch,
    Ledger,
    Program,
    QueueEntry,
    QueueRefused,
    Signals,
    Site,
    TimedFetch,
    WorkerReport,
)
from harness.queues.contract import captures, jobs, runtime
from harness.queues.contract.manifest import Adapter, Fetch, MappingDecl, MappingName, load_adapters
from harness.queues.contract.process import AdapterProcess, run_role
from harness.queues.contract.protocol import (
    AdapterFailed,
    Config,
    Connection,
    Enqueued,
    Installed,
    ProtocolError,
    Ready,
    Record,
    Recorded,
    Refused,
    Stopped,
    Versions,
    command,
    enqueue_command,
)
from harness.queues.contract.supervisor import one_line, schedule, supervise
from harness.queues.process import run_program
from harness.queues.programs import (
    Concurrency,
    Local,
    Registered,
    SchemaName,
    TenantCap,
    TenantId,
    TenantWeight,
    Wire,
    register,
)
from harness.queues.programs import Refused as MemberRefused
from harness.results.document import QueueProvenance
from harness.scenario.arrivals import Arrivals
from harness.scenario.inputs import RunInputs
from harness.scenario.model import MAX_WORKERS, WorkerKill
from harness.scenario.traits import Declared, QueueTraits, Setting
from harness.scenario.workload import BacklogRows
from harness.server.connections import RUN_TOKEN, connect, session_name, worker_session_name
from harness.server.dsn import password_for

BACKLOG_CHUNK = 10_000
PollMs = Annotated[float, Field(gt=0, le=10_000)]
TimeoutS = Annotated[float, Field(gt=0, le=86_400)]
FAULTS_REFUSED = (
    "crashes, leases and retries are the harness's own; a library has its own: "
    "faults.worker_kills kills its workers, backend_kills their sessions, server_crash "
    "crashes the server under them"
)
NO_FETCH = "its manifest names no fetch: its fetch cannot be told among its plans"


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
    weights: tuple[int, ...] = ()  # each tenant's weight, as `tenants`
    timeout_s: float = 60.0
    processes: int = 1  # the worker processes sharing the repetition's workers
    process: int = 0  # this worker process's number, from 0
    schedule: jobs.Schedule | None = None
    plans_file: str | None = None  # a plan capture: auto_explain's notices go there
    # a timed worker explained (long_transaction.explain_fetches): no job held, the node
    # timings off, each notice stamped with its arrival in `plans_file`
    timed_plans: bool = False
    plans_gate: str | None = None  # a horizon's: plans kept only while this file exists
    kills: tuple[WorkerKill, ...] = ()  # this worker process's (faults.worker_kills)
    # faults.backend_kills or server_crash: a worker that exits on its own is started
    # again this long after, an enqueuer's failed stop counted (None: either fails the run)
    restart_exited_s: float | None = None
    # The run's token, as the process that made the spec drew it: a worker program (a
    # process of the crew) draws its own, and its adapter's sessions must carry the run's.
    token: str = RUN_TOKEN

    def config(self, role: str, connection: Connection | None = None) -> Config:
        declared = self.adapter.declared(self.mapping)
        connection = connection or connection_of(self.site.dsn)
        # The run's sessions; its workers' marked so, which faults.backend_kills terminates
        named = worker_session_name if role == "worker" else session_name
        connection = connection.model_copy(update={"application_name": named(self.token)})
        return Config.model_validate(
            {
                "protocol": self.adapter.manifest.protocol,
                "role": role,
                "adapter": self.adapter.name,
                "mapping": self.mapping,
                "options": declared.options,
                "schema": self.site.schema,
                "connection": connection,
                "concurrency": self.concurrency,
                "poll_interval_ms": self.poll_interval_ms,
                "cap": self.cap,
                "tenants": list(self.tenants),
                "weights": list(self.weights),
                "timeout_s": self.timeout_s,
                "processes": self.processes,
                "process": self.process,
                "hold": self.plans_file is not None and not self.timed_plans,
                "explain_options": (
                    captures.explain_options(timing=not self.timed_plans)
                    if self.plans_file
                    else None
                ),
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
    """The worker adapter, kept by a supervisor that kills it as faults.worker_kills says
    (without kills, it just runs to the stop)."""

    config = spec.config("worker")  # once, while the server is up: each restart's too

    def start() -> AdapterProcess:
        adapter = AdapterProcess(spec.adapter, config, _plans_sink(spec))
        try:
            adapter.expect(Ready)
        except BaseException:
            adapter.close()
            raise
        return adapter

    due = schedule(spec.kills, spec.timeout_s)
    supervise(index, signals, report, start, due, spec.restart_exited_s)


def _plans_sink(spec: ContractSpec) -> Any:
    if spec.plans_file is None:
        return None
    if spec.timed_plans:
        return partial(captures.append_stamped, spec.plans_file, gate=spec.plans_gate)
    return partial(captures.append_notice, spec.plans_file)


def enqueuer_main(index: int, spec: ContractSpec, signals: Signals) -> None:
    run_program(index, signals, lambda report: _enqueue(index, spec, signals, report))


def _enqueue(index: int, spec: ContractSpec, signals: Signals, report: WorkerReport) -> None:
    adapter = AdapterProcess(spec.adapter, spec.config("enqueuer"))
    try:
        adapter.expect(Ready)
        signals.ready[index] = 1
        signals.start.wait()
        began = time.monotonic()
        for at_s, batch in spec.schedule or []:
            delay = at_s - (time.monotonic() - began)
            if delay > 0:
                time.sleep(delay)
            if signals.stop.is_set():
                break
            enqueue(adapter, batch)
        signals.stop.wait()
        _stop_enqueuer(adapter, spec, report, time.monotonic() - began)
    finally:
        adapter.close()


def _stop_enqueuer(
    adapter: AdapterProcess, spec: ContractSpec, report: WorkerReport, elapsed: float
) -> None:
    """Its `stop`, `stopped` awaited. Under faults that cut its session (a server crash,
    once every batch was acknowledged), a failure to stop is counted, not fatal: its
    work was done."""
    try:
        adapter.send(command("stop"))
        adapter.expect(Stopped)
    except AdapterFailed as error:  # a ProtocolError is no AdapterFailed: it is raised
        if spec.restart_exited_s is None:
            raise
        report.exits.append((round(elapsed, 3), one_line(f"enqueuer, at its stop: {error}")))


def enqueue(adapter: AdapterProcess, batch: list[jobs.Job]) -> None:
    """One batch, acknowledged with its count."""
    adapter.send(enqueue_command(batch))
    said = adapter.expect(Enqueued)
    if said.count != len(batch):
        raise ProtocolError(
            f"adapter {adapter.adapter.name}: protocol: enqueued {said.count} of a batch of "
            f"{len(batch)}"
        )


def enqueue_all(spec: ContractSpec, schedule: jobs.Schedule) -> None:
    """Batches through one enqueuer adapter, each at its offset from the first (a
    backlog's all at 0; the conformance kit's small scenario)."""
    adapter = AdapterProcess(spec.adapter, spec.config("enqueuer"))
    try:
        adapter.expect(Ready)
        began = time.monotonic()
        for at_s, batch in schedule:
            time.sleep(max(0.0, at_s - (time.monotonic() - began)))
            enqueue(adapter, batch)
        adapter.send(command("stop"))
        adapter.expect(Stopped)
    finally:
        adapter.close()


def recorded(spec: ContractSpec) -> list[Record]:
    """The `ledger` role's records: each job its library's tables still hold."""
    records, _ = run_role(spec.adapter, spec.config("ledger"), (Recorded,), (Record,))
    return records


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
    weights: tuple[TenantWeight, ...] = ()
    timeout_s: TimeoutS = 60.0
    processes: Concurrency = 1
    process: Annotated[int, Field(ge=0, le=MAX_WORKERS)] = 0
    schedule: jobs.Schedule | None = None


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
            "weights": spec.weights,
            "timeout_s": spec.timeout_s,
            "processes": spec.processes,
            "process": spec.process,
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
        raise MemberRefused(str(error)) from None
    return ContractSpec(
        adapter=adapter,
        mapping=wire.mapping,
        site=Site(local.dsn, wire.schema_),
        poll_interval_ms=wire.poll_interval_ms,
        cap=wire.cap,
        concurrency=wire.concurrency,
        tenants=wire.tenants,
        weights=wire.weights,
        timeout_s=wire.timeout_s,
        processes=wire.processes,
        process=wire.process,
        schedule=wire.schedule,
    )


def local_adapter(local: Local, name: str, digest: str) -> Adapter:
    """The member's own adapter of that name, if its folder is the coordinator's."""
    found = local.adapters.get(name)
    if found is None:
        raise MemberRefused(
            f"adapter '{name}' is not in this member's install; an adapter of the "
            "coordinator's --adapters-dir needs the same folder here (harness worker "
            "--adapters-dir DIR)"
        )
    if found.digest != digest:
        raise MemberRefused(
            f"adapter '{name}': this member's folder differs from the coordinator's (its "
            f"digest is {found.digest[:12]}... here, {digest[:12]}... there); run the same "
            "harness version and --adapters-dir on every host"
        )
    return found


register(Registered("adapter.worker", "worker", worker_main, ContractSpec, _send, _receive))
register(Registered("adapter.enqueuer", "enqueuer", enqueuer_main, ContractSpec, _send, _receive))


# -- the queue ------------------------------------------------------------------------


class ContractQueue:
    """A declared adapter's mapping as a queue of the seam, and its FetchExplainer."""

    def __init__(
        self, name: str, adapter: Adapter, mapping: str, site: Site, inputs: RunInputs
    ) -> None:
        runtime.require(adapter)  # one line naming what to install, before anything starts
        runtime.run_dir(adapter)  # prepared before any process starts (`npm ci`, once)
        self.name, self.adapter, self.site, self.inputs = name, adapter, site, inputs
        self.declared = adapter.declared(mapping)
        self.traits = traits_of(adapter, self.declared)
        self.spec = ContractSpec(
            adapter=adapter,
            mapping=mapping,
            site=site,
            poll_interval_ms=inputs.scenario.poll_interval_ms,
            cap=inputs.scenario.tenant_cap or 1,
            timeout_s=inputs.scenario.timeout_s,
        )
        self.spec = self._serving(inputs.backlog)

    def _serving(self, rows: BacklogRows | None) -> ContractSpec:
        """The spec naming every tenant of the run, and of the backlog being loaded: an
        explain variant's has its own idle tenants, which a worker of a queue or an
        entrypoint per tenant must name too (that is what its captured fetch costs)."""
        tenants = jobs.tenant_ids(self.inputs, rows)
        weights = jobs.tenant_weights(self.inputs, tenants, rows)
        return replace(self.spec, tenants=tuple(tenants), weights=tuple(weights))

    # what a repetition asks of it

    def outside_schemas(self) -> tuple[str, ...]:
        return tuple(self.adapter.manifest.outside_schemas)

    def install(self, conn: psycopg.Connection[Any], rows: BacklogRows | None = None) -> None:
        """Its objects, by its install role, for the run's tenants and the backlog's;
        QueueRefused (one line) where its library cannot run here as configured."""
        self.spec = self._serving(rows if rows is not None else self.inputs.backlog)
        _, ended = run_role(self.adapter, self.spec.config("install"), (Installed, Refused))
        if isinstance(ended, Refused):
            raise QueueRefused(self.name, ended.reason)

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        loaded = jobs.backlog_jobs(self.inputs, rows)
        chunks = range(0, len(loaded), BACKLOG_CHUNK)
        enqueue_all(self.spec, [(0.0, loaded[i : i + BACKLOG_CHUNK]) for i in chunks])
        jobs.analyze(conn)
        for schema in self.outside_schemas():
            jobs.analyze(conn, schema)

    def workers(self, count: int) -> list[Program]:
        shares = jobs.shares(count, worker_processes(self.declared, count))
        spec = replace(self.spec, processes=len(shares))
        kills = self.inputs.kills
        restart_exited_s = self.inputs.restart_exited_s
        for index, kill in enumerate(kills):
            if kill.worker >= len(shares):
                raise HarnessError(
                    f"faults.worker_kills[{index}]: worker {kill.worker} does not exist: "
                    f"{self.name} runs {count} workers in {len(shares)} process(es), "
                    "numbered from 0"
                )
        return [
            Program(
                "worker",
                worker_main,
                replace(
                    spec,
                    concurrency=share,
                    process=slot,
                    kills=tuple(kill for kill in kills if kill.worker == slot),
                    restart_exited_s=restart_exited_s,
                ),
                self._named(slot),
            )
            for slot, share in enumerate(shares)
        ]

    def _named(self, slot: int) -> str:
        return f"{self.adapter.name}-worker-{slot}"

    def enqueuers(self, schedules: list[Arrivals]) -> list[Program]:
        numbered = jobs.numbered_schedules(self.inputs, schedules)
        exited_s = self.inputs.restart_exited_s
        return [
            Program(
                "enqueuer",
                enqueuer_main,
                replace(self.spec, schedule=s, restart_exited_s=exited_s),
            )
            for s in numbered
        ]

    def ledger(self, conn: psycopg.Connection[Any], reports: list[WorkerReport]) -> Ledger:
        return jobs.ledger_of(
            recorded(self.spec), reports, unrecorded_ok=self.inputs.library_faults
        )

    def dequeue_sql(self) -> None:
        return None  # its fetch runs inside its library: captured from its worker instead

    def fetch_marker(self) -> str | None:
        """Its fetch's marker, as its `versions` or its manifest tell it."""
        found = self.versions.fetch or self.adapter.manifest.fetch_of(self.declared)
        return found.marker if found is not None else None

    def monitor(self, conn: psycopg.Connection[Any]) -> None:
        return None

    def recovery(self) -> None:
        return None  # its traits refuse faults: crashes, leases and retries are its own

    def explainer(self) -> ContractQueue | None:
        return self if self.traits.explain is None else None

    # what it records

    @cached_property
    def versions(self) -> Versions:
        """Its `versions` role, run once: its versions and the settings it used."""
        _, said = run_role(self.adapter, self.spec.config("versions"), (Versions,))
        return said  # type: ignore[return-value]

    def provenance(self) -> QueueProvenance:
        manifest, declared, versions = self.adapter.manifest, self.declared, self.versions
        promise = declared.recovery or manifest.recovery  # a recovery mapping's is its own
        return QueueProvenance(
            kind="adapter",
            library=manifest.library,
            language=manifest.language,
            mapping=declared.mapping,
            versions=dict(versions.versions),
            settings=dict(versions.settings),
            tuned=declared.tuned_settings(),
            tuned_sources=dict(declared.tuned.sources) if declared.tuned else {},
            unlike_the_scenario=list(versions.unlike_the_scenario),
            adapter=self.adapter.name,
            adapter_sha256=self.adapter.digest,
            protocol=manifest.protocol,
            replaces=str(self.adapter.replaces) if self.adapter.replaces else None,
            recovery=promise.model_dump() if promise is not None else None,
        )

    # its captured fetch (FetchExplainer)

    def capture_workers(self, count: int, plans_file: str) -> list[Program]:
        """One worker process with `count` slots, each job held: the adapter fetches in
        turn, so that fetch k runs with the k - 1 jobs before it still running."""
        spec = replace(self.spec, concurrency=count, plans_file=plans_file)
        return [Program("worker", worker_main, spec, f"{self.adapter.name}-capture")]

    def explained(self, plans_file: str) -> list[ExplainedFetch]:
        fetch = self.fetch()
        return captures.explained(plans_file, fetch.marker, fetch.locks, fetch.rows)

    def explained_workers(
        self, count: int, plans_dir: str, gate: str | None = None
    ) -> list[Program]:
        """Its timed workers, each process's plans in `plans_dir`/<slot>.plans (with
        `gate`, those that arrive while that file exists)."""
        return [
            replace(
                program,
                spec=replace(
                    program.spec,
                    plans_file=str(Path(plans_dir) / f"{slot}.plans"),
                    timed_plans=True,
                    plans_gate=gate,
                ),
            )
            for slot, program in enumerate(self.workers(count))
        ]

    def timed_fetches(self, plans_dir: str) -> list[TimedFetch]:
        fetch = self.fetch()
        found = [
            TimedFetch(at, plan.fetch())
            for path in sorted(Path(plans_dir).glob("*.plans"))
            for at, plan in captures.read_stamped(path, fetch.marker, fetch.locks, fetch.rows)
        ]
        return sorted(found, key=lambda timed: timed.at)

    def fetch(self) -> Fetch:
        """How its fetch is told: as its `versions` says for this config, else as its
        manifest does."""
        declared = self.adapter.manifest.fetch_of(self.declared)
        found = self.versions.fetch or declared
        if found is None:
            raise HarnessError(f"{self.name} cannot be explained: {NO_FETCH}")
        return found


def worker_processes(declared: MappingDecl, count: int) -> int:
    """How many worker processes share `count` workers, as the mapping declares: one, one
    per core or per worker (never more than the workers), or as many as
    `jobs_per_process` takes."""
    if declared.jobs_per_process is not None:
        return -(-count // declared.jobs_per_process)
    if declared.processes == "per_core":
        return min(count, os.cpu_count() or 1)
    return count if declared.processes == "per_worker" else 1


def traits_of(adapter: Adapter, declared: MappingDecl) -> QueueTraits:
    """What a mapping cannot take, from its manifest alone: the harness's faults and
    long transaction never (its library has its own); explain captures where the
    manifest says how its fetch is told."""
    explain = None if adapter.manifest.fetch_of(declared) is not None else NO_FETCH
    return QueueTraits(
        faults=FAULTS_REFUSED, explain=explain, declared=Declared(adapter.name, _setting(declared))
    )


def _setting(declared: MappingDecl) -> Setting:
    """Its settings as its manifest declares them: a recovery mapping's (its `recovery`
    promise), its maintainers' (`tuned`), or its library's defaults."""
    if declared.recovery is not None:
        return "recovery"
    return "tuned" if declared.tuned is not None else "default"


# -- the catalog ----------------------------------------------------------------------


def entries(adapters_dir: Path | None = None) -> list[QueueEntry]:
    """Every declared adapter's mappings as queues a scenario may name."""
    found = []
    for adapter in load_adapters(adapters_dir).values():
        requires = (runtime.AdapterRuntime(adapter),)
        for declared in adapter.manifest.mappings:
            make = partial(ContractQueue, declared.strategy, adapter, declared.mapping)
            traits = traits_of(adapter, declared)
            found.append(QueueEntry(declared.strategy, traits, make, requires=requires))
    return found
