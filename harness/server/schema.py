"""The run's own schema on the server: created and marked by the harness, dropped at the
end; nothing the harness did not create is ever dropped or changed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from harness.errors import HarnessError
from harness.server.connections import connect

SCHEMA_MARK = "created by tenant-queue-bench"  # the comment on every schema it creates


@contextmanager
def own_schema(dsn: str, schema: str, reuse: bool = False) -> Iterator[None]:
    """The run's schema: created, marked as the harness's, and dropped at the end.

    One that exists already is refused, unless `reuse` and it carries the harness's mark
    (left behind by a run that was killed outright): nothing else is ever dropped."""
    with connect(dsn) as conn:
        found = conn.execute(
            "select obj_description(oid, 'pg_namespace') from pg_namespace where nspname = %s",
            (schema,),
        ).fetchone()
        if found is not None:
            _may_reuse(schema, found[0], reuse)
            conn.execute(sql.SQL("drop schema {} cascade").format(sql.Identifier(schema)))
        create_marked(conn, schema)
    try:
        yield
    finally:
        with connect(dsn) as conn:
            conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))


def _may_reuse(schema: str, comment: str | None, reuse: bool) -> None:
    if not reuse:
        raise HarnessError(
            f"schema {schema} exists already on this server; the harness only works in a "
            "schema it creates (--reuse-schema takes over one an earlier run left behind)"
        )
    if not (comment or "").startswith(SCHEMA_MARK):
        raise HarnessError(
            f"schema {schema} exists and was not created by the harness (no "
            f"'{SCHEMA_MARK}' comment on it); refusing to drop what it holds"
        )


def recreate(conn: psycopg.Connection, schema: str) -> None:
    """The run's schema empty again, for a repetition: dropped with all it holds, and
    created and marked anew. Only ever called on the schema own_schema created."""
    conn.execute(sql.SQL("drop schema {} cascade").format(sql.Identifier(schema)))
    create_marked(conn, schema)


def create_marked(conn: psycopg.Connection, schema: str) -> None:
    name = sql.Identifier(schema)
    conn.execute(sql.SQL("create schema {}").format(name))
    conn.execute(sql.SQL("comment on schema {} is {}").format(name, sql.Literal(SCHEMA_MARK)))


_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
SCHEMA_RULE = (
    "use lowercase letters, digits and _, starting with a letter or _, at most 63 "
    "characters, not pg_..."
)


def is_schema_name(schema: str) -> bool:
    """The one rule for a schema the harness works in, whoever names it (--schema, a
    fleet member's assignment)."""
    return bool(_SCHEMA_NAME.fullmatch(schema)) and not schema.startswith("pg_")


def check_schema_name(schema: str | None, reuse: bool) -> None:
    """--schema and --reuse-schema, refused before anything connects."""
    if reuse and schema is None:
        raise HarnessError("--reuse-schema needs --schema: the schema to take over")
    if schema is None:
        return
    if not is_schema_name(schema):
        raise HarnessError(f"--schema: '{schema}' is not allowed; {SCHEMA_RULE}")
