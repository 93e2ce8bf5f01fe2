"""Tenant isolation: a job's work under row-level security, tenant set by SET or SET LOCAL.

A worker serves every tenant, so each job runs as its tenant: it claims a job (the
article's claim pattern), sets the tenant context from the claimed row, reads the
tenant-owned table and writes one row to it, all in one transaction, on a pooled
connection. Some jobs take a path that never sets the tenant (a system job, a failure
handler that runs before the tenant was set) and still read and write. Per job we record
the tenant it ran as, the other tenants' rows it could read, and the tenant its row got.

With SET the tenant outlives the transaction and stays on the connection: the next job
on it that does not set a tenant runs as the previous one. With SET LOCAL it ends with the
transaction, and the policy's default deny leaves such a job nothing to read or write.

Results go to a write-once folder, results/isolation/<UTC time>-<short id>/, made first,
before the server starts:
  isolation.json  format version, status, settings, provenance, the counts per pool and mode
  jobs.csv        one row per job of every pool and mode: what every count comes from
  isolation.md    the table

isolation.json is an IsolationDocument, on the versioned-document base
(harness/results/versioned.py: version, write-once, reading with migration).

Format history (ISOLATION_FORMAT_VERSION):
  1  first version (written once, at the end).
  2  `status` is running until the end, then complete, interrupted (Ctrl-C, SIGTERM) or
     failed, with `error`; an unfinished run keeps the pools and modes measured before
     it stopped. `started_at` added; `finished_at` is null while running. Until the
     server is up, `metadata` holds only what needs none (harness, python, host, command).
     Version 1 documents read with `error` and `started_at` null.

Two pools: psycopg_pool (threads sharing a few connections) and, where it is installed,
a PgBouncer of our own in transaction mode (each thread a client of its own, sharing a
few server connections). Each pool and mode starts from fresh tables and fresh
connections, so one measurement cannot leave a tenant behind for the next.
"""

from __future__ import annotations

import csv
import io
import random
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool
from pydantic import Field

from harness.errors import RunFailed, Terminated
from harness.report.sections import markdown_table
from harness.results.folder import RunFolder
from harness.results.versioned import Migrations, Versioned
from harness.server.connections import RUN_TOKEN, connect
from harness.server.dsn import scrub
from harness.server.pgbouncer import login_for, running_pgbouncer, unavailable_reason
from harness.server.schema import drop_leftover, live_sessions, mark, marked_token, own_schema
from harness.sqlfiles import SqlBlock, builtin_blocks

ISOLATION_FORMAT_VERSION = 2
Mode = Literal["set", "set_local"]
PoolKind = Literal["psycopg", "pgbouncer"]
MODES: tuple[Mode, ...] = ("set", "set_local")
POOLS: tuple[PoolKind, ...] = ("psycopg", "pgbouncer")
MODE_LABELS: dict[Mode, str] = {"set": "SET", "set_local": "SET LOCAL"}
POOL_LABELS: dict[PoolKind, str] = {
    "psycopg": "psycopg_pool",
    "pgbouncer": "PgBouncer (transaction mode)",
}
TABLE_HEADERS = [
    "pool",
    "mode",
    "jobs",
    "without tenant set",
    "leaks seen",
    "other tenants' rows read",
    "leaks written",
    "denied",
]
OUTCOME_COLUMNS = [
    "pool",
    "mode",
    "job_id",
    "tenant_id",
    "sets_tenant",
    "running_as",
    "other_rows",
    "rows",
    "written_tenant",
]

Connection = psycopg.Connection[Any]
Borrow = Callable[[], AbstractContextManager[Connection]]  # one connection for one job
Clients = Callable[[], AbstractContextManager[Borrow]]  # what one worker thread borrows from


@dataclass(frozen=True)
class IsolationSettings:
    jobs: int = 400
    tenants: int = 8
    unset_share: float = 0.1  # jobs that take the path that does not set the tenant
    workers: int = 4  # threads, each claiming and running jobs
    pool_size: int = 2  # server connections they share: fewer than workers, so reused
    seed: int = 1


@dataclass(frozen=True)
class PlannedJob:
    job_id: int
    tenant_id: int
    sets_tenant: bool


@dataclass(frozen=True)
class JobOutcome:
    job_id: int
    tenant_id: int
    sets_tenant: bool
    running_as: int | None  # the tenant context the job's reads ran under
    other_rows: int  # rows of other tenants visible to the job
    rows: int
    written_tenant: int | None  # None: the policy refused the row

    @property
    def leak_seen(self) -> bool:
        return self.other_rows > 0

    @property
    def leak_written(self) -> bool:
        return self.written_tenant is not None and self.written_tenant != self.tenant_id

    @property
    def denied(self) -> bool:
        return self.written_tenant is None


@dataclass(frozen=True)
class PoolResult:
    pool: PoolKind
    mode: Mode | None
    outcomes: list[JobOutcome] = field(default_factory=list)
    skipped: str | None = None  # why the pool was not measured

    def counts(self) -> dict[str, int]:
        jobs = self.outcomes
        return {
            "jobs": len(jobs),
            "without_tenant": sum(not job.sets_tenant for job in jobs),
            "leaks_seen": sum(job.leak_seen for job in jobs),
            "other_rows_read": sum(job.other_rows for job in jobs),
            "leaks_written": sum(job.leak_written for job in jobs),
            "denied": sum(job.denied for job in jobs),
        }

    @property
    def leaked(self) -> bool:
        counts = self.counts()
        return counts["leaks_seen"] + counts["leaks_written"] > 0


# --- SQL ---------------------------------------------------------------------------------


@cache
def blocks() -> dict[str, SqlBlock]:
    return builtin_blocks("harness.experiments", "isolation.sql")


def statement(name: str, **parts: sql.Composable) -> sql.Composed:
    """A block of isolation.sql, its {placeholders} filled as identifiers or literals."""
    return sql.SQL(blocks()[name].sql).format(**parts)  # type: ignore[arg-type]  # our file


def set_tenant(mode: Mode, tenant_id: int) -> sql.Composed:
    block = "set_session" if mode == "set" else "set_local"
    return statement(block, tenant=sql.Literal(str(tenant_id)))


# --- the plan and one job ----------------------------------------------------------------


def plan_jobs(settings: IsolationSettings) -> list[PlannedJob]:
    """Each job's tenant and path, from the seed alone: both modes run the same jobs."""
    rng = random.Random(settings.seed)
    return [
        PlannedJob(
            job_id=job_id,
            tenant_id=rng.randint(1, settings.tenants),
            sets_tenant=rng.random() >= settings.unset_share,
        )
        for job_id in range(1, settings.jobs + 1)
    ]


def run_job(conn: Connection, mode: Mode) -> JobOutcome | None:
    """Claim the next job and do its work in one transaction; None when the queue is empty."""
    with conn.transaction():
        claimed = conn.execute(statement("claim")).fetchone()
        if claimed is None:
            return None
        job_id, tenant_id, sets_tenant = claimed
        if sets_tenant:
            conn.execute(set_tenant(mode, tenant_id))
        seen = conn.execute(statement("read_notes"), {"tenant_id": tenant_id}).fetchone()
        assert seen is not None  # an aggregate always returns its row
        written = _write_note(conn, job_id, tenant_id)
        conn.execute(statement("finish"), {"job_id": job_id})
    return JobOutcome(job_id, tenant_id, sets_tenant, seen[0], seen[1], seen[2], written)


def _write_note(conn: Connection, job_id: int, tenant_id: int) -> int | None:
    """The tenant the row got, or None if the policy refused it."""
    body = f"job {job_id} for tenant {tenant_id}"
    try:
        with conn.transaction():  # a savepoint: a refused row must not undo the claim
            row = conn.execute(statement("write_note"), {"job_id": job_id, "body": body})
            written = row.fetchone()
    except psycopg.errors.InsufficientPrivilege as error:
        # Only the policy's refusal counts as denied; a missing grant (same SQLSTATE) would
        # otherwise pass for a perfectly isolated run.
        if "row-level security" not in (error.diag.message_primary or ""):
            raise
        return None
    return written[0] if written is not None else None


# --- workers ----------------------------------------------------------------------------


def run_workers(clients: Clients, mode: Mode, workers: int) -> list[JobOutcome]:
    """Threads claim and run jobs until the queue is empty; outcomes in job order."""
    outcomes: list[JobOutcome] = []
    failures: list[BaseException] = []

    def work() -> None:
        try:
            with clients() as borrow:
                while (outcome := _next_job(borrow, mode)) is not None:
                    outcomes.append(outcome)  # list.append is atomic under the GIL
        except Exception as error:
            failures.append(error)

    threads = [
        threading.Thread(target=work, name=f"isolation-{i}", daemon=True) for i in range(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RunFailed(f"a job failed: {failures[0]}")
    return sorted(outcomes, key=lambda outcome: outcome.job_id)


def _next_job(borrow: Borrow, mode: Mode) -> JobOutcome | None:
    # The connection goes back to the pool after every job, as a worker's would.
    with borrow() as conn:
        return run_job(conn, mode)


@contextmanager
def psycopg_clients(dsn: str, size: int) -> Iterator[Clients]:
    """Every thread borrows from one psycopg_pool of `size` connections.

    The pool rolls back a transaction left open, but does not reset session settings:
    what a SET left on a connection goes to the next borrower.
    """
    with ConnectionPool(
        dsn, min_size=size, max_size=size, kwargs={"autocommit": True}, open=True
    ) as pool:
        pool.wait(timeout=30)  # every connection made before the first job
        yield lambda: nullcontext(pool.connection)


@contextmanager
def pgbouncer_clients(app_dsn: str, size: int) -> Iterator[Clients]:
    """Every thread a PgBouncer client of its own; PgBouncer shares `size` server
    connections among them, transaction by transaction."""
    with running_pgbouncer(login_for(app_dsn), size) as dsn:
        yield lambda: _dedicated(dsn)


@contextmanager
def _dedicated(dsn: str) -> Iterator[Borrow]:
    # PgBouncer 1.18 in transaction mode cannot keep named prepared statements.
    with connect(dsn, prepare_threshold=None) as conn:
        yield lambda: nullcontext(conn)


# --- schema, role, runs ------------------------------------------------------------------


@dataclass(frozen=True)
class AppRole:
    name: str
    dsn: str  # the server, logged in to as this role


ROLE_PREFIX = "harness_app_"  # then the run's token: harness_app_<token>
ISOLATION_SCHEMA = "harness_isolation_"  # the same: harness_isolation_<token>


@contextmanager
def app_role(admin_dsn: str, schema: str) -> Iterator[AppRole]:
    """A login role that is neither superuser nor owner, so the policy binds it; dropped
    at the end. Roles are cluster-wide: it is named for this run (harness_app_<token>)
    and marked with the run's token like its schema, created here or not at all, so that
    a later run finds it if this one is killed outright (drop_leftover_roles)."""
    name = ROLE_PREFIX + RUN_TOKEN
    password = secrets.token_hex(16)
    role = sql.Identifier(name)
    with connect(admin_dsn) as conn:
        conn.execute(statement("create_role", role=role, password=sql.Literal(password)))
        try:
            conn.execute(statement("comment_role", role=role, mark=sql.Literal(mark())))
            conn.execute(statement("role_search_path", role=role, schema=sql.Identifier(schema)))
            dsn = psycopg.conninfo.make_conninfo(admin_dsn, user=name, password=password)
            yield AppRole(name=name, dsn=dsn)
        finally:
            conn.execute(statement("drop_owned", role=role))
            conn.execute(statement("drop_role", role=role))


def drop_leftovers(admin_dsn: str, say: Callable[[str], None]) -> None:
    """The roles and schemas of earlier runs killed outright, dropped, each said in one
    line. A leftover role is named harness_app_<token>, its comment is the harness's mark
    with that same token, and that run has no session connected any more; a leftover
    schema is harness_isolation_<token>, marked and owned alike (drop_leftover). A live
    run's are left alone, and so is anything not named and marked so."""
    with connect(admin_dsn) as conn:
        for name, comment in conn.execute(statement("leftover_roles")).fetchall():
            token = marked_token(comment)
            ours = token is not None and name == ROLE_PREFIX + token
            if ours and not live_sessions(conn, str(token)):
                say(_drop_leftover_role(conn, name))
        schemas = conn.execute(statement("leftover_schemas")).fetchall()
    for (schema,) in schemas:
        said = drop_leftover(admin_dsn, schema)
        if said is not None:
            say(said)


def _drop_leftover_role(conn: Connection, name: str) -> str:
    role = sql.Identifier(name)
    try:
        with conn.transaction():
            conn.execute(statement("drop_owned", role=role))
            conn.execute(statement("drop_role", role=role))
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else "refused"
        return (
            f"role {name}, left by a harness isolation that was killed, was not dropped: "
            f"{reason}; drop owned by {name} (in each database it has privileges in), then "
            f"drop role {name}"
        )
    return f"dropped role {name}, left by a harness isolation that was killed"


def reset_tables(conn: Connection, schema: str, role: str, jobs: list[PlannedJob]) -> None:
    """Fresh queue and tenant table with their policy and grants; the jobs queued."""
    names = {"schema": sql.Identifier(schema), "role": sql.Identifier(role)}
    conn.execute(sql.SQL("set search_path to {}").format(names["schema"]))
    for block in ("drop_tables", "jobs", "notes", "enable_rls", "force_rls", "policy"):
        conn.execute(statement(block))
    for block in ("grant_schema", "grant_jobs", "grant_notes"):
        conn.execute(statement(block, **names))
    conn.execute(
        statement("enqueue"),
        {
            "ids": [job.job_id for job in jobs],
            "tenant_ids": [job.tenant_id for job in jobs],
            "sets_tenant": [job.sets_tenant for job in jobs],
        },
    )


def measure_pool(
    pool: PoolKind,
    mode: Mode,
    admin_dsn: str,
    schema: str,
    role: AppRole,
    settings: IsolationSettings,
) -> PoolResult:
    """One pool and one mode, from fresh tables and fresh connections."""
    with connect(admin_dsn) as conn:
        reset_tables(conn, schema, role.name, plan_jobs(settings))
    opener = psycopg_clients if pool == "psycopg" else pgbouncer_clients
    with opener(role.dsn, settings.pool_size) as clients:
        outcomes = run_workers(clients, mode, settings.workers)
    if len(outcomes) != settings.jobs:
        raise RunFailed(f"{pool}, {mode}: {len(outcomes)} jobs ran of {settings.jobs}")
    return PoolResult(pool=pool, mode=mode, outcomes=outcomes)


def pool_unavailable(pool: PoolKind) -> str | None:
    return unavailable_reason() if pool == "pgbouncer" else None


def run_isolation(
    admin_dsn: str,
    settings: IsolationSettings,
    pools: list[PoolKind],
    on_measured: Callable[[PoolResult], None] = lambda result: None,
    say: Callable[[str], None] = lambda line: None,
) -> list[PoolResult]:
    """Both modes through every pool asked for; an unavailable pool is reported skipped.
    Each result goes to `on_measured` as soon as it is in: what an interrupted run keeps.
    `say` hears what is dropped of earlier runs' leftovers, and what this one leaves."""
    schema = ISOLATION_SCHEMA + RUN_TOKEN
    results: list[PoolResult] = []

    def measured(result: PoolResult) -> None:
        results.append(result)
        on_measured(result)

    drop_leftovers(admin_dsn, say)
    with own_schema(admin_dsn, schema) as owned, app_role(admin_dsn, schema) as role:
        for pool in pools:
            reason = pool_unavailable(pool)
            if reason is not None:
                measured(PoolResult(pool=pool, mode=None, skipped=reason))
                continue
            for mode in MODES:
                measured(measure_pool(pool, mode, admin_dsn, schema, role, settings))
    if owned.left is not None:
        say(owned.left)
    return results


# --- tables and records ------------------------------------------------------------------


def table_rows(results: list[PoolResult]) -> list[list[str]]:
    rows = []
    for result in results:
        if result.skipped is not None or result.mode is None:
            blank = [""] * (len(TABLE_HEADERS) - 3)
            rows.append([POOL_LABELS[result.pool], "-", f"skipped: {result.skipped}", *blank])
            continue
        counts = result.counts()
        rows.append(
            [POOL_LABELS[result.pool], MODE_LABELS[result.mode]]
            + [f"{value:,}" for value in counts.values()]
        )
    return rows


def outcome_records(results: list[PoolResult]) -> list[dict[str, Any]]:
    """One row per job of every pool and mode: what every count comes from."""
    return [
        {"pool": result.pool, "mode": result.mode, **asdict(outcome)}
        for result in results
        for outcome in result.outcomes
    ]


def summary_records(results: list[PoolResult]) -> list[dict[str, Any]]:
    return [{"pool": r.pool, "mode": r.mode, "skipped": r.skipped, **r.counts()} for r in results]


def set_local_leaked(results: list[PoolResult]) -> bool:
    return any(r.mode == "set_local" and r.leaked for r in results)


# --- the run folder ----------------------------------------------------------------------

DEFINITIONS = """\
- **without tenant set**: jobs that took the path that never sets the tenant (a system
  job, a failure handler that runs before the tenant is set); they still read and write.
- **leaks seen**: jobs that could read at least one row of another tenant.
- **other tenants' rows read**: those rows, summed over the jobs.
- **leaks written**: jobs whose row was stored under another tenant than the job's.
- **denied**: jobs whose row the policy refused (no tenant set: default deny).
"""


def _unrecorded_in_1(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "error": None, "started_at": None}


Status = Literal["running", "complete", "interrupted", "failed"]


class IsolationDocument(Versioned):
    NAME = "isolation.json"
    VERSION = ISOLATION_FORMAT_VERSION
    MIGRATIONS: ClassVar[Migrations] = {1: _unrecorded_in_1}

    run_id: str
    status: Status = "running"
    error: str | None = None
    started_at: str | None
    finished_at: str | None = None
    settings: dict[str, Any]
    results: list[dict[str, Any]] = Field(default_factory=list)
    set_local_leaked: bool | None = None
    metadata: dict[str, Any]
    files: dict[str, str] = Field(default_factory=dict)


@dataclass
class IsolationFolder:
    """The run's folder and its isolation.json, written first as running."""

    folder: RunFolder
    document: IsolationDocument

    @classmethod
    def create(
        cls, root: Path, settings: IsolationSettings, metadata: dict[str, Any]
    ) -> IsolationFolder:
        """A new folder under root/isolation; nothing in an existing one is ever replaced."""
        folder = RunFolder.create(root, "isolation")
        document = IsolationDocument(
            run_id=folder.run_id,
            started_at=_utc_now(),
            settings=asdict(settings),
            metadata=metadata,
        )
        document.write(folder.path / document.NAME)
        return cls(folder, document)

    def record_provenance(self, metadata: dict[str, Any]) -> None:
        """The full provenance, once the server is up (the server's part included)."""
        self.document.metadata = metadata
        self.document.write(self.folder.path / self.document.NAME, replace=True)

    def close(
        self, settings: IsolationSettings, results: list[PoolResult], error: BaseException | None
    ) -> None:
        """What was measured, and how the run ended: complete, interrupted or failed."""
        status: Status = "complete" if error is None else _unfinished_status(error)
        self.folder.write("jobs.csv", _csv(outcome_records(results)))
        self.folder.write("isolation.md", markdown(settings, results, status))
        document = self.document
        document.status = status
        document.error = None if error is None else scrub(str(error)) or type(error).__name__
        document.finished_at = _utc_now()
        document.results = summary_records(results)
        document.set_local_leaked = set_local_leaked(results)
        document.files = {"jobs": "jobs.csv", "table": "isolation.md"}
        document.write(self.folder.path / document.NAME, replace=True)


def _unfinished_status(error: BaseException) -> Status:
    return "interrupted" if isinstance(error, KeyboardInterrupt | Terminated) else "failed"


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def markdown(
    settings: IsolationSettings, results: list[PoolResult], status: str = "complete"
) -> str:
    table = markdown_table(TABLE_HEADERS, table_rows(results))
    shape = (
        f"{settings.jobs} jobs, {settings.tenants} tenants, {settings.unset_share:g} of the "
        f"jobs without tenant set, {settings.workers} workers sharing {settings.pool_size} "
        f"server connections, seed {settings.seed}"
    )
    ended = "" if status == "complete" else f"This run {_ENDED[status]}: the table holds "
    ended += "what was measured before it stopped.\n\n" if ended else ""
    return f"# Tenant isolation: SET vs SET LOCAL\n\n{shape}.\n\n{ended}{table}\n{DEFINITIONS}"


_ENDED = {"interrupted": "was interrupted", "failed": "failed"}


def progress_line(result: PoolResult) -> str:
    """One pool and mode as it is measured, for the console."""
    if result.skipped is not None or result.mode is None:
        return f"{POOL_LABELS[result.pool]}: skipped: {result.skipped}"
    counts = result.counts()
    return (
        f"{POOL_LABELS[result.pool]}, {MODE_LABELS[result.mode]}: {counts['jobs']:,} jobs, "
        f"{counts['leaks_seen']:,} leaks seen, {counts['leaks_written']:,} leaks written, "
        f"{counts['denied']:,} denied"
    )


def _csv(records: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=OUTCOME_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)  # None is written as an empty cell
    return out.getvalue()
