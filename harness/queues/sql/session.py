"""How a worker's statements reach the server: two transports, one interface.

`Session.run(steps)` runs a list of steps in order and returns one `Result` each: a step
is a statement with its parameters, or a plain command (BEGIN, COMMIT, ROLLBACK). The
claim's logic (harness/queues/sql/claim.py) is written once against it.

- `Prepared`: each statement prepared on its first use, the steps of one call sent
  together and answered in one round trip (libpq's pipeline mode). The server sees what
  psycopg's cursors send once they have prepared a statement: the same statements and
  transactions, in fewer round trips, at about a tenth of the client's CPU per
  statement. On a small machine the client's CPU is taken from the server it measures:
  with 0 ms jobs and four workers on two cores, psycopg's bookkeeping made the workers
  drain a queue at about 0.6 of pgbench's rate on the same SQL.
- `Plain`: psycopg's cursors, one statement after the other. `harness check` times
  claims this way beside a reference query sent the same way, and workers that must
  survive a server restart use it: psycopg's connection turns every way a connection
  can break into an OperationalError, which the worker's reconnect relies on.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg import pq
from psycopg.pq.abc import PGresult

BEGIN, COMMIT, ROLLBACK = b"begin", b"commit", b"rollback"
Step = tuple[str, dict[str, Any]] | bytes  # a statement and its parameters, or a command


@dataclass(frozen=True, slots=True)
class Result:
    """What a claim needs of a statement's result: its first row (the statements return
    ids and counts, so integers) and how many rows it changed."""

    row: tuple[int, ...] | None
    changed: int


class Session(Protocol):
    def run(self, steps: list[Step]) -> list[Result]:
        """The steps in order, one result each; the first error is raised."""


class Plain:
    """Through psycopg's cursors; psycopg prepares a statement from its fifth execution."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def run(self, steps: list[Step]) -> list[Result]:
        return [self._one(step) for step in steps]

    def _one(self, step: Step) -> Result:
        if isinstance(step, bytes):
            self.conn.execute(step)
            return Result(None, 0)
        cursor = self.conn.execute(step[0], step[1])  # type: ignore[call-overload]
        found = cursor.fetchone() if cursor.description is not None else None
        row = None if found is None else tuple(int(value or 0) for value in found)
        return Result(row, max(int(cursor.rowcount), 0))


# Unique in the process, so that two sessions on one connection never clash.
_STATEMENT_NUMBERS = itertools.count()
_PLACEHOLDER = re.compile(r"%\((?P<name>[a-z_][a-z0-9_]*)\)s")


class Prepared:
    """Each statement prepared on its first use, then run through libpq directly; the
    steps of one `run` in one round trip."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.pgconn = conn.pgconn
        self.encoding = conn.info.encoding
        self.statements: dict[str, tuple[bytes, list[str]]] = {}  # sql -> name, parameters

    def run(self, steps: list[Step]) -> list[Result]:
        """After an error the rest are skipped; the first error is raised."""
        known = [None if isinstance(step, bytes) else self._known(step[0]) for step in steps]
        self.pgconn.enter_pipeline_mode()
        try:
            for step, statement in zip(steps, known, strict=True):
                self._send(step, statement)
            self.pgconn.pipeline_sync()
            results = [self._one_result() for _ in steps]
            self.pgconn.get_result()  # the sync's own result
        finally:
            self.pgconn.exit_pipeline_mode()
        return [_result(self._checked(result)) for result in results]

    def _send(self, step: Step, statement: tuple[bytes, list[str]] | None) -> None:
        if isinstance(step, bytes):
            self.pgconn.send_query_params(step, None)
            return
        assert statement is not None
        name, names = statement
        self.pgconn.send_query_prepared(name, _values(step[1], names))

    def _one_result(self) -> PGresult:
        result = self.pgconn.get_result()
        assert result is not None
        while self.pgconn.get_result() is not None:  # a statement's results end with None
            pass
        return result

    def _known(self, sql: str) -> tuple[bytes, list[str]]:
        return self.statements.get(sql) or self._prepare(sql)

    def _prepare(self, sql: str) -> tuple[bytes, list[str]]:
        """psycopg's %(name)s placeholders become $1, $2 ... in order of first use."""
        names: list[str] = []

        def number(found: re.Match[str]) -> str:
            if found["name"] not in names:
                names.append(found["name"])
            return f"${names.index(found['name']) + 1}"

        text = _PLACEHOLDER.sub(number, sql).replace("%%", "%")
        name = f"harness_{next(_STATEMENT_NUMBERS)}".encode()
        self._checked(self.pgconn.prepare(name, text.encode(self.encoding)))
        self.statements[sql] = (name, names)
        return name, names

    def _checked(self, result: PGresult) -> PGresult:
        if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            raise psycopg.errors.error_from_result(result, encoding=self.encoding)
        return result


def _values(params: dict[str, Any], names: list[str]) -> list[bytes]:
    return [str(params[name]).encode() for name in names]  # ids and counts: never NULL


def _result(result: PGresult) -> Result:
    row = None
    if result.ntuples:
        row = tuple(int(result.get_value(0, column) or 0) for column in range(result.nfields))
    return Result(row, int(result.command_tuples or 0))
