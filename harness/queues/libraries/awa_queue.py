"""awa (the awa-pg wheel: Python over awa's Rust runtime) through its own code: its
migrations (`migrate`, then `awa.storage_auto_finalize_if_fresh`, the post-migrate step
its docs give external tooling, so that the queue storage is active before the first
worker), its COPY enqueue (`enqueue_many_copy`), its worker runtime (`AsyncClient.start`)
with the scenario's workers, and an async handler that sleeps the job's duration.

awa keeps everything in a schema of its own named `awa` (its migrations write `awa.` into
every statement): it cannot be confined to the run's schema, so the run declares it
(`outside_schemas`), and the harness refuses to run where one exists that it did not
make, makes it afresh with every repetition and drops it at the end
(harness/server/schema.py). One run of awa at a time per database.

Mappings of tenants onto its knobs:
  one_queue        every job on the queue "harness", `max_workers` = the scenario's workers
  weighted_queues  a queue per tenant, each `weight` = its tenant group's weight:, in
                   awa's weighted mode (`global_max_workers` = the scenario's workers,
                   `min_workers` 0): workers shared by weighted fair share among the
                   queues with work
Each at the harness's settings (its poll every `poll_interval_ms` of the scenario) and,
as `_tuned`, at its maintainers' (docs/real-queues.md): awa's own poll, 200 ms, and a
pool of `num_queues * 4 + 20` connections.

Its worker runtime runs a dispatcher per queue, woken by LISTEN/NOTIFY on `awa:<queue>`,
by a slot its queue frees, and by its poll. Each dispatcher holds a connection of its own
for its LISTEN: a queue per tenant needs a connection per tenant. The queues are paused at
install (`pause_queue`) and resumed at the start signal, so the runtime starts before the
clock and claims nothing before it.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

import psycopg
from pydantic import Field

from harness.errors import HarnessError
from harness.queues.base import (
    Ledger,
    ProgramMain,
    PythonPackages,
    QueueEntry,
    Signals,
    Site,
    TaskRun,
    WorkerReport,
)
from harness.queues.libraries import captures, common, notices
from harness.queues.libraries.library import LibraryQueue
from harness.queues.process import run_program
from harness.queues.programs import TenantWeight
from harness.results import document
from harness.scenario.inputs import RunInputs
from harness.scenario.workload import BacklogRows, tenant_ranges
from harness.server.connections import session_name
from harness.server.dsn import password_for

Mapping = Literal["one_queue", "weighted_queues"]
MAPPINGS: dict[str, Mapping] = {  # strategy name -> mapping
    "awa": "one_queue",
    "awa_weighted_queues": "weighted_queues",
    "awa_tuned": "one_queue",
    "awa_weighted_queues_tuned": "weighted_queues",
}
TUNED = {"awa_tuned", "awa_weighted_queues_tuned"}  # at its maintainers' settings
SCHEMA = "awa"  # fixed by awa's migrations
KIND = "harness_job"
QUEUE = "harness"
DEFAULT_POOL = 10  # AsyncClient's max_connections
DEFAULT_POLL_S = 0.2  # its dispatchers' poll_interval_ms: its own, the tuned mappings'
# Connections its runtime holds beyond one per queue (each dispatcher's LISTEN), measured:
# 25 with 11 queues, 65 with 50 (a pool of 80; with 100 queues no pool the server allows
# sufficed and its start took 90 s).
RUNTIME_CONNECTIONS = 16
DEFAULT_ROTATE_MS = 1000  # awa's queue ring rotation (queue_storage_queue_rotate_interval_ms)
ROTATE_MARGIN_S = 60
# Its claim, `SELECT ... FROM awa.claim_ready_runtime($1, $2, $3, $4)`: a plpgsql function
# whose plan (a Function Scan) counts the buffers and time of every statement inside.
FETCH_MARKER = "claim_ready_runtime($1"
RotateMs = Annotated[int, Field(ge=DEFAULT_ROTATE_MS, le=86_400_000)]


@dataclass
class HarnessJob:
    """A job's arguments as awa stores them (JSON): the harness's number, tenant, ms."""

    n: int
    t: int
    ms: float


@dataclass(frozen=True)
class Spec(common.PythonSpec):
    mapping: Mapping
    weights: tuple[TenantWeight, ...] = ()  # weighted_queues: each tenant's, as `tenants`
    # awa prunes finished jobs with its queue ring (a rotation a second, 16 slots): the
    # worker rotates it more slowly than the run lasts, so the ledger finds every job.
    rotate_ms: RotateMs = DEFAULT_ROTATE_MS
    tuned: bool = False  # its maintainers' pool (and its own poll: poll_interval_s)

    @property
    def queues(self) -> list[str]:
        if self.mapping == "one_queue":
            return [QUEUE]
        return [queue_of(tenant) for tenant in self.tenants]

    def queue_for(self, tenant: int) -> str:
        return QUEUE if self.mapping == "one_queue" else queue_of(tenant)

    @property
    def pool_size(self) -> int:
        """awa's default pool for one queue; its docs' rule, `num_queues * 4 + 20`, tuned,
        and for a queue per tenant (with the default 10 the dispatchers' listeners hold
        every connection of 11 queues' pool, and an enqueue times out)."""
        if self.mapping == "one_queue" and not self.tuned:
            return DEFAULT_POOL
        return len(self.queues) * 4 + 20

    def refused(self, free_connections: int) -> str | None:
        """Why its runtime cannot run on a server with that many connections left."""
        needed = len(self.queues) + RUNTIME_CONNECTIONS
        if needed <= free_connections:
            return None
        return (
            f"awa's runtime holds a connection per queue (each dispatcher's LISTEN): a queue "
            f"per tenant, {len(self.queues)} of them, needs about {needed} connections "
            f"(its docs size the pool at {len(self.queues) * 4 + 20}), and the server has "
            f"{free_connections} left (max_connections)"
        )


def queue_of(tenant: int) -> str:
    return f"tenant-{tenant}"


def awa_url(dsn: str, relay: str | None = None) -> str:
    """The DSN as the URL awa's driver (sqlx) takes, with the password libpq would send;
    `relay`: the socket directory of a notice relay instead of the server, with
    auto_explain in the session (a plan capture)."""
    info = {key: str(value) for key, value in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    host, port = info.get("host", "localhost").split(",")[0], info.get("port", "5432")
    query = {"application_name": session_name()}
    query |= {key: info[key] for key in ("sslmode", "options") if key in info}
    if relay is not None:
        host, port = relay, str(notices.PORT)
        query["sslmode"] = "disable"
        query["options"] = f"{info.get('options', '')} {captures.explain_options()}".strip()
    netloc = f"{quote(host, safe='')}:{port}"
    if host.startswith("/"):
        netloc, query["host"], query["port"] = "localhost", host, port
    password = password_for(dsn)
    user = quote(info.get("user", ""), safe="")
    auth = f"{user}:{quote(password, safe='')}@" if password else f"{user}@" if user else ""
    database = quote(info.get("dbname", ""), safe="")
    return f"postgres://{auth}{netloc}/{database}?{urlencode(query, quote_via=quote)}"


@asynccontextmanager
async def _client(
    spec: Spec, relay: str | None = None, pool: int = DEFAULT_POOL
) -> AsyncIterator[Any]:
    """awa's client on the run's server (through a plan capture's relay), closed after."""
    import awa

    client = awa.AsyncClient(awa_url(spec.site.dsn, relay), max_connections=pool)
    try:
        yield client
    finally:
        await client.close()


async def _install(spec: Spec, conn: psycopg.Connection[Any]) -> None:
    async with _client(spec) as client:
        await client.migrate()
        conn.execute(common.sql("awa_activate"))  # type: ignore[arg-type]
        for queue in spec.queues:
            await client.pause_queue(queue, paused_by="tenant-queue-bench")


async def _enqueue(client: Any, spec: Spec, jobs: list[common.Job]) -> None:
    await client.enqueue_many_copy(
        [HarnessJob(number, tenant, ms) for number, tenant, ms in jobs],
        kind=KIND,
        opts=[{"queue": spec.queue_for(tenant)} for _, tenant, _ in jobs],
    )


@asynccontextmanager
async def _sending(spec: Spec) -> AsyncIterator[common.Enqueue]:
    async with _client(spec) as client:
        yield partial(_enqueue, client, spec)


def enqueuer_main(index: int, spec: Spec, signals: Signals) -> None:
    common.run_enqueuer(index, signals, spec.schedule, lambda: _sending(spec))


def worker_main(index: int, spec: Spec, signals: Signals) -> None:
    run_program(index, signals, lambda report: asyncio.run(_work(index, spec, signals, report)))


async def _work(index: int, spec: Spec, signals: Signals, report: WorkerReport) -> None:
    relay = _relay(spec.site.dsn, spec.plans_file) if spec.plans_file is not None else None
    try:
        async with _client(spec, relay.folder if relay else None, spec.pool_size) as client:
            await _serve(index, spec, signals, report, client)
    finally:
        if relay is not None:
            relay.close()


def _relay(dsn: str, plans_file: str) -> notices.Relay:
    """A plan capture's relay, its socket beside the plans file."""
    folder = str(Path(plans_file).with_name("relay"))
    relay = notices.Relay(dsn, lambda text: captures.append_notice(plans_file, text), folder)
    relay.start()
    return relay


async def _serve(
    index: int, spec: Spec, signals: Signals, report: WorkerReport, client: Any
) -> None:
    @client.task(HarnessJob, kind=KIND, queue=spec.queues[0])
    async def harness_job(job: Any) -> None:
        args = job.args
        if spec.hold:
            await common.wait_event(signals.stop)
        elif args.ms > 0:
            await asyncio.sleep(args.ms / 1000)
        common.record_run(report, signals, index, TaskRun(args.n, args.t, str(job.id)))

    await client.start(_queue_configs(spec), **_start_options(spec))
    signals.ready[index] = 1
    await common.wait_event(signals.start)
    for queue in spec.queues:
        await client.resume_queue(queue)
    await common.wait_event(signals.stop)
    await client.shutdown()


def _queue_configs(spec: Spec) -> list[dict[str, Any]]:
    """One queue with the scenario's workers, or a queue per tenant by weight; in a plan
    capture each claim takes one job (`claim_batch_size` 1), so that each fetch is one."""
    batch = {"claim_batch_size": 1} if spec.hold else {}
    if spec.mapping == "one_queue":
        return [{"name": QUEUE, "max_workers": spec.concurrency, **batch}]
    weights = dict(zip(spec.tenants, spec.weights, strict=True))
    return [{"name": queue_of(t), "weight": weights[t], **batch} for t in spec.tenants]


def _start_options(spec: Spec) -> dict[str, Any]:
    options: dict[str, Any] = {
        "poll_interval_ms": max(1, round(spec.poll_interval_s * 1000)),
        "queue_storage_queue_rotate_interval_ms": spec.rotate_ms,
    }
    if spec.mapping == "weighted_queues":
        options["global_max_workers"] = spec.concurrency
    return options


def weighed(spec: Spec, inputs: RunInputs, rows: BacklogRows | None = None) -> Spec:
    """The spec with every tenant's weight: its group's, or its backlog row's."""
    weights = {t: r.group.weight for r in tenant_ranges(inputs.scenario) for t in r.ids}
    if rows is not None:
        weights |= dict(zip(rows.tenant_ids, rows.weights, strict=True))
    return replace(spec, weights=tuple(weights[t] for t in spec.tenants))


def free_connections(conn: psycopg.Connection[Any]) -> int:
    found = conn.execute(common.sql("free_connections")).fetchone()  # type: ignore[arg-type]
    return int(found[0]) if found else 0


class AwaQueue(LibraryQueue):
    label = "awa"
    ledger_block = "awa_ledger"
    fetch_marker = FETCH_MARKER
    fetch_locks = False  # its locking statement is inside the function
    fetch_rows = True  # every queue's dispatcher claims, those of idle queues too

    def __init__(self, name: str, mapping: str, site: Site, inputs: RunInputs) -> None:
        run_s = inputs.scenario.timeout_s + ROTATE_MARGIN_S
        rotate_ms = max(DEFAULT_ROTATE_MS, round(run_s * 1000))
        spec = Spec.of(site, inputs, mapping, rotate_ms=rotate_ms, tuned=name in TUNED)
        if spec.tuned:
            spec = replace(spec, poll_interval_s=DEFAULT_POLL_S)
        super().__init__(name, site, inputs, weighed(spec, inputs))

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        return worker_main, enqueuer_main

    def outside_schemas(self) -> tuple[str, ...]:
        return (SCHEMA,)

    def install(self, conn: psycopg.Connection[Any]) -> None:
        refused = self.spec.refused(free_connections(conn))
        if refused is not None:
            raise HarnessError(f"{self.name} cannot run here: {refused}")
        asyncio.run(_install(self.spec, conn))

    def capture_refused(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> str | None:
        return self.spec.serving(self.inputs, rows).refused(free_connections(conn))

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        self.spec = weighed(self.spec.serving(self.inputs, rows), self.inputs, rows)
        common.load_through(_sending(self.spec), common.backlog_jobs(self.inputs, rows))
        common.analyze(conn, SCHEMA)

    def ledger(self, conn: psycopg.Connection[Any], reports: list[WorkerReport]) -> Ledger:
        """Its tables analyzed first, as autovacuum would in time: its view of every job
        over its partitions took 30-45 s for 20,000 jobs in four queues on tables without
        statistics, 0.5 s with them."""
        common.analyze(conn, SCHEMA)
        return super().ledger(conn, reports)

    def ledger_params(self) -> dict[str, Any]:
        return {"kind": KIND}

    def provenance(self) -> dict[str, Any]:
        tuned = {"poll_interval_ms": DEFAULT_POLL_S * 1000, "max_connections": self.spec.pool_size}
        return {
            **({document.TUNED: tuned} if self.spec.tuned else {}),
            document.LIBRARY: "awa",
            "version": importlib.metadata.version("awa-pg"),
            "driver": "awa's own (Rust: sqlx) in the awa-pg wheel",
            "mapping": self.spec.mapping,
            "settings": {
                "schema": "awa (fixed by its migrations; made and dropped by the run)",
                "enqueue": "enqueue_many_copy (COPY into its queue storage)",
                "queues": "one, 'harness'"
                if self.spec.mapping == "one_queue"
                else "one per tenant, each weight = its tenant group's weight:",
                "max_workers"
                if self.spec.mapping == "one_queue"
                else "global_max_workers": "the scenario's workers",
                "poll_interval_ms": _start_options(self.spec)["poll_interval_ms"],
                "max_connections": self.spec.pool_size,
                "queue_storage_queue_rotate_interval_ms": self.spec.rotate_ms,
            },
            document.UNLIKE_THE_SCENARIO: self.departures(),
        }

    def departures(self) -> list[str]:
        """A tuned mapping polls at awa's own interval, whatever the scenario asks."""
        asked_ms = self.inputs.scenario.poll_interval_ms
        if not self.spec.tuned or asked_ms >= DEFAULT_POLL_S * 1000:
            return []
        return [
            f"polls every {DEFAULT_POLL_S:g} s, not every {asked_ms:g} ms as the scenario asks "
            "(awa's own poll, as its maintainers run it: a NOTIFY on every enqueue and a "
            "slot its queue frees wake its dispatchers)"
        ]


common.register_programs("awa", Spec, worker_main, enqueuer_main)


def entries() -> list[QueueEntry]:
    return common.library_entries(
        dict(MAPPINGS), AwaQueue, (PythonPackages(("awa",), "libraries"),)
    )
