"""What a provider is asked for and what it hands back: a running server and its DSN."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

ProviderKind = Literal["embedded", "container", "external"]
PG_MAJOR = 17
UNPRIVILEGED_USER = "nobody"
CONTAINER_IMAGE = "postgres:17"


@dataclass(frozen=True)
class ProviderChoice:
    kind: ProviderKind
    dsn: str = ""
    allow_version_mismatch: bool = False
    listen: tuple[str, int] | None = None  # embedded: also TCP on loopback (port 0: free)
    image: str = CONTAINER_IMAGE  # the container provider's


@dataclass(frozen=True)
class Server:
    """A running PostgreSQL: how to connect, and what to record about it."""

    dsn: str
    provider: ProviderKind
    details: dict[str, str] = field(default_factory=dict)
    # Stops and starts the server again (embedded only): a fault scenario's restart.
    restart: Callable[[], None] | None = field(default=None, compare=False, repr=False)
