"""A horizon's samples (docs/long-horizon.md), taken by the long transaction's holder.

A long steady run is sampled by the same thread and connection that sample a long
transaction (harness/run/long_transaction.py): `HorizonSampler` adds, on that
connection, every `sample_s` the server's oldest xmin, WAL and notification queue and
each table and index of the queue's own schemas; every second the wait events of the
database's active sessions; at each phase boundary pgstattuple's dead and free shares
of each table (where the extension is there). Each row goes, as it is taken, to
horizon.csv, horizon-relations.csv, horizon-waits.csv or horizon-pgstattuple.csv
(appended by harness/results/series.py): an interrupted run keeps them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from harness.results.series import Sink
from harness.scenario.model import Horizon
from harness.sqlfiles import builtin_blocks

SQL = builtin_blocks("harness.run", "long_transaction.sql")
WAIT_EVERY_S = 1.0
SERIES_COLUMNS = [
    "at",
    "t_s",
    "phase",
    "oldest_xmin_age",
    "wal_bytes",
    "notify_usage",
    "live",
    "dead",
    "table_bytes",
    "index_bytes",
    "autovacuums",
    "autoanalyzes",
]
RELATION_COLUMNS = [
    "at",
    "t_s",
    "phase",
    "schema",
    "relation",
    "kind",
    "table",
    "live",
    "dead",
    "bytes",
    "vacuums",
    "autovacuums",
    "analyzes",
    "autoanalyzes",
    "last_autovacuum_age_s",
    "last_autoanalyze_age_s",
    "index_scans",
]
WAIT_COLUMNS = ["t_s", "phase", "wait_event_type", "wait_event", "sessions"]
PGSTATTUPLE_COLUMNS = [
    "at",
    "t_s",
    "boundary",
    "schema",
    "relation",
    "table_len",
    "dead_percent",
    "free_percent",
]

# Each raw file and the record's list of its rows
FILES = {
    "horizon.csv": "series",
    "horizon-relations.csv": "relations",
    "horizon-waits.csv": "waits",
    "horizon-pgstattuple.csv": "pgstattuple",
}
COLUMNS = {
    "horizon.csv": SERIES_COLUMNS,
    "horizon-relations.csv": RELATION_COLUMNS,
    "horizon-waits.csv": WAIT_COLUMNS,
    "horizon-pgstattuple.csv": PGSTATTUPLE_COLUMNS,
}


@dataclass
class HorizonRecord:
    """A repetition's horizon samples, as the raw files' rows (but the repetition's keys)."""

    series: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)
    waits: list[dict[str, Any]] = field(default_factory=list)
    pgstattuple: list[dict[str, Any]] = field(default_factory=list)
    sink: Sink | None = None  # each row also to the run folder's file as it is taken

    def keep(self, name: str, rows: list[dict[str, Any]]) -> None:
        """Rows of one of FILES' files, kept here and handed to the sink."""
        getattr(self, FILES[name]).extend(rows)
        if self.sink is not None:
            for row in rows:
                self.sink(name, row)

    def progress(self) -> tuple[str, float, int | None]:
        """The latest sample's phase, seconds and dead tuples (the console's line)."""
        if not self.series:
            return "warmup", 0.0, None
        last = self.series[-1]
        return str(last["phase"]), float(last["t_s"]), last["dead"]


class HorizonSampler:
    """The horizon's samples on the holder's sampling connection, each when it is due."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        horizon: Horizon,
        schemas: list[str],
        pgstattuple: bool,
        sink: Sink | None = None,
    ) -> None:
        self.conn, self.horizon, self.schemas = conn, horizon, schemas
        self.pgstattuple = pgstattuple
        self.record = HorizonRecord(sink=sink)
        self._next_sample = self._next_wait = 0.0
        self._phase: str | None = None

    def tick(self, t_s: float) -> tuple[bool, float]:
        """Whatever is due at `t_s`: (whether the tables were sampled, when the next
        sample of any kind is due)."""
        phase = self.horizon.phase_at(t_s)
        if phase != self._phase:
            self._boundary(t_s, f"{self._phase or 'start'}->{phase}")
            self._phase = phase
        if t_s >= self._next_wait:
            self._waits(t_s, phase)
            self._next_wait = _next(self._next_wait, WAIT_EVERY_S, t_s)
        sampled = t_s >= self._next_sample
        if sampled:
            self._sample(t_s, phase)
            self._next_sample = _next(self._next_sample, self.horizon.sample_s, t_s)
        return sampled, min(self._next_wait, self._next_sample)

    def close(self, t_s: float) -> None:
        """The last sample and boundary, as the workload ends."""
        self._sample(t_s, self.horizon.phase_at(t_s))
        self._boundary(t_s, f"{self._phase or 'start'}->end")

    def _sample(self, t_s: float, phase: str) -> None:
        row = self.conn.execute(SQL["horizon_sample"].sql).fetchone()  # type: ignore[arg-type]
        assert row is not None
        at, oldest, wal, notify = row
        stamp = {"at": at.isoformat(timespec="microseconds"), "t_s": round(t_s, 4), "phase": phase}
        relations = [
            dict(zip(RELATION_COLUMNS, [*stamp.values(), *found], strict=True))
            for found in self.conn.execute(
                SQL["horizon_relations"].sql,  # type: ignore[arg-type]
                {"schemas": self.schemas},
            )
        ]
        self.record.keep("horizon-relations.csv", relations)
        self.record.keep(
            "horizon.csv",
            [
                stamp
                | {"oldest_xmin_age": oldest, "wal_bytes": wal, "notify_usage": float(notify)}
                | _totals(relations)
            ],
        )

    def _waits(self, t_s: float, phase: str) -> None:
        found = self.conn.execute(SQL["horizon_waits"].sql).fetchall()  # type: ignore[arg-type]
        self.record.keep(
            "horizon-waits.csv",
            [dict(zip(WAIT_COLUMNS, [round(t_s, 4), phase, *row], strict=True)) for row in found],
        )

    def _boundary(self, t_s: float, boundary: str) -> None:
        """pgstattuple's figures of each table, read whole: at phase boundaries only."""
        if not self.pgstattuple:
            return
        at = self.conn.execute("select clock_timestamp()").fetchone()
        assert at is not None
        stamp = [at[0].isoformat(timespec="microseconds"), round(t_s, 4), boundary]
        found = self.conn.execute(
            SQL["horizon_pgstattuple"].sql,  # type: ignore[arg-type]
            {"schemas": self.schemas},
        )
        self.record.keep(
            "horizon-pgstattuple.csv",
            [dict(zip(PGSTATTUPLE_COLUMNS, [*stamp, *row], strict=True)) for row in found],
        )


def _next(previous: float, step: float, now: float) -> float:
    """The next moment on the grid; a sample slower than the step starts a new grid."""
    return max(previous + step, now + step / 2)


def _totals(relations: list[dict[str, Any]]) -> dict[str, Any]:
    """The queue's tables and indexes together."""
    tables = [row for row in relations if row["kind"] == "table"]
    indexes = [row for row in relations if row["kind"] == "index"]
    return {
        "live": sum(row["live"] or 0 for row in tables),
        "dead": sum(row["dead"] or 0 for row in tables),
        "table_bytes": sum(row["bytes"] or 0 for row in tables),
        "index_bytes": sum(row["bytes"] or 0 for row in indexes),
        "autovacuums": sum(row["autovacuums"] or 0 for row in tables),
        "autoanalyzes": sum(row["autoanalyzes"] or 0 for row in tables),
    }


def analytics_read(conn: psycopg.Connection[Any], schemas: list[str]) -> None:
    """What an analytics-like reader reads in its held snapshot: every row of each table
    of the queue's schemas, counted (a report over the queue's history)."""
    found = conn.execute(SQL["tables_of_schemas"].sql, {"schemas": schemas}).fetchall()  # type: ignore[arg-type]
    counts = [
        sql.SQL("select count(*) from {}").format(sql.Identifier(schema, table))
        for schema, table in found
    ]
    if counts:
        conn.execute(sql.SQL(" union all ").join(counts)).fetchall()
