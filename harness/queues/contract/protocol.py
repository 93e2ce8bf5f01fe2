"""The adapter contract's messages, protocol 2 (docs/adapters.md): the config the harness
writes as an adapter's first line on stdin, the commands after it, and the events the
adapter writes on stdout, one JSON object a line. Protocol 2 adds optional fields to
protocol 1 (a job's moments and claim time, a record's, a refusal, a fetch of its own),
and an optional event (`started`, a run of its task beginning), so an adapter of
protocol 1 is read as it always was.

An adapter is untrusted input: every line it writes is validated here, where it enters,
against the model of its event (unknown events and fields refused, numbers bounded,
timestamps with their UTC offset). A line that is not one of these is a protocol error
naming the line, never taken for something else.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from harness.errors import RunFailed
from harness.queues.contract.manifest import PROTOCOL, Fetch, OptionValue
from harness.queues.programs import TenantId

MAX_LINE_BYTES = 8 * 1024 * 1024  # a plan notice of a large plan stays well below
MAX_JOB = 2**53  # JSON numbers every language reads exactly
Role = Literal["install", "versions", "worker", "enqueuer", "ledger"]
MAX_CLAIM_MS = 86_400_000.0
Job = tuple[int, int, float]  # the harness's number, the tenant, the duration in ms


class ProtocolError(RunFailed):
    """An adapter wrote something that is not its protocol: the line and what is wrong
    (and the field at fault, where one is). The run cannot be trusted: one line, exit 1."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class AdapterFailed(RunFailed):
    """An adapter said it failed (its `error` event): one line, exit 1."""


class AdapterExited(AdapterFailed):
    """An adapter's process ended without saying why on its stdout."""


# -- what the harness sends ---------------------------------------------------------


class Connection(BaseModel):
    """How to reach the server, in libpq's names: every language's driver takes these."""

    model_config = ConfigDict(extra="forbid")

    host: str | None = None  # a host name, an address, or a unix socket's directory
    port: int | None = None
    user: str | None = None
    password: str | None = None  # the one libpq would send (DSN, PGPASSWORD, passfile)
    dbname: str | None = None
    sslmode: str | None = None
    options: str | None = None  # libpq's `options` (-c name=value ...), as the DSN has it
    application_name: str | None = None  # the run's: how the harness tells its sessions


class Config(BaseModel):
    """The first line on an adapter's stdin: all it is given, password included (never on
    its command line, which every local user can read)."""

    model_config = ConfigDict(extra="forbid")

    protocol: Literal[1, 2] = PROTOCOL  # the adapter's, as its manifest says
    role: Role
    adapter: str
    mapping: str
    options: dict[str, OptionValue]  # the mapping's, from the manifest
    schema_: str = Field(alias="schema")  # the run's own schema: every object goes there
    connection: Connection
    concurrency: int
    poll_interval_ms: float
    cap: int  # the scenario's tenant_cap: a mapping that caps a tenant's running jobs
    tenants: list[int]  # every tenant a worker must name (a queue or an entrypoint each)
    weights: list[int] = Field(default_factory=list)  # each tenant's weight, as `tenants`
    timeout_s: float = 60.0  # the scenario's bound on a repetition
    processes: int = 1  # how many worker processes share the repetition's workers
    # this worker process's number (from 0, as faults.worker_kills numbers them): the
    # same each time its supervisor starts it again
    process: int = 0
    hold: bool = False  # a plan capture: each job holds its slot until the stop
    explain_options: str | None = None  # a plan capture: libpq options for every connection

    def line(self) -> str:
        return self.model_dump_json(by_alias=True) + "\n"


def command(cmd: Literal["start", "stop"]) -> str:
    return json.dumps({"cmd": cmd}) + "\n"


def enqueue_command(jobs: list[Job]) -> str:
    return json.dumps({"cmd": "enqueue", "jobs": jobs}) + "\n"


# -- what an adapter sends ----------------------------------------------------------


def _moment(value: Any) -> Any:
    """PostgreSQL's text form of a timestamptz (`2026-12-01 10:00:00.123456+00`) or RFC
    3339; a moment without its offset is refused (whose clock would it be?)."""
    if not isinstance(value, str) or len(value) > 40:
        raise ValueError("a timestamp is a string: ISO 8601 with its UTC offset")
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError(f"'{value}' has no UTC offset")
    return moment


Moment = Annotated[datetime, BeforeValidator(_moment)]
JobNumber = Annotated[int, Field(ge=1, le=MAX_JOB)]
LibraryId = Annotated[str, Field(min_length=1, max_length=200)]
Message = Annotated[str, Field(max_length=4000)]
Count = Annotated[int, Field(ge=0, le=MAX_JOB)]


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Ready(_Event):
    event: Literal["ready"]


class Installed(_Event):
    event: Literal["installed"]


class Versions(_Event):
    """Its versions (the library's, the runtime's, the driver's) and the settings it
    actually used, with where it could not do as the scenario asks; `fetch`, where its
    fetch among a capture's plans is told otherwise for this config than its manifest
    says (DBOS sweeps the partitions only at a cap of 1)."""

    event: Literal["versions"]
    versions: Annotated[dict[Annotated[str, Field(max_length=60)], Message], Field(max_length=30)]
    settings: Annotated[dict[Annotated[str, Field(max_length=60)], Any], Field(max_length=50)]
    unlike_the_scenario: Annotated[list[Message], Field(max_length=20)] = Field(
        default_factory=list
    )
    fetch: Fetch | None = None


class Refused(_Event):
    """The install role: its mapping cannot run on this server as configured, and why."""

    event: Literal["refused"]
    reason: Message


class Enqueued(_Event):
    event: Literal["enqueued"]
    count: Count


class JobStarted(_Event):
    """A run of its task begins (the library has handed it the job): its number and
    tenant from its payload, and the library's id for it. Optional: an adapter that
    says it lets a worker kill name the jobs the worker held (started, no `job` or
    `requeued` since), and the time until each is started again."""

    event: Literal["started"]
    job: JobNumber
    tenant: TenantId
    id: LibraryId


class JobDone(_Event):
    """One run of its task, done: the job's number and tenant from its payload, the
    library's id for it, and its three moments on the server's clock, where the task
    reads them (a library that keeps them in its tables gives them in its ledger's
    records instead); `claim_ms`, its library's fetch that brought it, timed where it
    ran."""

    event: Literal["job"]
    job: JobNumber
    tenant: TenantId
    id: LibraryId
    enqueued_at: Moment | None = None
    started_at: Moment | None = None
    finished_at: Moment | None = None
    claim_ms: Annotated[float, Field(ge=0, le=MAX_CLAIM_MS)] | None = None


class Requeued(_Event):
    """A run of its task that put the job back without doing its work (a per-tenant cap
    taken, as the library's own pattern does): no run of the job."""

    event: Literal["requeued"]
    job: JobNumber
    tenant: TenantId
    id: LibraryId


class Plan(_Event):
    """A plan capture: one auto_explain notice, as its connection received it."""

    event: Literal["plan"]
    message: Annotated[str, Field(max_length=MAX_LINE_BYTES)]


class Record(_Event):
    """The ledger role: one job as the library's own tables still hold it; its number
    and tenant where its payload is still there (pgqueuer deletes a finished job's), its
    start and finish where the tables keep them."""

    event: Literal["record"]
    id: LibraryId
    job: JobNumber | None = None
    tenant: TenantId | None = None
    state: Literal["done", "waiting", "running", "failed"]
    enqueued_at: Moment
    started_at: Moment | None = None
    finished_at: Moment | None = None


class Recorded(_Event):
    event: Literal["recorded"]
    count: Count


class Stopped(_Event):
    event: Literal["stopped"]


class Error(_Event):
    event: Literal["error"]
    message: Message


Event = Annotated[
    Ready
    | Installed
    | Versions
    | Enqueued
    | JobStarted
    | JobDone
    | Requeued
    | Plan
    | Record
    | Recorded
    | Refused
    | Stopped
    | Error,
    Field(discriminator="event"),
]
EVENTS = TypeAdapter(Event)
EVENT_NAMES = (
    "ready",
    "installed",
    "versions",
    "enqueued",
    "started",
    "job",
    "requeued",
    "plan",
    "record",
    "recorded",
    "refused",
    "stopped",
    "error",
)


def parse_event(line: bytes, number: int, adapter: str) -> Event:
    """One line of an adapter's stdout as its event, or a ProtocolError naming the line
    (its start only: an adapter's junk is not echoed whole)."""
    shown = line[:80].decode("utf-8", "replace").rstrip("\n")
    where = f"adapter {adapter}: protocol: stdout line {number}"
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(f"{where} is longer than {MAX_LINE_BYTES} bytes")
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError(f"{where} is not a JSON object: {shown!r}") from None
    if not isinstance(data, dict) or data.get("event") not in EVENT_NAMES:
        raise ProtocolError(f"{where} is no event of protocol {PROTOCOL}: {shown!r}")
    try:
        return EVENTS.validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"][1:]) or "event"
        message = "not a field of it" if first["type"] == "extra_forbidden" else first["msg"]
        raise ProtocolError(f"{where} ({data['event']}): {field}: {message}", field) from None
