"""PostgreSQL providers: embedded, container or external, each handing back a DSN.

`choose_provider(options)` turns the server options into a choice, for every command;
`open_server(choice)` is the one place a provider is started. Every provider is a context
manager that always stops what it started: on success, on error, on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import get_args

from harness.errors import HarnessError, ProviderUnavailable
from harness.server.builds import DEFAULT_MAJOR, MAJORS, Install, locate, own_build
from harness.server.connections import connect
from harness.server.dsn import check_dsn
from harness.server.kinds import (
    ProviderChoice,
    ProviderKind,
    Server,
    ServerOptions,
    Target,
    container_image,
)

_PG_ENV = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")


def choose_provider(options: ServerOptions, env: Mapping[str, str]) -> ProviderChoice:
    """The server options (or the PG* variables) -> which provider starts which servers.
    Everything a user can get wrong is refused here, for every command, before anything
    starts: a malformed --dsn, an unknown provider, options of another provider, a major
    not installed (one line saying how to get it)."""
    if options.dsn:
        check_dsn(options.dsn)
    kind = _kind(options, env)
    address = loopback(options.listen) if options.listen is not None else None
    if address is not None and kind != "embedded":
        raise HarnessError(f"--listen is for the embedded server, not --pg {kind}")
    return ProviderChoice(
        kind=kind,
        dsn=options.dsn or "",
        allow_version_mismatch=options.allow_version_mismatch,
        listen=address,
        targets=_targets(kind, options),
    )


def _kind(options: ServerOptions, env: Mapping[str, str]) -> ProviderKind:
    pg, dsn, image = options.pg, options.dsn, options.image
    if pg is None:
        pg = "external" if dsn else "container" if image else "embedded"
    if pg not in get_args(ProviderKind):
        raise HarnessError(
            f"--pg: unknown provider '{pg}'; allowed: " + ", ".join(get_args(ProviderKind))
        )
    for option, given, home in (
        ("--dsn", dsn, "external"),
        ("--image", image, "container"),
        ("--pg-bin", options.pg_bin, "embedded"),
    ):
        if given and pg != home:
            raise HarnessError(f"{option} goes with --pg {home}, not --pg {pg}")
    if pg == "external" and not dsn and not any(env.get(name) for name in _PG_ENV):
        raise HarnessError("--pg external needs --dsn URL or the PG* variables (PGHOST, ...)")
    return pg  # type: ignore[return-value]  # checked against ProviderKind above


def _targets(kind: ProviderKind, options: ServerOptions) -> tuple[Target, ...]:
    """One server per major asked: the build of each (embedded), its image (container)."""
    if kind == "embedded":
        return _embedded_targets(options)
    majors = parse_majors(options.pg_version, {})
    if kind == "external" and len(majors) > 1:
        raise HarnessError(
            "--pg-version: --pg external is one server of one major; give the one it runs"
        )
    if kind == "external":
        return (Target(majors[0]),)
    if options.image and len(majors) > 1:
        raise HarnessError(
            "--image names one image; with several --pg-version majors, leave it out "
            "(postgres:<major> each)"
        )
    return tuple(Target(m, image=options.image or container_image(m)) for m in majors)


def _embedded_targets(options: ServerOptions) -> tuple[Target, ...]:
    """Each major's build: the user's own (--pg-bin), else the table's. Every major is
    checked before the first build is looked for (14's is installed on first use)."""
    _refuse_unsupported()
    own = _own_builds(options.pg_bin)
    majors = parse_majors(options.pg_version, own)
    unknown = [major for major in majors if major not in own and major not in MAJORS]
    if unknown:
        raise HarnessError(_unknown_major(str(unknown[0]), own))
    return tuple(Target(m, install=own.get(m) or locate(m)) for m in majors)


def _refuse_unsupported() -> None:
    from harness.server.embedded import unsupported

    refusal = unsupported(os.name, platform.system())
    if refusal:
        raise ProviderUnavailable(refusal)


def _own_builds(folders: tuple[Path, ...]) -> dict[int, Install]:
    """--pg-bin DIR (repeatable): each build by the major its postgres prints."""
    own: dict[int, Install] = {}
    for folder in folders:
        install = own_build(folder)
        if install.major in own:
            raise HarnessError(
                f"--pg-bin: {own[install.major].bin} and {folder} are both PostgreSQL "
                f"{install.major}; give one build per major"
            )
        own[install.major] = install
    return own


def parse_majors(text: str | None, own: Mapping[int, Install]) -> tuple[int, ...]:
    """--pg-version 15,16,17,18 -> (15, 16, 17, 18); without it, the --pg-bin builds' majors,
    else the default (the article's 17)."""
    if text is None:
        return tuple(own) or (DEFAULT_MAJOR,)
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and 10 <= int(part) <= 99 for part in parts):
        raise HarnessError(_unknown_major(text, own))
    majors = tuple(int(part) for part in parts)
    if len(set(majors)) != len(majors):
        raise HarnessError(f"--pg-version: '{text}' names a major twice")
    for major, install in own.items():
        if major not in majors:
            raise HarnessError(
                f"--pg-bin: {install.bin} is PostgreSQL {major}, which --pg-version "
                f"'{text}' does not name"
            )
    return majors


def _unknown_major(text: str, own: Mapping[int, Install]) -> str:
    known = sorted({*MAJORS, *own})
    return (
        f"--pg-version: '{text}' is not allowed; give one major or several, comma-separated, "
        f"of {', '.join(map(str, known))} (e.g. 15,16,17,18), or your own build of another "
        "with --pg-bin DIR"
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
    """The one server of `choice` (ProviderChoice.each() gives one per major), checked to
    be the major asked for."""
    with _starter(choice.kind)(choice) as server:
        check_server_version(server.dsn, choice.target.major, choice.allow_version_mismatch)
        yield server


def server_major(dsn: str) -> int:
    with connect(dsn, connect_timeout=10) as conn:
        return conn.info.server_version // 10000


def check_server_version(dsn: str, major: int, allow_mismatch: bool) -> int:
    with connect(dsn, connect_timeout=10) as conn:
        version = conn.info.server_version
    if version // 10000 != major and not allow_mismatch:
        raise HarnessError(
            f"the server is PostgreSQL {version // 10000}, not the PostgreSQL {major} asked "
            f"for (--pg-version, default {DEFAULT_MAJOR}); give --pg-version "
            f"{version // 10000}, or pass --allow-version-mismatch to run anyway"
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
