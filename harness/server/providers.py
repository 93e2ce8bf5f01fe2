"""PostgreSQL providers: embedded, container or external, each handing back a DSN.

`open_server(choice)` is the one place a provider is chosen. Every provider is a context
manager that always stops what it started: on success, on error, on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import get_args

from harness.errors import HarnessError
from harness.server.connections import connect
from harness.server.kinds import PG_MAJOR, ProviderChoice, ProviderKind, Server

_PG_ENV = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")


def choose_provider(
    pg: str | None, dsn: str | None, env: Mapping[str, str], allow_mismatch: bool
) -> ProviderChoice:
    """--pg and --dsn (or the PG* variables) -> which provider to start."""
    if pg is None:
        pg = "external" if dsn else "embedded"
    if pg not in get_args(ProviderKind):
        raise HarnessError(
            f"--pg: unknown provider '{pg}'; allowed: " + ", ".join(get_args(ProviderKind))
        )
    if pg != "external" and dsn:
        raise HarnessError(f"--dsn goes with --pg external, not --pg {pg}")
    if pg == "external" and not dsn and not any(env.get(name) for name in _PG_ENV):
        raise HarnessError("--pg external needs --dsn URL or the PG* variables (PGHOST, ...)")
    return ProviderChoice(kind=pg, dsn=dsn or "", allow_version_mismatch=allow_mismatch)  # type: ignore[arg-type]


@contextlib.contextmanager
def open_server(choice: ProviderChoice) -> Iterator[Server]:
    with _starter(choice.kind)(choice) as server:
        check_server_version(server.dsn, choice.allow_version_mismatch)
        yield server


def check_server_version(dsn: str, allow_mismatch: bool) -> int:
    with connect(dsn, connect_timeout=10) as conn:
        version = conn.info.server_version
    if version // 10000 != PG_MAJOR and not allow_mismatch:
        raise HarnessError(
            f"the server is PostgreSQL {version // 10000}, the harness measures "
            f"PostgreSQL {PG_MAJOR}; pass --allow-version-mismatch to run anyway"
        )
    return version


def _starter(
    kind: ProviderKind,
) -> Callable[[ProviderChoice], contextlib.AbstractContextManager[Server]]:
    """Each provider's module is imported only when chosen: the embedded one needs the
    POSIX user database and the wheel, the container one the Docker SDK."""
    if kind == "embedded":
        from harness.server.embedded import start_embedded

        return start_embedded
    if kind == "container":
        from harness.server.container import start_container

        return start_container
    from harness.server.external import start_external

    return start_external
