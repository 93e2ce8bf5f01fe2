"""Every connection the harness opens, made one way: autocommit unless asked otherwise,
in the run's schema and on UTC where asked, the DSN's own `options` kept, and text in
UTF-8 whatever the server's encoding.

The server converts a database's encoding to UTF-8. A SQL_ASCII database knows no
encoding and converts nothing: its bytes arrive as they are, which psycopg would hand back
as bytes (and run.json could not be written); the harness's own text is ASCII, which
UTF-8 reads the same.
"""

from __future__ import annotations

from typing import Any

import psycopg


def connect(
    dsn: str,
    *,
    schema: str | None = None,
    utc: bool = False,
    autocommit: bool = True,
    **kwargs: Any,
) -> psycopg.Connection[Any]:
    """A connection to `dsn`; `schema` sets its search_path, `utc` its TimeZone."""
    options = _options(dsn, schema, utc)
    if options:
        kwargs["options"] = options
    return psycopg.connect(dsn, autocommit=autocommit, client_encoding="UTF8", **kwargs)


def _options(dsn: str, schema: str | None, utc: bool) -> str:
    own = str(psycopg.conninfo.conninfo_to_dict(dsn).get("options") or "") if dsn else ""
    parts = [own] if own else []
    if utc:
        parts.append("-c TimeZone=UTC")
    if schema is not None:
        parts.append(f"-c search_path={schema}")
    return " ".join(parts)
