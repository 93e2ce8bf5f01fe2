"""Every connection the harness opens, made one way: autocommit unless asked otherwise,
in the run's schema and on UTC where asked, the DSN's own `options` kept, text in UTF-8
whatever the server's encoding, and named for the harness process that opened it.

The server converts a database's encoding to UTF-8. A SQL_ASCII database knows no
encoding and converts nothing: its bytes arrive as they are, which psycopg would hand back
as bytes (and run.json could not be written); the harness's own text is ASCII, which
UTF-8 reads the same.

Each session's application_name is `tenant-queue-bench <token>`, the token drawn once per
process (RUN_TOKEN): the server then tells this run's sessions from every other's, which
is how the harness cancels its own statements before it cleans up (and only its own),
and how a later run tells a schema left behind from one a live run is working in.
"""

from __future__ import annotations

import contextlib
import secrets
from types import TracebackType
from typing import Any

import psycopg
from psycopg import pq

APPLICATION = "tenant-queue-bench"
RUN_TOKEN = secrets.token_hex(8)  # this process's: names its sessions, marks what it creates
_CANCEL_TIMEOUT_S = 5.0


def session_name(token: str = RUN_TOKEN) -> str:
    """The application_name of a run's sessions."""
    return f"{APPLICATION} {token}"


def worker_session_name(token: str = RUN_TOKEN) -> str:
    """The application_name of a library's worker processes' sessions (the adapter
    contract's `worker` role): the run's, marked as its queue workers', so that
    faults.backend_kills terminates theirs and no other session."""
    return f"{session_name(token)} worker"


class Connection(psycopg.Connection[Any]):
    """psycopg's connection, which cancels its statement on Ctrl-C only: one left by any
    other exception (SIGTERM's Terminated, an error) would run on in the server after
    the connection is closed, holding its locks against the cleanup."""

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if error is not None and self.pgconn.transaction_status == pq.TransactionStatus.ACTIVE:
            with contextlib.suppress(psycopg.Error):
                self.cancel_safe(timeout=_CANCEL_TIMEOUT_S)
            self.close()  # the rollback psycopg tries next cannot run beside the statement
        super().__exit__(kind, error, trace)


def connect(
    dsn: str,
    *,
    schema: str | None = None,
    utc: bool = False,
    autocommit: bool = True,
    **kwargs: Any,
) -> Connection:
    """A connection to `dsn`; `schema` sets its search_path, `utc` its TimeZone."""
    options = _options(dsn, schema, utc)
    if options:
        kwargs["options"] = options
    kwargs.setdefault("application_name", session_name())
    return Connection.connect(dsn, autocommit=autocommit, client_encoding="UTF8", **kwargs)


def _options(dsn: str, schema: str | None, utc: bool) -> str:
    own = str(psycopg.conninfo.conninfo_to_dict(dsn).get("options") or "") if dsn else ""
    parts = [own] if own else []
    if utc:
        parts.append("-c TimeZone=UTC")
    if schema is not None:
        parts.append(f"-c search_path={schema}")
    return " ".join(parts)
