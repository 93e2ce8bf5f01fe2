"""The external provider: a server of the user's own, reached by --dsn or the PG* variables."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg

from harness.errors import ProviderUnavailable
from harness.server.connections import connect
from harness.server.dsn import redact
from harness.server.kinds import ProviderChoice, Server


@contextlib.contextmanager
def start_external(choice: ProviderChoice) -> Iterator[Server]:
    try:
        with connect(choice.dsn, connect_timeout=10):
            pass
    except psycopg.OperationalError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else "no answer"
        raise ProviderUnavailable(f"cannot connect to the external server: {reason}") from error
    yield Server(dsn=choice.dsn, provider="external", details={"dsn": redact(choice.dsn)})
