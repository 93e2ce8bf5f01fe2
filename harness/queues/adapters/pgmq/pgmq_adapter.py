"""pgmq through its own SQL, as an adapter of the contract (docs/adapters.md): the install
script its Python package ships (`pgmq` 1.1, PGMQ 1.13), its `create`, `send_batch`, reads
and `archive`, each a call of pgmq's own functions (pgmq.sql). pgmq has no worker: the
loop is the one its docs and its own benchmark show (pgmq-py's "Reading Messages",
benches/ops.py `consume`): read with a visibility timeout, work, archive; on an empty
read, sleep and read again. Each slot is a thread on its own connection; the manifest
runs one process per worker, as the benchmark's consumers.

Mappings of tenants onto its knobs (pgmq.toml), each a read function of pgmq's:
  read, read_batched                      one queue, `read` (msg_id order)
  round_robin, round_robin_batched        FIFO groups (header x-pgmq-group = tenant),
                                          `read_grouped_rr`
  group_head                              FIFO groups, `read_grouped_head`
and the options `qty` (messages a read), `read_with_poll` (the read polls in the server)
and `archive_batch` (a read's messages archived in one call).

pgmq's script creates everything in a schema named `pgmq` and its functions name it
everywhere (`pgmq.q_<queue>`); the extension is not relocatable. The adapter runs the
script the package ships with that name replaced by the run's schema (`relocated`),
through the package's own installer, so that everything is in the run's schema and goes
with it; the functions' SQL is otherwise the script's.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from harness.queues.adapters.python import kit

QUEUE = "harness"  # its tables: q_harness, a_harness (pgmq.sql's pgmq_ledger)
VT_S = 30  # pgmq-py's default visibility timeout (config.vt)
HOLD_VT_S = 3600  # a plan capture holds its messages until its end
MAX_POLL_S = 1  # read_with_poll's wait; the worker sees the stop between two reads
FUNCTIONS = {
    "read": "read",
    "read_batched": "read",
    "round_robin": "read_grouped_rr",
    "round_robin_batched": "read_grouped_rr",
    "group_head": "read_grouped_head",
}
SQL = kit.sql_blocks(Path(__file__).with_name("pgmq.sql"))


def sql(block: str) -> str:
    return SQL[block].sql


@dataclass(frozen=True)
class Reading:
    """How a mapping's worker reads: pgmq's function, messages per read, whether the read
    polls in the server (`*_with_poll`), whether a read's messages are archived in one
    call, and whether messages carry their tenant as FIFO group."""

    function: str
    qty: int
    with_poll: bool
    archive_batch: bool

    @classmethod
    def of(cls, config: kit.Config) -> Reading:
        options = config["options"]
        return cls(
            function=FUNCTIONS[config["mapping"]],
            qty=int(options.get("qty", 1)),
            with_poll=bool(options.get("read_with_poll", False)),
            archive_batch=bool(options.get("archive_batch", False)),
        )

    @property
    def grouped(self) -> bool:
        return self.function != "read"

    @property
    def block(self) -> str:
        return f"pgmq_{self.function}{'_with_poll' if self.with_poll else ''}"


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
    anywhere the adapter does not know to be no schema (a later script may name it in
    another way)."""
    moved = _QUALIFIER.sub(f"{schema}.", script)
    moved = _SCHEMA_CLAUSE.sub(lambda found: f"SCHEMA {found[1] or ''}{schema}", moved)
    moved = _SCHEMA_VALUE.sub(f"table_schema = '{schema}'", moved)
    for number, line in enumerate(moved.splitlines(), start=1):
        code = line.split("--", 1)[0]
        for known in _NOT_A_SCHEMA:
            code = code.replace(known, "")
        if _WORD.search(code):
            raise RuntimeError(
                f"pgmq's install script names its schema where the adapter cannot move it "
                f"(line {number}: {line.strip()[:80]!r}); this pgmq package is not supported"
            )
    return moved


def _connect(config: kit.Config) -> psycopg.Connection[Any]:
    return psycopg.connect(kit.conninfo(config), autocommit=True)


# -- the roles ---------------------------------------------------------------------------


def versions(config: kit.Config) -> kit.Said:
    from pgmq import get_embedded_sql_version

    reading = Reading.of(config)
    return kit.Said(
        versions={
            "pgmq": importlib.metadata.version("pgmq"),
            "pgmq sql": get_embedded_sql_version(),
        },
        settings={
            "driver": "psycopg (one connection per worker slot)",
            "worker_processes": "the manifest's: one per worker",
            "read": reading.block.removeprefix("pgmq_"),
            "qty": reading.qty,
            "vt_s": VT_S,
            "fifo_group": "tenant (header x-pgmq-group)" if reading.grouped else None,
            "fifo_index": reading.grouped,
            "empty_read": f"read_with_poll: {MAX_POLL_S} s, polled every poll interval"
            if reading.with_poll
            else "sleep the poll interval",
            "poll_interval_ms": config["poll_interval_ms"],
            "archive": "one call per read" if reading.archive_batch else "each message",
        },
    )


def install(config: kit.Config) -> None:
    from pgmq import get_embedded_install_sql, install_pgmq_sql

    with _connect(config) as conn:
        found = conn.execute(sql("pgmq_installed_as_extension")).fetchone()  # type: ignore[arg-type]
        if found is not None and found[0]:
            raise RuntimeError(
                "pgmq: the pgmq extension is created in this database, and its install "
                "script then fails outside CREATE EXTENSION; run the harness in another database"
            )
        install_pgmq_sql(relocated(get_embedded_install_sql(), config["schema"]), conn=conn)
        conn.execute(sql("pgmq_create"), {"queue": QUEUE})  # type: ignore[arg-type]
        if Reading.of(config).grouped:
            conn.execute(sql("pgmq_create_fifo_index"), {"queue": QUEUE})  # type: ignore[arg-type]


def _send_params(reading: Reading, jobs: list[kit.Job]) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {
        "queue": QUEUE,
        "msgs": [Jsonb({"n": n, "t": t, "ms": ms}) for n, t, ms in jobs],
    }
    if not reading.grouped:
        return sql("pgmq_send_batch"), params
    params["headers"] = [Jsonb({"x-pgmq-group": str(t)}) for _, t, _ in jobs]
    return sql("pgmq_send_batch_grouped"), params


@asynccontextmanager
async def enqueuer(config: kit.Config) -> AsyncIterator[kit.Enqueue]:
    """`send_batch`, a batch a statement, on one connection."""
    reading = Reading.of(config)
    conn = await psycopg.AsyncConnection.connect(kit.conninfo(config), autocommit=True)
    async with conn:

        async def send(jobs: list[kit.Job]) -> None:
            await conn.execute(*_send_params(reading, jobs))  # type: ignore[arg-type]

        yield send


async def worker(config: kit.Config, work: kit.Work) -> None:
    """A thread per slot, each on its own connection, reading until the stop."""
    conns = [_connect(config) for _ in range(config["concurrency"])]
    try:
        if config.get("explain_options"):
            for conn in conns:
                conn.add_notice_handler(kit.notice_forwarder(work.out))
        work.ready()
        await work.started()
        reading = Reading.of(config)
        slots = [asyncio.to_thread(_read_loop, c, k, reading, work) for k, c in enumerate(conns)]
        await asyncio.gather(*slots)
    finally:
        for conn in conns:
            conn.close()


def _read_loop(conn: psycopg.Connection[Any], slot: int, reading: Reading, work: kit.Work) -> None:
    if work.hold:
        work.turn_here(slot)
    params = _read_params(reading, work)
    while not work.stop.is_set():
        messages = conn.execute(sql(reading.block), params).fetchall()  # type: ignore[arg-type]
        if not messages:
            if not reading.with_poll:  # read_with_poll has waited in the server
                time.sleep(work.config["poll_interval_ms"] / 1000)
            continue
        if work.hold:
            work.hold_job_here()
            return
        _run_all(conn, reading, work, messages)


def _read_params(reading: Reading, work: kit.Work) -> dict[str, Any]:
    return {
        "queue": QUEUE,
        "vt": HOLD_VT_S if work.hold else VT_S,
        "qty": reading.qty,
        "max_poll_seconds": MAX_POLL_S,
        "poll_interval_ms": max(1, round(work.config["poll_interval_ms"])),
    }


def _run_all(
    conn: psycopg.Connection[Any],
    reading: Reading,
    work: kit.Work,
    messages: list[tuple[int, dict[str, Any]]],
) -> None:
    """The read's messages worked in order; each archived when done, or all of them in
    one call at the end, as pgmq's benchmark does. The read took them all: each is held
    from then on."""
    for msg_id, message in messages:
        work.begin(message["n"], message["t"], str(msg_id))
    for msg_id, message in messages:
        if message["ms"] > 0:
            time.sleep(message["ms"] / 1000)
        if not reading.archive_batch:
            conn.execute(sql("pgmq_archive"), {"queue": QUEUE, "msg_id": msg_id})  # type: ignore[arg-type]
            work.job(message["n"], message["t"], str(msg_id))
    if reading.archive_batch:
        ids = [msg_id for msg_id, _ in messages]
        conn.execute(sql("pgmq_archive_batch"), {"queue": QUEUE, "msg_ids": ids}).fetchall()  # type: ignore[arg-type]
        for msg_id, message in messages:
            work.job(message["n"], message["t"], str(msg_id))


def ledger(config: kit.Config) -> Iterator[kit.Record]:
    return kit.ledger_records(config, sql("pgmq_ledger"))


if __name__ == "__main__":
    kit.serve(sys.modules[__name__])
