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
from harness.server.dsn import check_dsn
from harness.server.kinds import CONTAINER_IMAGE, PG_MAJOR, ProviderChoice, ProviderKind, Server

_PG_ENV = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")


def choose_provider(
    pg: str | None,
    dsn: str | None,
    env: Mapping[str, str],
    allow_mismatch: bool,
    listen: str | None = None,
    image: str | None = None,
) -> ProviderChoice:
    """--pg, --dsn (or the PG* variables), --listen and --image -> which provider to start.
    A malformed --dsn is refused here, for every command, before anything connects."""
    if dsn:
        check_dsn(dsn)
    if pg is None:
        pg = "external" if dsn else "container" if image else "embedded"
    if pg not in get_args(ProviderKind):
        raise HarnessError(
            f"--pg: unknown provider '{pg}'; allowed: " + ", ".join(get_args(ProviderKind))
        )
    if pg != "external" and dsn:
        raise HarnessError(f"--dsn goes with --pg external, not --pg {pg}")
    if pg != "container" and image:
        raise HarnessError(f"--image goes with --pg container, not --pg {pg}")
    if pg == "external" and not dsn and not any(env.get(name) for name in _PG_ENV):
        raise HarnessError("--pg external needs --dsn URL or the PG* variables (PGHOST, ...)")
    address = loopback(listen) if listen is not None else None
    if address is not None and pg != "embedded":
        raise HarnessError(f"--listen is for the embedded server, not --pg {pg}")
    return ProviderChoice(
        kind=pg,  # type: ignore[arg-type]  # checked against ProviderKind above
        dsn=dsn or "",
        allow_version_mismatch=allow_mismatch,
        listen=address,
        image=image or CONTAINER_IMAGE,
    )


_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def loopback(listen: str) -> tuple[str, int]:
    """--listen HOST[:PORT]: a loopback address only. TCP takes the superuser's random
    password (harness/server/embedded.py), but the server is a superuser's playground
    meant for this host's fleet members, not a service for other hosts."""
    host, _, port = listen.rpartition(":") if ":" in listen.strip("[]") else (listen, "", "0")
    host = host.strip("[]") or listen
    if host not in _LOOPBACK or not port.isdigit() or int(port) > 65535:
        raise HarnessError(
            f"--listen: '{listen}' is not allowed; give a loopback address and an optional "
            "port (127.0.0.1, 127.0.0.1:0 for a free port, [::1]:5433); for other hosts "
            "use a server of your own with --dsn"
        )
    return host, int(port)


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
