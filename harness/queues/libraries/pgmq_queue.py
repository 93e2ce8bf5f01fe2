"""pgmq through its own SQL: the install script its Python package ships (`pgmq` 1.1,
PGMQ 1.13), its `create`, `send_batch`, reads and `archive`, each a call of pgmq's own
functions (pgmq.sql). pgmq has no worker: the loop is the one its docs and its own
benchmark show (pgmq-py's "Reading Messages", benches/ops.py `consume`): read with a
visibility timeout, work, archive; on an empty read, sleep and read again. One process
per worker, each on its own connection, as the benchmark's consumers.

Mappings of tenants onto its knobs:
  read                 one queue, `read` (msg_id order)
  read_batched         `read_with_poll`, 10 messages a read, archived in one call
  round_robin          FIFO groups (header x-pgmq-group = tenant), `read_grouped_rr`
  round_robin_batched  `read_grouped_rr_with_poll`, 10 messages a read
  group_head           FIFO groups, `read_grouped_head`

pgmq's script creates everything in a schema named `pgmq` and its functions name it
everywhere (`pgmq.q_<queue>`); the extension is not relocatable. The harness runs the
script the package ships with that name replaced by the run's schema (`relocated`),
through the package's own installer, so that everything is in the run's schema and goes
with it; the functions' SQL is otherwise the script's.
"""

from __future__ import annotations

import importlib.metadata
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb

from harness.errors import HarnessError
from harness.queues.base import (
    Program,
    ProgramMain,
    PythonPackages,
    QueueEntry,
    Signals,
    Site,
    TaskRun,
    WorkerReport,
)
from harness.queues.libraries import captures, common
from harness.queues.libraries.library import LibraryQueue
from harness.queues.process import run_program
from harness.results.document import LIBRARY, TUNED
from harness.scenario.inputs import RunInputs
from harness.scenario.workload import BacklogRows
from harness.server.connections import connect, session_name
from harness.sqlfiles import builtin_blocks

Mapping = Literal["read", "read_batched", "round_robin", "round_robin_batched", "group_head"]
MAPPINGS: dict[str, Mapping] = {  # strategy name -> mapping
    "pgmq": "read",
    "pgmq_tuned": "read_batched",
    "pgmq_round_robin": "round_robin",
    "pgmq_round_robin_tuned": "round_robin_batched",
    "pgmq_group_head": "group_head",
}
QUEUE = "harness"  # its tables: q_harness, a_harness (libraries.sql's pgmq_ledger)
VT_S = 30  # pgmq-py's default visibility timeout (config.vt)
HOLD_VT_S = 3600  # a plan capture holds its messages until its end
BATCH = 10  # pgmq's benchmark: "reading->deleting up to 10 messages at a time"
MAX_POLL_S = 1  # read_with_poll's wait; the worker sees the stop between two reads
BACKLOG_CHUNK = 10_000


@dataclass(frozen=True)
class Reading:
    """How a mapping's worker reads: pgmq's function, messages per read, whether the read
    polls in the server (`*_with_poll`) and the batch is archived in one call, and
    whether messages carry their tenant as FIFO group."""

    function: str
    qty: int
    batched: bool
    grouped: bool

    @property
    def block(self) -> str:
        return f"pgmq_{self.function}{'_with_poll' if self.batched else ''}"


READINGS: dict[Mapping, Reading] = {
    "read": Reading("read", 1, batched=False, grouped=False),
    "read_batched": Reading("read", BATCH, batched=True, grouped=False),
    "round_robin": Reading("read_grouped_rr", 1, batched=False, grouped=True),
    "round_robin_batched": Reading("read_grouped_rr", BATCH, batched=True, grouped=True),
    "group_head": Reading("read_grouped_head", 1, batched=False, grouped=True),
}


def sql(block: str) -> str:
    return builtin_blocks("harness.queues.libraries", "pgmq.sql")[block].sql


@dataclass(frozen=True)
class Spec(common.PythonSpec):
    """One worker process per slot: `concurrency` is 1 in each."""

    mapping: Mapping

    @property
    def reading(self) -> Reading:
        return READINGS[self.mapping]


# pgmq's script names its schema as a qualifier (`pgmq.meta`, `'pgmq.' || qtable`), in
# CREATE SCHEMA, GRANT ... ON SCHEMA and ALTER DEFAULT PRIVILEGES IN SCHEMA, and as the
# value compared with information_schema's table_schema. Its name is left where it is no
# schema: the extension's name, a notice's text, comments, the header x-pgmq-group and
# function names (_belongs_to_pgmq). Any other use of the word is refused.
_QUALIFIER = re.compile(r"\bpgmq\.")
_SCHEMA_CLAUSE = re.compile(r"\bSCHEMA (IF NOT EXISTS )?pgmq\b")
_SCHEMA_VALUE = re.compile(r"\btable_schema = 'pgmq'")
_WORD = re.compile(r"(?<![\w-])pgmq(?![\w-])")
_NOT_A_SCHEMA = ("extname = 'pgmq'", "'pgmq queue")


def relocated(script: str, schema: str) -> str:
    """pgmq's install script with its schema the run's; refused if the name is left
    anywhere the harness does not know to be no schema (a later script may name it in
    another way)."""
    moved = _QUALIFIER.sub(f"{schema}.", script)
    moved = _SCHEMA_CLAUSE.sub(lambda found: f"SCHEMA {found[1] or ''}{schema}", moved)
    moved = _SCHEMA_VALUE.sub(f"table_schema = '{schema}'", moved)
    for number, line in enumerate(moved.splitlines(), start=1):
        code = line.split("--", 1)[0]
        for known in _NOT_A_SCHEMA:
            code = code.replace(known, "")
        if _WORD.search(code):
            raise HarnessError(
                f"pgmq's install script names its schema where the harness cannot move it "
                f"(line {number}: {line.strip()[:80]!r}); this pgmq package is not supported"
            )
    return moved


def _install(conn: psycopg.Connection[Any], spec: Spec) -> None:
    from pgmq import get_embedded_install_sql, install_pgmq_sql

    found = conn.execute(sql("pgmq_installed_as_extension")).fetchone()
    if found is not None and found[0]:
        raise HarnessError(
            "pgmq: the pgmq extension is created in this database, and its install script "
            "then fails outside CREATE EXTENSION; run the harness in another database"
        )
    install_pgmq_sql(relocated(get_embedded_install_sql(), spec.site.schema), conn=conn)
    conn.execute(sql("pgmq_create"), {"queue": QUEUE})
    if spec.reading.grouped:
        conn.execute(sql("pgmq_create_fifo_index"), {"queue": QUEUE})


def _send_params(spec: Spec, jobs: list[common.Job]) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {
        "queue": QUEUE,
        "msgs": [Jsonb({"n": n, "t": t, "ms": ms}) for n, t, ms in jobs],
    }
    if not spec.reading.grouped:
        return sql("pgmq_send_batch"), params
    params["headers"] = [Jsonb({"x-pgmq-group": str(t)}) for _, t, _ in jobs]
    return sql("pgmq_send_batch_grouped"), params


def _load(conn: psycopg.Connection[Any], spec: Spec, jobs: list[common.Job]) -> None:
    for first in range(0, len(jobs), BACKLOG_CHUNK):
        conn.execute(*_send_params(spec, jobs[first : first + BACKLOG_CHUNK]))


def enqueuer_main(index: int, spec: Spec, signals: Signals) -> None:
    common.run_enqueuer(index, signals, spec.schedule, lambda: _sending(spec))


@asynccontextmanager
async def _sending(spec: Spec) -> AsyncIterator[common.Enqueue]:
    conn = await psycopg.AsyncConnection.connect(
        common.schema_conninfo(spec), autocommit=True, application_name=session_name()
    )
    async with conn:

        async def send(jobs: list[common.Job]) -> None:
            await conn.execute(*_send_params(spec, jobs))

        yield send


def worker_main(index: int, spec: Spec, signals: Signals) -> None:
    run_program(index, signals, lambda report: _work(index, spec, signals, report))


def _work(index: int, spec: Spec, signals: Signals, report: WorkerReport) -> None:
    with connect(common.schema_conninfo(spec)) as conn:
        if spec.plans_file is not None:
            conn.add_notice_handler(captures.notice_handler(spec.plans_file))
        signals.ready[index] = 1
        signals.start.wait()
        if spec.hold:
            common.await_turn(signals, index)
        while not signals.stop.is_set():
            messages = conn.execute(sql(spec.reading.block), _read_params(spec)).fetchall()
            if not messages:
                if not spec.reading.batched:  # read_with_poll has waited in the server
                    time.sleep(spec.poll_interval_s)
                continue
            _run_all(conn, index, spec, signals, report, messages)


def _read_params(spec: Spec) -> dict[str, Any]:
    return {
        "queue": QUEUE,
        "vt": HOLD_VT_S if spec.hold else VT_S,
        "qty": spec.reading.qty,
        "max_poll_seconds": MAX_POLL_S,
        "poll_interval_ms": max(1, round(spec.poll_interval_s * 1000)),
    }


def _run_all(
    conn: psycopg.Connection[Any],
    index: int,
    spec: Spec,
    signals: Signals,
    report: WorkerReport,
    messages: list[tuple[int, dict[str, Any]]],
) -> None:
    """The read's messages worked in order; each archived when done, or (batched) all
    of them in one call at the end, as pgmq's benchmark does."""
    runs = []
    for msg_id, message in messages:
        run = TaskRun(int(message["n"]), int(message["t"]), str(msg_id))
        if spec.hold:
            signals.holding[index] = run.job
            signals.stop.wait()
            return
        if message["ms"] > 0:
            time.sleep(message["ms"] / 1000)
        if not spec.reading.batched:
            conn.execute(sql("pgmq_archive"), {"queue": QUEUE, "msg_id": msg_id})
            common.record_run(report, signals, index, run)
        runs.append(run)
    if spec.reading.batched:
        ids = [msg_id for msg_id, _ in messages]
        conn.execute(sql("pgmq_archive_batch"), {"queue": QUEUE, "msg_ids": ids}).fetchall()
        for run in runs:
            common.record_run(report, signals, index, run)


class PgmqQueue(LibraryQueue):
    label = "pgmq"
    ledger_block = "pgmq_ledger"
    fetch_marker = "read_ct = read_ct + 1"  # its reads' UPDATE, among a capture's

    def __init__(self, name: str, mapping: str, site: Site, inputs: RunInputs) -> None:
        super().__init__(name, site, inputs, Spec.of(site, inputs, mapping))

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        return worker_main, enqueuer_main

    def workers(self, count: int) -> list[Program]:
        """One process per worker, as pgmq's benchmark runs its consumers."""
        return [
            Program("worker", worker_main, self.spec, name=f"pgmq-worker-{slot}")
            for slot in range(count)
        ]

    def capture_workers(self, count: int, plans_file: str) -> list[Program]:
        spec = replace(self.spec, plans_file=plans_file)
        return [
            Program("worker", worker_main, spec, name=f"pgmq-capture-{slot}")
            for slot in range(count)
        ]

    def install(self, conn: psycopg.Connection[Any]) -> None:
        _install(conn, self.spec)

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        _load(conn, self.spec, common.backlog_jobs(self.inputs, rows))
        common.analyze(conn)

    def provenance(self) -> dict[str, Any]:
        from pgmq import get_embedded_sql_version

        reading = self.spec.reading
        tuned = {"read": f"{reading.function}_with_poll", "qty": reading.qty, "archive": "batch"}
        return {
            **({TUNED: tuned} if reading.batched else {}),
            LIBRARY: "pgmq",
            "version": importlib.metadata.version("pgmq"),
            "sql_version": get_embedded_sql_version(),
            "driver": "psycopg (one connection per worker process)",
            "mapping": self.spec.mapping,
            "settings": {
                "worker_processes": "the scenario's workers",
                "read": reading.block.removeprefix("pgmq_"),
                "qty": reading.qty,
                "vt_s": VT_S,
                "fifo_group": "tenant (header x-pgmq-group)" if reading.grouped else None,
                "fifo_index": reading.grouped,
                "empty_read": f"read_with_poll: {MAX_POLL_S} s, polled every poll interval"
                if reading.batched
                else "sleep the poll interval",
                "poll_interval_s": self.spec.poll_interval_s,
                "archive": "one call per read" if reading.batched else "each message",
            },
        }


common.register_programs("pgmq", Spec, worker_main, enqueuer_main)


def entries() -> list[QueueEntry]:
    return common.library_entries(
        dict(MAPPINGS), PgmqQueue, (PythonPackages(("pgmq",), "libraries"),)
    )
