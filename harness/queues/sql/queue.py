"""The built-in SQL strategies as a queue of the seam: the article's schema, a strategy's
blocks, and the worker and enqueuer processes that run them.

Without faults a repetition runs exactly the strategy's statements: the schema and its
`setup`, the backlog load, `enqueue` per batch, the claim, `complete`, the `books` query
and the `monitor` samples. With faults (harness/queues/sql/faults.sql) the side tables
exist too: the claim log, the failed attempts and, with a lease, the leases.

Its worker and enqueuer are registered programs (harness/queues/programs.py): a fleet
member is sent the strategy's name and the SHA-256 of its SQL, and runs its own
install's SQL of that strategy, never SQL from a row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

import psycopg
from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter

from harness.queues.base import (
    JobRecord,
    Ledger,
    Program,
    QueueEntry,
    Recovery,
    Site,
    WorkerReport,
)
from harness.queues.programs import (
    Local,
    PollInterval,
    Registered,
    SchemaName,
    TenantId,
    Wire,
    register,
)
from harness.queues.sql.claim import ClaimSql
from harness.queues.sql.recovery import fault_sql
from harness.queues.sql.specs import EnqueuerSpec, RecoverySpec, WorkerSpec
from harness.queues.sql.strategies import Strategy, schema_blocks
from harness.queues.sql.worker import enqueuer_main, worker_main
from harness.results.document import HARNESS, QueueProvenance
from harness.scenario.arrivals import Arrivals, Batch
from harness.scenario.distributions import MAX_DURATION_MS, Duration
from harness.scenario.inputs import RunInputs
from harness.scenario.traits import QueueTraits
from harness.scenario.workload import BacklogRows
from harness.server.connections import worker_session_name

BACKLOG_BLOCKS = ("backlog_tenants", "backlog_jobs", "after_load")


@dataclass(frozen=True)
class SqlQueue:
    strategy: Strategy
    site: Site
    inputs: RunInputs

    @property
    def name(self) -> str:
        return self.strategy.name

    @property
    def traits(self) -> QueueTraits:
        return self.strategy.traits

    def install(self, conn: psycopg.Connection[Any], rows: BacklogRows | None = None) -> None:
        for block in schema_blocks().values():
            conn.execute(block.sql)  # type: ignore[call-overload]  # our own files
        if self.strategy.has("setup"):
            conn.execute(self.strategy.sql("setup"))  # type: ignore[call-overload]
        for table in self._fault_tables():
            conn.execute(fault_sql()[table])  # type: ignore[call-overload]

    def _fault_tables(self) -> list[str]:
        faults = self.inputs.faults
        if faults is None:
            return []
        lease = ["leases_table"] if faults.lease_s is not None else []
        return ["claims_table", "attempts_table", *lease]

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        """Set-based in three statements, then statistics."""
        values = {**self.inputs.params, **rows.params()}
        for block in BACKLOG_BLOCKS:
            conn.execute(self.strategy.sql(block), values)  # type: ignore[call-overload]

    def worker_spec(self) -> WorkerSpec:
        return WorkerSpec(
            site=self.site,
            strategy=self.strategy.name,
            sql_sha256=self.strategy.sql_sha256,
            claim=ClaimSql.of(self.strategy),
            poll_interval_s=self.inputs.scenario.poll_interval_ms / 1000,
            seed=self.inputs.seed,
            durations=self.inputs.durations,
            params=self.inputs.params,
            recovery=self._recovery(),
            application_name=worker_session_name(),
        )

    def _recovery(self) -> RecoverySpec | None:
        faults = self.inputs.faults
        if faults is None:
            return None
        return RecoverySpec(
            lease_s=faults.lease_s,
            failures=faults.failures,
            reconnect_give_up_s=faults.reconnect_give_up_s,
        )

    def workers(self, count: int) -> list[Program]:
        spec = self.worker_spec()
        return [Program("worker", worker_main, spec) for _ in range(count)]

    def enqueuers(self, schedules: list[Arrivals]) -> list[Program]:
        strategy = self.strategy
        return [
            Program(
                "enqueuer",
                enqueuer_main,
                EnqueuerSpec(
                    self.site,
                    strategy.name,
                    strategy.sql_sha256,
                    strategy.sql("enqueue"),
                    arrivals,
                    self.inputs.params,
                ),
            )
            for arrivals in schedules
        ]

    def batch_params(self, batch: Batch) -> dict[str, Any]:
        return batch.params(self.inputs.params)

    def ledger(self, conn: psycopg.Connection[Any], reports: list[WorkerReport]) -> Ledger:
        rows = conn.execute(self.strategy.sql("books")).fetchall()  # type: ignore[call-overload]
        reported = {job: (r.worker, ms) for r in reports for job, _, ms in r.claims}
        if self.inputs.faults is None:
            claims = [job for report in reports for job, _, _ in report.claims]
            last = {job: worker for job, (worker, _) in reported.items()}
            attempts: dict[int, tuple[int, bool]] = {}
        else:
            claims, last, attempts = self._claim_log(conn)
        records = [
            _record(row, last.get(row[0]), reported.get(row[0]), attempts.get(row[0], (0, False)))
            for row in rows
        ]
        return Ledger(records, claims)

    def _claim_log(
        self, conn: psycopg.Connection[Any]
    ) -> tuple[list[int], dict[int, int], dict[int, tuple[int, bool]]]:
        """Every committed claim (killed workers' included) from the claim log, the worker
        of each job's last claim, and each job's failed attempts and dead-letter mark."""
        sql = fault_sql()
        log = conn.execute(sql["fault_claims"]).fetchall()  # type: ignore[call-overload]
        attempts = {
            int(job): (int(n), bool(dead))
            for job, n, dead in conn.execute(sql["fault_attempts"])  # type: ignore[call-overload]
        }
        last = {int(job): int(worker) for job, worker, *_ in log}
        return [int(job) for job, *_ in log], last, attempts

    def dequeue_sql(self) -> str:
        return self.strategy.sql("dequeue")

    def fetch_marker(self) -> str:
        """Its dequeue's locking clause where it has one (no other statement of the
        claim locks rows it skips), else the dequeue's first line."""
        dequeue = self.dequeue_sql()
        if "skip locked" in dequeue.lower():
            return "skip locked"
        return next(line for line in dequeue.splitlines() if line.strip()).strip()

    def monitor(self, conn: psycopg.Connection[Any]) -> tuple[int, float] | None:
        if not self.strategy.has("monitor"):
            return None
        row = conn.execute(self.strategy.sql("monitor")).fetchone()  # type: ignore[call-overload]
        assert row is not None  # an aggregate always returns its row
        return int(row[0]), float(row[1] or 0)

    def provenance(self) -> QueueProvenance:
        sources = sorted({block.source for block in self.strategy.blocks.values()})
        claim = "hold" if self.strategy.hold_lock else "short"
        settings = {"files": sources, "claim": claim}
        return QueueProvenance(kind="sql", library=HARNESS, language="SQL", settings=settings)

    def recovery(self) -> Recovery:
        return self

    def outside_schemas(self) -> tuple[str, ...]:
        return ()

    def explainer(self) -> None:
        return None  # its dequeue is one statement: EXPLAIN runs it (dequeue_sql)

    def reap_expired(self, conn: psycopg.Connection[Any]) -> int:
        return len(conn.execute(fault_sql()["reap_expired"]).fetchall())  # type: ignore[call-overload]

    def requeue_due(self, conn: psycopg.Connection[Any]) -> int:
        return len(conn.execute(fault_sql()["requeue_due"]).fetchall())  # type: ignore[call-overload]

    def progress(self, conn: psycopg.Connection[Any], held: list[int]) -> tuple[int, int]:
        row = conn.execute(fault_sql()["progress"], {"held": held}).fetchone()  # type: ignore[call-overload]
        assert row is not None
        return int(row[0]), int(row[1])


def _record(
    row: tuple[Any, ...],
    worker: int | None,
    reported: tuple[int, float] | None,
    attempts: tuple[int, bool],
) -> JobRecord:
    """A row of the `books` query (id, tenant_id, status, enqueued_at, started_at,
    finished_at) with who claimed it last, that claim's latency, and its attempts."""
    job_id, tenant_id, status, enqueued_at, started_at, finished_at = row
    return JobRecord(
        job_id,
        tenant_id,
        status,
        enqueued_at,
        started_at,
        finished_at,
        worker=worker,
        claim_ms=reported[1] if reported is not None else None,
        failed_attempts=attempts[0],
        dead_lettered=attempts[1],
    )


def sql_entry(strategy: Strategy) -> QueueEntry:
    """A built-in or user strategy file as a queue a scenario can name."""

    def make(site: Site, inputs: RunInputs) -> SqlQueue:
        return SqlQueue(strategy, site, inputs)

    return QueueEntry(
        name=strategy.name,
        traits=strategy.traits,
        make=make,
        simulate_as=strategy.simulate_as,
        shown=strategy.shown,
    )


# --- its programs on a fleet member -------------------------------------------------


def _bounded(duration: Duration) -> Duration:
    for value in (duration.a, duration.b):
        if not (math.isfinite(value) and 0 <= value <= MAX_DURATION_MS):
            raise ValueError(f"a duration's parameters are between 0 and {MAX_DURATION_MS:g}")
    return duration


StrategyName = Annotated[str, Field(min_length=1, max_length=255)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Params = dict[str, int | float | str | bool | None]
Durations = dict[TenantId, Annotated[Duration, AfterValidator(_bounded)]]


@dataclass(frozen=True)
class WorkerWire:
    """A worker's spec as it travels: its strategy by name and SQL digest, no DSN, no SQL
    (and no fault features: they stay on the coordinator's host)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # a field it does not have is refused

    schema: SchemaName
    strategy: StrategyName
    sql_sha256: Sha256
    poll_interval_s: PollInterval
    seed: int
    durations: Durations
    params: Params
    # the run's worker session name: a member's sessions are the run's too (no secret)
    application_name: Annotated[str, Field(max_length=63)] | None = None


@dataclass(frozen=True)
class EnqueuerWire:
    __pydantic_config__ = ConfigDict(extra="forbid")

    schema: SchemaName
    strategy: StrategyName
    sql_sha256: Sha256
    at_s: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]]  # per batch
    sizes: list[Annotated[int, Field(ge=0)]]  # per batch
    tenant_ids: list[TenantId]  # per job
    weights: list[Annotated[int, Field(ge=1)]]
    priorities: list[int]
    params: dict[str, Any]


_WORKER = TypeAdapter(WorkerWire)
_ENQUEUER = TypeAdapter(EnqueuerWire)


def _send_worker(spec: WorkerSpec) -> Wire:
    if spec.recovery is not None:
        raise ValueError("a worker with the fault features runs on the coordinator's host only")
    site = spec.site
    wire = WorkerWire(
        site.schema,
        spec.strategy,
        spec.sql_sha256,
        spec.poll_interval_s,
        spec.seed,
        spec.durations,
        spec.params,
        spec.application_name,
    )
    return _WORKER.dump_python(wire, mode="json")  # type: ignore[no-any-return]


def _receive_worker(data: Wire, local: Local) -> WorkerSpec:
    wire = _WORKER.validate_python(data)
    strategy = local.strategy(wire.strategy, wire.sql_sha256)
    return WorkerSpec(
        site=Site(local.dsn, wire.schema),
        strategy=strategy.name,
        sql_sha256=strategy.sql_sha256,
        claim=ClaimSql.of(strategy),
        poll_interval_s=wire.poll_interval_s,
        seed=wire.seed,
        durations=wire.durations,
        params=wire.params,
        application_name=wire.application_name,
    )


def _send_enqueuer(spec: EnqueuerSpec) -> Wire:
    arrivals = spec.arrivals
    wire = EnqueuerWire(
        spec.site.schema,
        spec.strategy,
        spec.sql_sha256,
        arrivals.at_s.tolist(),
        arrivals.sizes.tolist(),
        arrivals.tenant_ids.tolist(),
        arrivals.weights.tolist(),
        arrivals.priorities.tolist(),
        spec.params,
    )
    return _ENQUEUER.dump_python(wire, mode="json")  # type: ignore[no-any-return]


def _receive_enqueuer(data: Wire, local: Local) -> EnqueuerSpec:
    wire = _ENQUEUER.validate_python(data)
    strategy = local.strategy(wire.strategy, wire.sql_sha256)
    arrivals = Arrivals.of_batches(
        wire.at_s, wire.sizes, wire.tenant_ids, wire.weights, wire.priorities
    )
    return EnqueuerSpec(
        Site(local.dsn, wire.schema),
        strategy.name,
        strategy.sql_sha256,
        strategy.sql("enqueue"),
        arrivals,
        wire.params,
    )


register(Registered("sql.worker", "worker", worker_main, WorkerSpec, _send_worker, _receive_worker))
register(
    Registered(
        "sql.enqueuer", "enqueuer", enqueuer_main, EnqueuerSpec, _send_enqueuer, _receive_enqueuer
    )
)
