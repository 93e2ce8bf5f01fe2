"""The harness's own programs by name: the one door through which a row of a fleet's
tables becomes a process on a fleet member (harness/queues/wire.py).

Each queue module registers its programs where it defines them (`register`): a name,
the entry point, its spec's type, and how the spec travels. `send` gives the spec as
data without what a member has of its own: no DSN (the member connects with its own),
no SQL (it takes the strategy's from its own install and checks its SHA-256), no file
path. `receive` validates that data field by field (pydantic, from the spec's or its
wire type's annotations) and rebuilds the spec with the member's own (`Local`). A name
that is not registered is refused: nothing is imported or looked up by a name that
comes from a row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, Field

from harness.errors import HarnessError
from harness.queues.base import Signals
from harness.scenario.model import MAX_TENANT_CAP, MAX_WORKERS
from harness.server.schema import SCHEMA_RULE, is_schema_name

if TYPE_CHECKING:
    from harness.queues.contract.manifest import Adapter
    from harness.queues.sql.strategies import Strategy

S = TypeVar("S")
Wire = dict[str, Any]  # a spec as it travels: JSON data


class Refused(HarnessError):
    """A fleet assignment this member will not run: one line, exit 2."""


def _schema_name(name: str) -> str:
    if not is_schema_name(name):
        raise ValueError(f"'{name[:70]}' is not a schema the harness works in; {SCHEMA_RULE}")
    return name


# What a spec's fields are allowed to be when they arrive from a row.
SchemaName = Annotated[str, AfterValidator(_schema_name)]
Concurrency = Annotated[int, Field(ge=1, le=MAX_WORKERS)]
TenantCap = Annotated[int, Field(ge=1, le=MAX_TENANT_CAP)]
TenantId = Annotated[int, Field(ge=0, le=2**31 - 1)]  # in the names of queues, entrypoints
TenantWeight = Annotated[int, Field(ge=1, le=1000)]  # a tenant group's weight:
PollInterval = Annotated[float, Field(gt=0, le=10)]  # seconds (a scenario's: at most 10)
ProcessName = Annotated[str, Field(pattern=r"^[a-z0-9_-]{0,64}$")]


@dataclass(frozen=True)
class Local:
    """What a fleet member brings of its own to every program it is assigned: its way to
    the server, the SQL strategies of its install (its own --strategies-dir too), and its
    declared adapters (its own --adapters-dir too)."""

    dsn: str
    strategies: Mapping[str, Strategy]
    adapters: Mapping[str, Adapter] = field(default_factory=dict)

    def strategy(self, name: str, sql_sha256: str) -> Strategy:
        """The strategy of that name here, if its SQL is the coordinator's; refused
        otherwise."""
        found = self.strategies.get(name)
        if found is None:
            raise Refused(
                f"strategy '{name[:70]}' is not in this member's install; a strategy of "
                "the coordinator's --strategies-dir needs the same file here (harness "
                "worker --strategies-dir DIR)"
            )
        if found.sql_sha256 != sql_sha256:
            raise Refused(
                f"strategy '{name}': this member's install differs from the coordinator's "
                f"(its SQL's sha256 is {found.sql_sha256[:12]}... here, "
                f"{sql_sha256[:12]}... there); run the same harness version and "
                "--strategies-dir on every host"
            )
        return found


@dataclass(frozen=True)
class Registered(Generic[S]):
    """One program a fleet member may run: `main(index, spec, signals)` with a spec of
    type `spec`, sent as data by `send` and rebuilt (validated) by `receive`."""

    name: str
    role: Literal["worker", "enqueuer"]
    main: Callable[[int, S, Signals], None]
    spec: type[S]
    send: Callable[[S], Wire]
    receive: Callable[[Wire, Local], S]


_PROGRAMS: dict[str, Registered[Any]] = {}


def register(program: Registered[Any]) -> None:
    """Called by the module that defines the program, as it is imported."""
    known = _PROGRAMS.setdefault(program.name, program)
    if known.main is not program.main:
        raise ValueError(f"program {program.name} is registered twice")


def registered(name: str) -> Registered[Any]:
    """The program of that name; refused if the harness has none."""
    found = _PROGRAMS.get(name)
    if found is None:
        raise Refused(
            f"'{name[:70]}' is not a program of the harness; a member runs only "
            f"{', '.join(sorted(_PROGRAMS))}"
        )
    return found


def registration_of(main: Callable[..., None]) -> Registered[Any]:
    """The registered program whose entry point is `main`: what the coordinator sends."""
    for program in _PROGRAMS.values():
        if program.main is main:
            return program
    raise ValueError(f"{main.__module__}.{main.__qualname__} is no registered program")
