"""The run's own schema on the server: created and marked by the harness, dropped at the
end; nothing the harness did not create is ever dropped or changed.

The mark is the schema's comment, `created by tenant-queue-bench run <token>`: the token
is the one the run's sessions carry in their application_name (RUN_TOKEN). A schema is
a run's leftover, which --reuse-schema may take over, only with that exact mark, owned by
the role the harness connects as, and with none of that run's sessions connected. A
schema that objects outside it depend on (a user's view on one of its tables), or that
holds an object another role owns (a table another role made in it), is never dropped:
`drop schema ... cascade` would take them too.

A library may insist on a schema of a fixed name beside the run's (awa keeps everything
in `awa`): such an outside schema is the run's too, created and marked by it with each
repetition, dropped with the run's schema; one the harness did not create is refused
before anything runs, with the line that would drop it (the user's to run, or not), and
one a killed run of the harness left is dropped first, unless it holds what another role
owns.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from harness.errors import HarnessError, RunFailed
from harness.server.connections import RUN_TOKEN, connect, session_name
from harness.sqlfiles import SqlBlock, builtin_blocks

MARK = "created by tenant-queue-bench"  # the start of the comment on all the harness creates
_MARKED = re.compile(re.escape(MARK) + r" run (?P<token>[0-9a-f]{16})")
CLEANUP_LOCK_TIMEOUT_S = 5
_NAMED = 3  # dependent objects named in a refusal; the rest are counted


def schema_sql() -> dict[str, SqlBlock]:
    return builtin_blocks("harness.server", "schema.sql")


def mark(token: str = RUN_TOKEN) -> str:
    """The comment on what a run creates: the harness's mark and the run's token."""
    return f"{MARK} run {token}"


def marked_token(comment: str | None) -> str | None:
    """The token of the run that made an object, if its comment is exactly our mark."""
    found = _MARKED.fullmatch(comment or "")
    return found["token"] if found else None


def live_sessions(conn: psycopg.Connection[Any], token: str) -> int:
    """How many sessions of the run with this token are connected (this one aside)."""
    found = conn.execute(
        schema_sql()["run_sessions"].sql, {"application_name": session_name(token)}
    ).fetchone()
    return int(found[0]) if found else 0


class SchemaKept(RunFailed):
    """The run's schema cannot be emptied or dropped without dropping what others built
    on it: the run stops, keeps what it measured, and the schema stays."""

    def __init__(self, schema: str, message: str) -> None:
        super().__init__(message)
        self.schema = schema


@dataclass
class OwnedSchema:
    name: str
    left: str | None = None  # after the end: why it is still on the server, and how to go


@contextmanager
def own_schema(
    dsn: str, schema: str, reuse: bool = False, outside: tuple[str, ...] = ()
) -> Iterator[OwnedSchema]:
    """The run's schema: created, marked as this run's, and dropped at the end, with this
    run's running statements cancelled first if it ends by an exception; `outside`, the
    schemas its queues' libraries insist on by name, dropped with it (`recreate` makes
    them).

    One that exists already is refused, unless `reuse` and it is a leftover of the
    harness's (`_may_reuse`); an outside one, unless a killed run of the harness left it
    (`_take_outside`). What cannot be dropped at the end is left, and `left` says why and
    how to remove it (a note on the exception too, if there is one). A session of this
    run stays connected all along: the server sees the run alive by it."""
    keeper = connect(dsn)
    owned = OwnedSchema(schema)
    try:
        for name in outside:  # refused before the run's schema is made
            _take_outside(keeper, name)
        _take(keeper, schema, reuse)
        try:
            yield owned
        except BaseException as error:
            if not (isinstance(error, SchemaKept) and error.schema == schema):
                owned.left = drop_own_schema(dsn, schema, cancel=True, outside=outside)
                if owned.left is not None:
                    error.add_note(owned.left)
            raise
        owned.left = drop_own_schema(dsn, schema, outside=outside)
    finally:
        keeper.close()


def _take(conn: psycopg.Connection[Any], schema: str, reuse: bool) -> None:
    found = conn.execute(schema_sql()["find_schema"].sql, {"schema": schema}).fetchone()
    if found is not None:
        comment, owner, ours = found
        _may_reuse(conn, schema, comment, owner if not ours else None, reuse)
        kept = kept_by(conn, schema)
        if kept is not None:
            raise HarnessError(
                f"--reuse-schema: schema {schema} is not taken over: {kept}, which "
                f"dropping it would drop too; {_removal(schema)} and them"
            )
        _drop(conn, schema)
    create_marked(conn, schema)


def _take_outside(conn: psycopg.Connection[Any], schema: str) -> None:
    """A schema a library insists on by name must not exist, but for one a killed run of
    the harness left behind (our exact mark, our role, its run gone), dropped here."""
    found = conn.execute(schema_sql()["find_schema"].sql, {"schema": schema}).fetchone()
    if found is None:
        return
    comment, _, ours = found
    token = marked_token(comment)
    if token is None or not ours:
        raise HarnessError(
            f"schema {schema} exists already on this server and the harness did not create "
            f"it: a library of this run keeps its tables in a schema of that fixed name "
            "(docs/real-queues.md); run it on a database without one, or, if nothing in it "
            f"is to be kept, drop it first: `{_drop_line(schema)};`"
        )
    if live_sessions(conn, token):
        raise HarnessError(
            f"schema {schema} is in use by run {token} of the harness, which is still "
            "connected: a library of this run keeps its tables in a schema of that fixed "
            "name, one run at a time per database"
        )
    kept = kept_by(conn, schema)
    if kept is not None:
        raise HarnessError(
            f"schema {schema}, left by run {token} of the harness, is not dropped: "
            f"{kept}; {_removal(schema)} and them"
        )
    _drop(conn, schema)


def _may_reuse(
    conn: psycopg.Connection[Any],
    schema: str,
    comment: str | None,
    other_owner: str | None,
    reuse: bool,
) -> None:
    """Only a leftover of the harness: our exact mark, our role, its run gone."""
    if not reuse:
        raise HarnessError(
            f"schema {schema} exists already on this server; the harness only works in a "
            "schema it creates (--reuse-schema takes over one an earlier run left behind)"
        )
    token = marked_token(comment)
    if token is None:
        raise HarnessError(
            f"--reuse-schema: schema {schema} was not created by the harness (its comment "
            f"is not '{MARK} run <token>'); refusing to drop what it holds"
        )
    if other_owner is not None:
        raise HarnessError(
            f"--reuse-schema: schema {schema} is owned by {other_owner}, not by the role "
            "this run connects as; the harness takes over only a schema of its own role"
        )
    sessions = live_sessions(conn, token)
    if sessions:
        raise HarnessError(
            f"--reuse-schema: schema {schema} is in use: run {token} that created it has "
            f"{sessions} session(s) connected; it is not left behind"
        )


def drop_leftover(dsn: str, schema: str) -> str | None:
    """A schema of the harness's that a run killed outright left behind (our exact mark,
    our role, none of its run's sessions connected), dropped as the cleanup drops one:
    the line that says so, or what stays and why. None for any other schema."""
    with connect(dsn) as conn:
        found = conn.execute(schema_sql()["find_schema"].sql, {"schema": schema}).fetchone()
        if found is None:
            return None
        comment, _, ours = found
        token = marked_token(comment)
        if token is None or not ours or live_sessions(conn, token):
            return None
    left = drop_own_schema(dsn, schema)
    return left or f"dropped schema {schema}, left by run {token} that was killed"


def recreate(conn: psycopg.Connection[Any], schema: str, outside: tuple[str, ...] = ()) -> None:
    """The run's schema empty again, for a repetition: dropped with all it holds, and
    created and marked anew, and with it the schemas its queue's library insists on by
    name (`outside`: dropped if this run made them, created and marked). Only ever called
    on the schema own_schema created; refused (SchemaKept) if objects outside it depend
    on it. The run's schema goes first: its objects may use an outside schema's types."""
    for name in (schema, *outside):
        _drop_unless_depended_on(conn, name, this_run_only=name != schema)
    for name in (schema, *outside):
        create_marked(conn, name)


def _drop_unless_depended_on(
    conn: psycopg.Connection[Any], schema: str, this_run_only: bool = False
) -> None:
    """`this_run_only`: only if it is there and this run's (by its mark), else left."""
    if this_run_only and not _this_runs(conn, schema):
        return
    dependents = kept_by(conn, schema)
    if dependents is not None:
        raise SchemaKept(
            schema,
            f"{_left(schema)}: {dependents}, so no repetition can start from an empty schema "
            f"(the run keeps what it measured); {_removal(schema)} and them",
        )
    _drop(conn, schema)


def _this_runs(conn: psycopg.Connection[Any], schema: str) -> bool:
    found = conn.execute(schema_sql()["find_schema"].sql, {"schema": schema}).fetchone()
    if found is None:
        return False
    comment, _, ours = found
    if marked_token(comment) != RUN_TOKEN or not ours:
        raise SchemaKept(
            schema,
            f"{_left(schema)}: another session created it during this run (it is not "
            "this run's), and the run does not drop what it did not create",
        )
    return True


def create_marked(conn: psycopg.Connection[Any], schema: str) -> None:
    name = sql.Identifier(schema)
    conn.execute(sql.SQL("create schema {}").format(name))
    conn.execute(sql.SQL("comment on schema {} is {}").format(name, sql.Literal(mark())))


def drop_own_schema(
    dsn: str, schema: str, cancel: bool = False, outside: tuple[str, ...] = ()
) -> str | None:
    """The cleanup: the schema dropped, then those of `outside` this run made, waiting at
    most CLEANUP_LOCK_TIMEOUT_S for their locks; None, or the one line that says what was
    left and how to remove it. `cancel`: this run's running statements are cancelled
    first (an interrupt left them running)."""
    try:
        with connect(dsn, connect_timeout=10) as conn:
            if cancel:
                cancel_own_statements(conn)
            for name in (schema, *outside):
                left = _drop_at_end(conn, name, this_run_only=name != schema)
                if left is not None:
                    return left
    except psycopg.Error as error:
        return f"{_left(schema)}: {_first_line(error)}; {_removal(schema)}"
    return None


def _drop_at_end(conn: psycopg.Connection[Any], schema: str, this_run_only: bool) -> str | None:
    try:
        with conn.transaction():
            timeout = {"timeout": f"{CLEANUP_LOCK_TIMEOUT_S}s"}
            conn.execute(schema_sql()["cleanup_lock_timeout"].sql, timeout)
            if this_run_only and not _this_runs(conn, schema):
                return None
            dependents = kept_by(conn, schema)
            if dependents is not None:
                return f"{_left(schema)}: {dependents}; {_removal(schema)} and them"
            _drop(conn, schema, if_exists=True)
    except psycopg.errors.LockNotAvailable:
        why = f"another session held a lock on it for {CLEANUP_LOCK_TIMEOUT_S} s"
        return f"{_left(schema)}: {why}; {_removal(schema)}"
    except SchemaKept as kept:
        return str(kept)
    except psycopg.Error as error:
        return f"{_left(schema)}: {_first_line(error)}; {_removal(schema)}"
    return None


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _left(schema: str) -> str:
    return f"schema {schema} is left on the server"


def _removal(schema: str) -> str:
    return f"{_drop_line(schema)} removes it"


def _drop_line(schema: str) -> str:
    """The statement that drops the schema and all it holds, as a user would type it."""
    name = schema if _SCHEMA_NAME.fullmatch(schema) else '"' + schema.replace('"', '""') + '"'
    return f"drop schema {name} cascade"


def cancel_own_statements(conn: psycopg.Connection[Any]) -> int:
    """Cancels what this run's other sessions are running; how many it cancelled."""
    found = conn.execute(
        schema_sql()["cancel_own_statements"].sql, {"application_name": session_name()}
    ).fetchone()
    return int(found[0]) if found else 0


def kept_by(conn: psycopg.Connection[Any], schema: str) -> str | None:
    """What a drop of the schema would take that is not the harness's, as a phrase:
    objects outside it that depend on it, or objects in it that another role owns."""
    return depended_on(conn, schema) or foreign_owned(conn, schema)


def foreign_owned(conn: psycopg.Connection[Any], schema: str) -> str | None:
    """Which objects in the schema another role owns, as a phrase; None if none does."""
    found = [row[0] for row in conn.execute(schema_sql()["foreign_owned"].sql, {"schema": schema})]
    return _counted(found, "object in it is another role's", "objects in it are other roles'")


def depended_on(conn: psycopg.Connection[Any], schema: str) -> str | None:
    """Which objects outside the schema depend on it, as a phrase; None if none do."""
    found = conn.execute(schema_sql()["outside_dependents"].sql, {"schema": schema})
    dependents = [row[0] for row in found]
    return _counted(
        dependents, "object outside it depends on it", "objects outside it depend on it"
    )


def _counted(names: list[str], one: str, many: str) -> str | None:
    """`names` counted and named (the first _NAMED of them) after `one` or `many`, the
    phrase for one object or several; None if there are none."""
    if not names:
        return None
    named = ", ".join(names[:_NAMED])
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return f"1 {one} ({named})" if len(names) == 1 else f"{len(names)} {many} ({named}{more})"


def _drop(conn: psycopg.Connection[Any], schema: str, if_exists: bool = False) -> None:
    drop = "drop schema if exists {} cascade" if if_exists else "drop schema {} cascade"
    conn.execute(sql.SQL(drop).format(sql.Identifier(schema)))


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
