"""A long transaction held beside the queue, and what it does to the queue's tables.

For a scenario with `long_transaction`, `Holder` opens two connections of its own before
the clock starts. From `from_s` for `for_s` seconds, one holds a repeatable-read snapshot
(harness/run/long_transaction.sql, `hold`): the database's xmin horizon stays where it was, so
every row version the workers' updates leave behind stays in the heap and its indexes.
The other samples, every `sample_ms` from the clock's start to the end of the workload,
the holder's xmin age and the tables' dead tuples, sizes and vacuum counts (`sample`).

It runs as a thread of the runner's process: it only ever waits on the server or the
clock. Its samples stay in memory and, with a sink (harness/results/series.py), go to
the run folder's bloat.csv row by row as they are taken.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.synchronize import Event
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd
import psycopg
from psycopg import sql

from harness.analysis.held_fetches import fetch_figures, phase_of
from harness.analysis.plans import plan_figures
from harness.errors import RunFailed
from harness.queues.base import Site
from harness.results.series import Sink
from harness.run.horizon import HorizonRecord, HorizonSampler, analytics_read
from harness.scenario.model import Horizon, LongTransaction
from harness.server.connections import connect
from harness.server.schema import CLEANUP_LOCK_TIMEOUT_S, mark, marked_token, schema_sql
from harness.sqlfiles import builtin_blocks

SQL = builtin_blocks("harness.run", "long_transaction.sql")
SAMPLE_COLUMNS = [
    "at",
    "phase",
    "holder_xmin_age",
    "jobs_live",
    "jobs_dead",
    "jobs_bytes",
    "jobs_index_bytes",
    "jobs_autovacuums",
    "jobs_vacuums",
    "tenants_live",
    "tenants_dead",
    "tenants_bytes",
    "tenants_autovacuums",
    "jobs_dead_versions",
    "tenants_dead_versions",
    "dequeue_buffers",
    "dequeue_ms",
]
_JOIN_TIMEOUT_S = 30


@dataclass
class HoldRecord:
    """What one repetition's hold did: its window (database clock) and the samples."""

    began_at: datetime | None = None
    ended_at: datetime | None = None  # after the commit: the horizon was free from then
    cut_short: bool = False  # the workload ended before for_s had passed
    vacuumed: bool = False  # vacuum_after ran
    samples: list[dict[str, Any]] = field(default_factory=list)
    origin: float | None = None  # time.monotonic() when the clock started
    began_s: float | None = None  # the hold's window, in seconds from then
    ended_s: float | None = None
    # explain_fetches: the fetches' plans (fetch-plans.csv's rows), or why there are none
    fetches: list[dict[str, Any]] = field(default_factory=list)
    fetches_skipped: str | None = None
    horizon: HorizonRecord | None = None  # a horizon's samples (harness/run/horizon.py)
    # each row also to the run folder's file as it is taken (harness/results/series.py)
    sink: Sink | None = None

    def keep(self, name: str, rows: list[dict[str, Any]]) -> None:
        """Rows of bloat.csv or fetch-plans.csv, kept here and handed to the sink."""
        (self.samples if name == "bloat.csv" else self.fetches).extend(rows)
        if self.sink is not None:
            for row in rows:
                self.sink(name, row)

    def window(self) -> dict[str, Any]:
        """The hold as run.json records it."""
        return {
            "began_at": self.began_at.isoformat() if self.began_at else None,
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "cut_short": self.cut_short,
            "vacuumed": self.vacuumed,
            "began_s": self.began_s,
            "ended_s": self.ended_s,
            "explained_fetches": len(self.fetches) if self.fetches_skipped is None else None,
            "fetches_skipped": self.fetches_skipped,
        }

    def since_origin(self) -> float:
        assert self.origin is not None, "the clock has started"
        return round(time.monotonic() - self.origin, 4)


class Holder:
    """Context manager: connects on entry, holds and samples in a thread, joins on exit."""

    def __init__(
        self,
        site: Site,
        hold: LongTransaction,
        start: Event,
        dequeue: str | None = None,
        params: dict[str, Any] | None = None,
        schemas: tuple[str, ...] | None = None,
        horizon: Horizon | None = None,
        gate: str | None = None,
        sink: Sink | None = None,
    ) -> None:
        """`schemas`: a library's queue, whose tables are all those of its schemas (the
        run's, and those it makes by a fixed name), summed; else the harness's own
        `jobs` and `queue_tenants`. `horizon`: a long steady run, its held phase `hold`,
        sampled by a HorizonSampler beside; `gate`: the file whose presence lets a
        library's explained workers keep their plans (its fetch every explain_every_s);
        `sink`: where each row goes as it is taken (the run folder's files)."""
        self.hold, self.horizon, self._gate = hold, horizon, gate
        self._readers: list[psycopg.Connection] = []
        self._sampler: HorizonSampler | None = None
        self._dequeue, self._params = dequeue, params or {}
        self._schemas = list(schemas) if schemas is not None else None
        self.record = HoldRecord(sink=sink)
        self._site, self._start = site, start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="harness-horizon", daemon=True)
        self._error: BaseException | None = None
        self._holding: psycopg.Connection | None = None
        self._sampling: psycopg.Connection | None = None
        self._pgstattuple = False

    def __enter__(self) -> Holder:
        self._holding = connect(self._site.dsn, schema=self._site.schema, utc=True)
        self._sampling = connect(self._site.dsn, schema=self._site.schema, utc=True)
        self._pgstattuple = self._find_pgstattuple(self._sampling)
        if self.horizon is not None:
            schemas = self._schemas or [self._site.schema]
            self._sampler = HorizonSampler(
                self._sampling, self.horizon, schemas, self._pgstattuple, self.record.sink
            )
            self.record.horizon = self._sampler.record
            others = range(self.horizon.held.readers - 1)
            self._readers = [
                connect(self._site.dsn, schema=self._site.schema, utc=True) for _ in others
            ]
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=_JOIN_TIMEOUT_S)
        if self._pgstattuple and self._sampling is not None and not self._thread.is_alive():
            with contextlib.suppress(psycopg.Error):  # else its backend's end releases it
                self._sampling.execute(SQL["done_with_pgstattuple"].sql)  # type: ignore[arg-type]
        for conn in (self._holding, self._sampling, *self._readers):
            if conn is not None:
                conn.close()  # a hold still open ends here, rolled back; the shared lock too
        if self._pgstattuple:
            release_pgstattuple(self._site.dsn)
        if error is None and self._error is not None:
            raise RunFailed(f"the long transaction failed: {self._error}") from self._error

    @property
    def pid(self) -> int:
        """The holding connection's backend (pg_stat_activity.pid)."""
        assert self._holding is not None, "connected on entry"
        return self._holding.info.backend_pid

    def _find_pgstattuple(self, conn: psycopg.Connection) -> bool:
        """pgstattuple on the sampling connection's path, used under a shared lock that
        keeps other runs from dropping it meanwhile; without it (not a superuser, no
        contrib), the dead-version columns stay empty."""
        conn.execute(SQL["use_pgstattuple"].sql)  # type: ignore[arg-type]
        where = place_pgstattuple(conn)
        if where is None:
            return False
        path = sql.SQL("set search_path to {}, {}")
        conn.execute(path.format(sql.Identifier(self._site.schema), sql.Identifier(where)))
        return True

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as error:  # reported by __exit__, in the runner's thread
            self._error = error

    def _loop(self) -> None:
        while not self._start.wait(timeout=0.05):
            if self._stop.is_set():
                return
        origin = self.record.origin = time.monotonic()
        if self._sampler is not None:
            self._horizon_loop(origin, self._sampler)
            return
        begin_s, end_s = self.hold.from_s, self.hold.from_s + self.hold.for_s
        phase, next_sample = "before", 0.0
        while not self._stop.is_set():
            now = time.monotonic() - origin
            if phase == "before" and now >= begin_s:
                self._begin()
                phase, next_sample = "during", now
            elif phase == "during" and now >= end_s:
                self._end()
                phase, next_sample = "after", now
            if now >= next_sample:
                self._sample(phase)
                step = self.hold.sample_ms / 1000
                # On the grid; a sample slower than the step starts a new grid, not a burst.
                next_sample = max(next_sample + step, now + step / 2)
            transition = {"before": begin_s, "during": end_s}.get(phase, math.inf)
            due = min(next_sample, transition)
            self._stop.wait(max(0.0, due - (time.monotonic() - origin)))
        if phase == "during":
            self._end(cut_short=True)

    def _horizon_loop(self, origin: float, sampler: HorizonSampler) -> None:
        """A horizon: the held phase's readers begin and end on time, the sampler's
        samples (and the bloat row beside each of its table samples) come when due, and
        the fetch is explained every explain_every_s."""
        assert self.horizon is not None
        begin_s, end_s = self.hold.from_s, self.hold.from_s + self.hold.for_s
        phase, next_explain, gate_until = "before", 0.0, math.inf
        while not self._stop.is_set():
            now = time.monotonic() - origin
            if phase == "before" and now >= begin_s:
                self._begin()
                phase = "during"
            elif phase == "during" and now >= end_s:
                self._end()
                phase = "after"
            sampled, next_sample = sampler.tick(now)
            if sampled:
                self._sample(phase, explain=False)
            if now >= next_explain:
                gate_until = self._explain_now(now)
                next_explain = max(next_explain + self.horizon.explain_every_s, now + 1)
            if now >= gate_until:
                self._close_gate()
                gate_until = math.inf
            transition = {"before": begin_s, "during": end_s}.get(phase, math.inf)
            due = min(next_sample, next_explain, gate_until, transition)
            self._stop.wait(max(0.0, due - (time.monotonic() - origin)))
        self._close_gate()
        sampler.close(time.monotonic() - origin)
        self._sample(phase, explain=False)
        if phase == "during":
            self._end(cut_short=True)

    def _explain_now(self, now: float) -> float:
        """The fetch explained now: the harness's own dequeue by EXPLAIN, a row of
        fetch-plans.csv; a library's by opening the gate of its explained workers for
        explain_for_s. When the gate is to close (inf: none opened)."""
        assert self.horizon is not None and self._sampling is not None
        if self._dequeue is not None:
            plan = self._explain_plan(self._sampling)
            at_s = pd.Series([round(now, 4)])
            phase = phase_of(at_s, self.record.began_s, self.record.ended_s).iloc[0]
            figures = fetch_figures(plan["Plan"], plan["Execution Time"])
            self.record.keep("fetch-plans.csv", [{"at_s": round(now, 4), "phase": phase} | figures])
            return math.inf
        if self._gate is None:
            return math.inf
        Path(self._gate).touch()
        return now + self.horizon.explain_for_s

    def _close_gate(self) -> None:
        if self._gate is not None:
            Path(self._gate).unlink(missing_ok=True)

    def _begin(self) -> None:
        assert self._holding is not None
        self.record.began_s = self.record.since_origin()
        self._holding.execute("begin isolation level repeatable read")
        self.record.began_at = self._scalar(self._holding, SQL["hold"].sql)
        if self.horizon is not None:  # analytics-like readers: each reads the queue's tables
            schemas = self._schemas or [self._site.schema]
            analytics_read(self._holding, schemas)
            for reader in self._readers:
                reader.execute("begin isolation level repeatable read")
                analytics_read(reader, schemas)

    def _end(self, cut_short: bool = False) -> None:
        assert self._holding is not None and self._sampling is not None
        self._holding.execute("commit")
        for reader in self._readers:
            reader.execute("commit")
        self.record.ended_s = self.record.since_origin()
        self.record.ended_at = self._scalar(self._sampling, "select clock_timestamp()")
        self.record.cut_short = cut_short
        if self.hold.vacuum_after and not cut_short:
            self._vacuum(self._sampling)
            self.record.vacuumed = True

    def _vacuum(self, conn: psycopg.Connection) -> None:
        if self._schemas is None:
            conn.execute(SQL["vacuum_after"].sql)  # type: ignore[arg-type]
            return
        found = conn.execute(SQL["tables_of_schemas"].sql, {"schemas": self._schemas})  # type: ignore[arg-type]
        tables = [sql.Identifier(schema, table) for schema, table in found.fetchall()]
        if tables:
            conn.execute(sql.SQL("vacuum {}").format(sql.SQL(", ").join(tables)))

    def _sample(self, phase: str, explain: bool = True) -> None:
        assert self._sampling is not None and self._holding is not None
        library = self._schemas is not None
        row = self._sampling.execute(
            SQL["sample_schemas" if library else "sample"].sql,  # type: ignore[arg-type]
            {"holder_pid": self.pid, "schemas": self._schemas},
        ).fetchone()
        assert row is not None
        at, *figures = row
        versions: list[Any] = [None, None]
        if self._pgstattuple:
            block = SQL["dead_versions_schemas" if library else "dead_versions"].sql
            found = self._sampling.execute(block, {"schemas": self._schemas}).fetchone()  # type: ignore[arg-type]
            assert found is not None
            versions = list(found)
        values = [
            at.isoformat(timespec="microseconds"),
            phase,
            *figures,
            *versions,
            *(self._explain_dequeue(self._sampling) if explain else (None, None)),
        ]
        self.record.keep("bloat.csv", [dict(zip(SAMPLE_COLUMNS, values, strict=True))])

    def _explain_dequeue(self, conn: psycopg.Connection) -> tuple[int | None, float | None]:
        """Shared buffers and execution time of one dequeue, as the workers run it, in a
        transaction rolled back: what walking the dead index entries costs, free of the
        CPU contention that blurs the workers' claim latency. Its row lock is held for
        the EXPLAIN only; a worker's SKIP LOCKED passes over that job meanwhile."""
        if self._dequeue is None:
            return None, None
        statement = "explain (analyze, buffers, format json) " + self._dequeue
        with conn.transaction(force_rollback=True):
            row = conn.execute(statement, self._params).fetchone()  # type: ignore[arg-type]
        assert row is not None
        figures = plan_figures(row[0])
        return figures.shared_buffers, round(figures.execution_ms, 4)

    def _explain_plan(self, conn: psycopg.Connection) -> dict[str, Any]:
        """The dequeue's EXPLAIN (ANALYZE, BUFFERS) as JSON, rolled back: its one plan."""
        assert self._dequeue is not None
        statement = "explain (analyze, buffers, format json) " + self._dequeue
        with conn.transaction(force_rollback=True):
            row = conn.execute(statement, self._params).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return row[0][0]  # type: ignore[no-any-return]

    @staticmethod
    def _scalar_row(conn: psycopg.Connection, statement: str) -> tuple[Any, ...]:
        row = conn.execute(statement).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return tuple(row)

    @classmethod
    def _scalar(cls, conn: psycopg.Connection, statement: str) -> Any:
        return cls._scalar_row(conn, statement)[0]


PGSTATTUPLE_SCHEMA = "harness_pgstattuple"


def place_pgstattuple(conn: psycopg.Connection) -> str | None:
    """The schema pgstattuple is installed in: where it is already, whoever installed
    it, or else created by this run in a schema of its own (PGSTATTUPLE_SCHEMA, marked
    with this run's token), never in the run's schema, which other runs' samplers would
    lose with it. None if it cannot be created."""
    try:
        with conn.transaction():
            conn.execute(SQL["create_pgstattuple_alone"].sql)  # type: ignore[arg-type]
            found = conn.execute(SQL["find_pgstattuple"].sql).fetchone()  # type: ignore[arg-type]
            if found is not None:
                return str(found[0])
            name = sql.Identifier(PGSTATTUPLE_SCHEMA)
            conn.execute(sql.SQL("create schema {}").format(name))
            conn.execute(sql.SQL("comment on schema {} is {}").format(name, sql.Literal(mark())))
            conn.execute(sql.SQL("create extension pgstattuple schema {}").format(name))
            return PGSTATTUPLE_SCHEMA
    except psycopg.Error:
        return None


def release_pgstattuple(dsn: str) -> None:
    """pgstattuple dropped once no run samples with it, if a run of the harness created
    it (its schema is PGSTATTUPLE_SCHEMA, carries the harness's mark and belongs to this
    role); one anybody else installed is never dropped. Whatever stands in the way (a run
    still sampling, an object of someone's built on it) leaves it where it is."""
    with contextlib.suppress(psycopg.Error), connect(dsn, connect_timeout=10) as conn:
        alone = conn.execute(SQL["drop_pgstattuple_alone"].sql).fetchone()  # type: ignore[arg-type]
        if alone is None or not alone[0]:
            return
        try:
            found = conn.execute(SQL["find_pgstattuple"].sql).fetchone()  # type: ignore[arg-type]
            if found is not None and _created_by_the_harness(*found):
                _drop_pgstattuple(conn)
        finally:
            conn.execute(SQL["release_pgstattuple"].sql)  # type: ignore[arg-type]


def _created_by_the_harness(where: str, comment: str | None, ours: bool) -> bool:
    return where == PGSTATTUPLE_SCHEMA and marked_token(comment) is not None and ours


def _drop_pgstattuple(conn: psycopg.Connection) -> None:
    """Without cascade: what someone built on the extension or put in its schema keeps
    both where they are."""
    with conn.transaction():
        timeout = {"timeout": f"{CLEANUP_LOCK_TIMEOUT_S}s"}
        conn.execute(schema_sql()["cleanup_lock_timeout"].sql, timeout)  # type: ignore[arg-type]
        conn.execute("drop extension pgstattuple")
        conn.execute(sql.SQL("drop schema {}").format(sql.Identifier(PGSTATTUPLE_SCHEMA)))
