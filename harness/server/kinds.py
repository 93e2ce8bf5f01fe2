"""What a provider is asked for and what it hands back: a running server and its DSN."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from harness.server.builds import DEFAULT_MAJOR, Install

ProviderKind = Literal["embedded", "container", "external"]


def container_image(major: int) -> str:
    """The image the container provider runs for a major, unless --image names one."""
    return f"postgres:{major}"


@dataclass(frozen=True)
class ServerOptions:
    """The server options as a user gives them, on every command that starts a server:
    --pg, --dsn, --image, --pg-version, --pg-bin, --allow-version-mismatch, --listen.
    `choose_provider` (harness/server/providers.py) turns them into a ProviderChoice."""

    pg: str | None = None
    dsn: str | None = None
    image: str | None = None
    pg_version: str | None = None  # one or several majors, comma-separated
    pg_bin: tuple[Path, ...] = ()  # bin folders of the user's own builds
    allow_version_mismatch: bool = False
    listen: str | None = None


@dataclass(frozen=True)
class Target:
    """One server to start: its major, and the build (embedded) or image (container)."""

    major: int = DEFAULT_MAJOR
    install: Install | None = None
    image: str = ""


@dataclass(frozen=True)
class ProviderChoice:
    """Which provider starts which servers: one target per major, started in turn."""

    kind: ProviderKind
    dsn: str = ""
    allow_version_mismatch: bool = False
    listen: tuple[str, int] | None = None  # embedded: also TCP on loopback (port 0: free)
    targets: tuple[Target, ...] = (Target(),)
    # embedded: pg_stat_statements loaded (track = all) and created in the database, for
    # a scenario that counts an idle queue's fetches (its `idle` window); else the
    # server's defaults, as the article's
    statement_stats: bool = False

    @property
    def majors(self) -> tuple[int, ...]:
        return tuple(target.major for target in self.targets)

    @property
    def target(self) -> Target:
        """The one target of a choice for one server."""
        if len(self.targets) != 1:
            raise ValueError(f"a choice of {len(self.targets)} servers starts them in turn")
        return self.targets[0]

    @property
    def starting(self) -> str:
        """What the console says as the one server of the choice starts."""
        return f"Starting PostgreSQL {self.target.major} ({self.kind})..."

    def each(self) -> list[ProviderChoice]:
        """A choice per server, in the order asked."""
        return [replace(self, targets=(target,)) for target in self.targets]


@dataclass(frozen=True)
class Server:
    """A running PostgreSQL: how to connect, and what to record about it."""

    dsn: str
    provider: ProviderKind
    details: dict[str, str] = field(default_factory=dict)
    # Stops and starts the server again (a server the harness started: embedded or
    # container): faults.server_restart.
    restart: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    # Crashes it (immediate shutdown), and starts it again the given seconds after, on
    # its crash recovery (embedded or container): faults.server_crash. It returns what
    # the server's log says of the recovery (processes.crash_recovery).
    crash: Callable[[float], list[str]] | None = field(default=None, compare=False, repr=False)
