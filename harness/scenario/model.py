"""The scenario model: pydantic models of every field, and the checks across fields.

The scenario is the single source of truth for a run: the tenant mix, job durations,
worker counts, strategies and repetitions, and the article's figures it reproduces.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from harness.scenario.distributions import MAX_DURATION_MS, Duration
from harness.scenario.thresholds import EVERY_TENANT, Threshold, parse_threshold

MAX_TOTAL_JOBS = 5_000_000
MAX_BACKLOG_JOBS = 10_000_000
# Tenants registered at once: backlog and tenant groups, or an explain variant's backlog
# with the tenant groups. The largest shipped scenarios have 10,000 (planet-scale, and
# skewed-backlog's idle-9989 variant); each tenant costs the harness a few hundred bytes
# in every map it builds before any SQL runs.
MAX_TENANTS = 100_000
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
WaitMetric = Literal["wait_p50_s", "wait_p95_s", "wait_p99_s", "wait_max_s", "makespan_s"]
PlanMetric = Literal["plan_total_ms", "plan_execution_ms", "plan_shared_buffers"]
Check = Literal["never_stranded", "weighted_share", "tenant_cap", "priority_order"]
MAX_WORKERS = 256  # of a repetition: its processes, or a library's concurrency
WorkerCount = Annotated[int, Field(ge=1, le=MAX_WORKERS)]
MAX_TENANT_CAP = 10_000
MAX_KEYS = 1000  # tenant keys one tenant of a group enqueues under


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Constant(Model):
    distribution: Literal["constant"]
    ms: float = Field(ge=0, le=MAX_DURATION_MS)

    def spec(self) -> Duration:
        return Duration("constant", self.ms)


class Uniform(Model):
    distribution: Literal["uniform"]
    low_ms: float = Field(ge=0, le=MAX_DURATION_MS)
    high_ms: float = Field(ge=0, le=MAX_DURATION_MS)

    def spec(self) -> Duration:
        return Duration("uniform", self.low_ms, self.high_ms)

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.high_ms < self.low_ms:
            raise ValueError(f"high_ms {self.high_ms:g} is below low_ms {self.low_ms:g}")
        return self


class Exponential(Model):
    distribution: Literal["exponential"]
    mean_ms: float = Field(gt=0, le=MAX_DURATION_MS)

    def spec(self) -> Duration:
        return Duration("exponential", self.mean_ms)


class LogNormal(Model):
    """Median `median_ms`; `sigma` is the spread of the log (1.0: a tenth of jobs take over
    3.6 times the median)."""

    distribution: Literal["lognormal"]
    median_ms: float = Field(gt=0, le=MAX_DURATION_MS)
    sigma: float = Field(gt=0, le=4)

    def spec(self) -> Duration:
        return Duration("lognormal", self.median_ms, self.sigma)


DurationModel = Annotated[
    Constant | Uniform | Exponential | LogNormal, Field(discriminator="distribution")
]


class Durations:
    """`duration_ms: 20` for constant jobs, or `duration: {distribution: ..., ...}`; the
    draws are seeded by the scenario's seed and the job's id (harness/scenario/distributions.py)."""

    if TYPE_CHECKING:  # the fields themselves are declared by each model, in its order
        duration_ms: float | None
        duration: Constant | Uniform | Exponential | LogNormal | None

    def duration_spec(self) -> Duration:
        if self.duration is not None:
            return self.duration.spec()
        return Duration("constant", self.duration_ms or 0.0)

    def _check_durations(self, required: bool) -> None:
        if self.duration_ms is not None and self.duration is not None:
            raise ValueError("give duration_ms (constant) or duration (a distribution), not both")
        if required and self.duration_ms is None and self.duration is None:
            raise ValueError(
                "each job needs a duration: duration_ms: 20, or duration: "
                "{distribution: exponential, mean_ms: 20} (also constant, uniform, lognormal)"
            )


class TenantGroup(Durations, Model):
    """`tenants` tenants whose jobs arrive during the run.

    Arrival `burst` (default): at `enqueue_at_s`, and again every `every_s` seconds,
    `repeat` times in all; each tenant queues `jobs_per_tenant` jobs, or the group's `jobs`
    are spread over its tenants with Zipf sizes (`zipf_s`: tenant k of n gets a share
    proportional to 1/k^s). Arrival `poisson`: single jobs at `rate_per_s` for `window_s`
    seconds from `enqueue_at_s`, each for a tenant drawn uniformly, or by `zipf_s`.
    """

    name: Name
    tenants: int = Field(ge=1, le=MAX_TENANTS)
    jobs_per_tenant: int | None = Field(default=None, ge=1, le=1_000_000)
    jobs: int | None = Field(default=None, ge=1, le=MAX_TOTAL_JOBS)
    zipf_s: float | None = Field(default=None, gt=0, le=10)
    duration_ms: float | None = Field(default=None, ge=0, le=MAX_DURATION_MS)
    duration: DurationModel | None = None
    arrival: Literal["burst", "poisson"] = "burst"
    rate_per_s: float | None = Field(default=None, gt=0, le=100_000)
    window_s: float | None = Field(default=None, gt=0, le=86_400)
    enqueue_at_s: float = Field(default=0, ge=0, le=86_400)
    repeat: int = Field(default=1, ge=1, le=100_000)
    every_s: float = Field(default=0, ge=0, le=86_400)
    weight: int = Field(default=1, ge=1, le=1000)  # for the weighted strategy
    priority: int = Field(default=0, ge=-1000, le=1000)  # for the priority strategy
    # Each tenant enqueues under this many tenant keys (a sybil's accounts, a tenant's job
    # types each with its own queue), its jobs dealt over them in turn: the queue sees
    # tenants x keys tenants, every per-tenant figure counts each tenant's keys as one.
    keys: int = Field(default=1, ge=1, le=MAX_KEYS)
    # Failing jobs: each attempt fails with this probability (seeded by the scenario's seed,
    # the job and the attempt); after max_attempts failures the job is dead-lettered.
    failure_probability: float = Field(default=0, ge=0, le=1)
    max_attempts: int = Field(default=1, ge=1, le=100)
    backoff_ms: float = Field(default=0, ge=0, le=60_000)  # doubles with each failure

    @property
    def expected_jobs(self) -> int:
        """Exact for bursts; the mean count (rate x window) for Poisson arrivals."""
        if self.arrival == "poisson":
            return math.ceil((self.rate_per_s or 0) * (self.window_s or 0))
        per_round = self.jobs or self.tenants * (self.jobs_per_tenant or 0)
        return per_round * self.repeat

    @property
    def tenant_keys(self) -> int:
        """The tenant ids the queue sees for the group: each tenant's keys."""
        return self.tenants * self.keys

    @property
    def last_arrival_s(self) -> float:
        """When its last job arrives: the last burst, or the end of its Poisson window."""
        return self.enqueue_at_s + (self.window_s or 0) + self.every_s * (self.repeat - 1)

    @property
    def arrival_field(self) -> str:
        """The field that sets its last arrival, for an error to point at."""
        if self.arrival == "poisson":
            return "window_s"
        return "every_s" if self.repeat > 1 and self.every_s else "enqueue_at_s"

    @model_validator(mode="after")
    def _consistent(self) -> TenantGroup:
        self._check_durations(required=True)
        if self.arrival == "poisson":
            self._check_poisson()
        elif (self.jobs_per_tenant is None) == (self.jobs is None):
            raise ValueError(
                "a burst needs jobs_per_tenant (every tenant alike) or jobs with zipf_s "
                "(a total spread over the tenants), one of them"
            )
        elif self.jobs is not None and self.zipf_s is None:
            raise ValueError("jobs spreads a total over the tenants by zipf_s; give zipf_s")
        elif self.rate_per_s is not None or self.window_s is not None:
            raise ValueError("rate_per_s and window_s are for arrival: poisson")
        return self

    @model_validator(mode="after")
    def _keys_of_bursts(self) -> TenantGroup:
        if self.keys > 1 and self.arrival == "poisson":
            raise ValueError("keys deals a burst's jobs over each tenant's keys; not for poisson")
        return self

    def _check_poisson(self) -> None:
        if self.rate_per_s is None or self.window_s is None:
            raise ValueError("arrival: poisson needs rate_per_s and window_s")
        if self.jobs_per_tenant is not None or self.jobs is not None:
            raise ValueError(
                "arrival: poisson draws its jobs from rate_per_s x window_s; "
                "jobs_per_tenant and jobs are for bursts"
            )
        if self.repeat != 1 or self.every_s:
            raise ValueError("repeat and every_s are for bursts; a Poisson stream runs window_s")


class BacklogGroup(Durations, Model):
    """Tenants registered before the clock starts, each with `jobs_per_tenant` queued jobs.

    `jobs_per_tenant: 0` makes idle tenants: in queue_tenants with nothing queued.
    """

    name: Name
    tenants: int = Field(ge=0, le=MAX_TENANTS)
    jobs_per_tenant: int = Field(ge=0, le=MAX_BACKLOG_JOBS)
    duration_ms: float | None = Field(default=None, ge=0, le=MAX_DURATION_MS)  # if drained
    duration: DurationModel | None = None
    weight: int = Field(default=1, ge=1, le=1000)
    priority: int = Field(default=0, ge=-1000, le=1000)

    @model_validator(mode="after")
    def _consistent(self) -> BacklogGroup:
        self._check_durations(required=False)  # 0 ms if not given: plans only
        return self


class Backlog(Model):
    """A pre-loaded queue. Jobs are inserted group by group in list order (so their ids
    ascend in it); `rotation` orders the groups' tenants by last_served, the head of the
    rotation (served longest ago) first. Default: list order."""

    groups: list[BacklogGroup] = Field(min_length=1)
    rotation: list[Name] | None = None
    # The workers drain it in a timed run even without tenant groups: a throughput
    # scenario, whose clock starts with every job already queued. (With tenant groups a
    # timed run drains the backlog anyway.)
    drain: bool = False

    @property
    def total_jobs(self) -> int:
        return sum(group.tenants * group.jobs_per_tenant for group in self.groups)

    @property
    def rotation_order(self) -> list[str]:
        return self.rotation or [group.name for group in self.groups]

    def reshaped(self, tenants: dict[str, int], jobs_per_tenant: dict[str, int]) -> Backlog:
        """The same backlog with some groups' tenant counts and queued jobs replaced (an
        explain variant), validated again as a backlog of its own: model_copy alone would
        check nothing."""
        groups = [
            group.model_copy(
                update={
                    "tenants": tenants.get(group.name, group.tenants),
                    "jobs_per_tenant": jobs_per_tenant.get(group.name, group.jobs_per_tenant),
                }
            )
            for group in self.groups
        ]
        return Backlog(groups=groups, rotation=self.rotation, drain=self.drain)

    @model_validator(mode="after")
    def _consistent(self) -> Backlog:
        names = [group.name for group in self.groups]
        _no_duplicates("backlog group names", names)
        if self.rotation is not None and sorted(self.rotation) != sorted(names):
            raise ValueError(f"rotation must list each backlog group once: {names}")
        if self.total_jobs > MAX_BACKLOG_JOBS:
            raise ValueError(f"{self.total_jobs:,} backlog jobs; at most {MAX_BACKLOG_JOBS:,}")
        return self


class ExplainVariant(Model):
    """One backlog shape to capture plans on: the scenario's backlog, with `tenants`
    overriding groups' tenant counts and `jobs_per_tenant` their queued jobs (a backlog
    that grows). Strategies in `slow` are skipped unless asked for."""

    name: Name
    tenants: dict[Name, Annotated[int, Field(ge=0, le=MAX_TENANTS)]] = Field(default_factory=dict)
    jobs_per_tenant: dict[Name, Annotated[int, Field(ge=0, le=MAX_BACKLOG_JOBS)]] = Field(
        default_factory=dict
    )
    slow: list[Name] = Field(default_factory=list)


class Explain(Model):
    """EXPLAIN (ANALYZE, BUFFERS) captures of each strategy's dequeue on the backlog."""

    strategies: list[Name] | None = None  # default: the scenario's strategies
    repeat: int = Field(default=3, ge=1, le=100)
    variants: list[ExplainVariant] = Field(
        default_factory=lambda: [ExplainVariant(name="backlog")], min_length=1
    )


class ReferenceFigure(Model):
    """A figure the source reports, to print beside the measured one.

    Wait metrics are per strategy and tenant class (and worker count, in a sweep); plan
    metrics per strategy and explain variant. With `versus`, the figure compares two
    strategies: the ratio (strategy / versus) or the difference (strategy - versus).
    """

    label: str
    metric: WaitMetric | PlanMetric
    strategy: Name
    tenant_class: Name | None = None
    variant: Name | None = None
    versus: Name | None = None
    compare: Literal["ratio", "difference"] = "ratio"
    workers: int | None = None  # which count of a sweep; the only one when there is one
    value: tuple[float, float]
    unit: str = "s"

    @property
    def is_plan_figure(self) -> bool:
        return self.metric.startswith("plan_")

    @field_validator("value", mode="before", json_schema_input_type=float | tuple[float, float])
    @classmethod
    def _one_value_is_a_range(cls, value: Any) -> Any:
        if isinstance(value, list):  # YAML has no tuples; a strict load takes none else
            return tuple(value)
        return (value, value) if isinstance(value, int | float) else value


class Reference(Model):
    source: str
    figures: list[ReferenceFigure] = Field(min_length=1)
    # A measured range is within a figure when it lies inside the figure's range with each
    # end widened by this share of it: a single figure is met within +-10 % by default.
    tolerance: float = Field(default=0.10, ge=0, le=10)


class Crash(Model):
    """SIGKILL worker `worker` (0-based) at the first moment from `at_s` when it holds a job."""

    worker: int = Field(ge=0, le=255)
    at_s: float = Field(ge=0, le=86_400)


class Lease(Model):
    """Lease recovery: a claim's lease runs the job's duration plus `seconds`; the runner
    puts a job whose lease ran out back in the queue."""

    seconds: float = Field(gt=0, le=3600)


class ServerRestart(Model):
    """Restart PostgreSQL (fast shutdown, then start) at `at_s`; on a server the harness
    starts (embedded or container), not on --dsn."""

    at_s: float = Field(ge=0, le=86_400)


class WorkerKill(Model):
    """SIGKILL a queue library's worker process and everything it started (its process
    group), at `at_s` and, with `every_s`, again each `every_s` after; as a process
    supervisor would, start it again `restart_after_s` later, or never (`restart: false`).
    The library's own recovery decides what becomes of the jobs it held. With
    `holding`, each kill waits from its moment for the first poll (every 50 ms) at which
    the worker holds a job it said it started and has not finished (its adapter's
    `started` events); one that never comes is a kill that never happens, and is said."""

    worker: int = Field(default=0, ge=0, le=255)  # its worker process, from 0
    at_s: float = Field(ge=0, le=86_400)
    every_s: float | None = Field(default=None, gt=0, le=86_400)
    restart: bool = True
    restart_after_s: float = Field(default=1.0, ge=0, le=3600)
    holding: bool = False


class BackendKill(Model):
    """pg_terminate_backend on every session of the queue's worker processes (by the
    application_name the harness gives them; never the harness's own sessions, nor the
    enqueuers'), `per_s` times a second from `from_s` for `for_s` seconds. A worker that
    exits over it is started again (faults.restart_exited_after_s)."""

    from_s: float = Field(ge=0, le=86_400)
    for_s: float = Field(gt=0, le=86_400)
    per_s: float = Field(default=2.0, gt=0, le=20)

    def moments(self) -> list[float]:
        """Its moments: `per_s` a second through its window, from its start."""
        count = math.ceil(self.for_s * self.per_s - 1e-9)
        return [round(self.from_s + step / self.per_s, 6) for step in range(count)]


class ServerCrash(Model):
    """The server crashed at `at_s` (an immediate shutdown: every backend ended at once, no
    checkpoint) and started again `down_s` later, on its crash recovery; on a server the
    harness starts (embedded or container), not on --dsn. Every session is cut: a library
    worker that exits over it is started again (faults.restart_exited_after_s)."""

    at_s: float = Field(ge=0, le=86_400)
    down_s: float = Field(default=0.0, ge=0, le=600)


# The faults of the queues behind the adapter contract, in the order they are named.
LIBRARY_FAULTS = ("worker_kills", "backend_kills", "server_crash", "connection_exhaustion")
LIBRARY_ONLY = ("worker_kills",)  # the harness's workers take the rest


class ConnectionExhaustion(Model):
    """From `from_s` for `for_s` seconds, the harness holds idle connections of its own
    until the server has `margin` of its max_connections left (or refuses one sooner: a
    role that is not a superuser stops short of the reserved slots). Connections a
    library already holds go on; a new one (a worker started again, a pool that grows,
    a reconnect) is refused meanwhile. A library worker that exits over it is started
    again (faults.restart_exited_after_s). The harness's own workers (SQL strategies)
    hold one connection each from before the clock: it refuses them only a reconnect
    (after backend_kills in its window), which they retry with backoff until it ends."""

    from_s: float = Field(ge=0, le=86_400)
    for_s: float = Field(gt=0, le=86_400)
    margin: int = Field(default=0, ge=0, le=10_000)


class Faults(Model):
    crashes: list[Crash] = Field(default_factory=list)
    restart_workers: bool = True  # a replacement starts for each killed worker
    lease: Lease | None = None  # none: a killed worker's job stays running (stuck)
    server_restart: ServerRestart | None = None
    # A library's worker killed (the queues behind the adapter contract); the fields above
    # are the harness's own faults, for its SQL strategies.
    worker_kills: list[WorkerKill] = Field(default_factory=list)
    backend_kills: list[BackendKill] = Field(default_factory=list)  # its workers' sessions
    server_crash: ServerCrash | None = None  # for a library's queue
    connection_exhaustion: ConnectionExhaustion | None = None  # for a library's queue
    # With backend_kills, server_crash or connection_exhaustion: a library worker that
    # exits or fails on its own is started again this long after, as a supervisor would
    # (systemd's Restart=, RestartSec=); each exit is counted. Without them, such an exit
    # fails the run.
    restart_exited_after_s: float = Field(default=1.0, ge=0, le=3600)

    @property
    def library_faults(self) -> bool:
        """Any fault for the queues behind the adapter contract."""
        return any(getattr(self, name) for name in LIBRARY_FAULTS)

    @property
    def cuts_sessions(self) -> bool:
        """Faults that cut a library's sessions or refuse it new ones: its workers may
        exit over them."""
        return bool(self.backend_kills or self.server_crash or self.connection_exhaustion)

    @property
    def harness_faults(self) -> bool:
        """Any of the harness's own faults (what a faults section meant before worker_kills)."""
        own = (self.crashes, self.lease, self.server_restart)
        return any(own) or not self.library_faults


class LongTransaction(Model):
    """A transaction held open on a connection of its own while the queue churns.

    From `from_s` (after the clock starts) for `for_s` seconds it keeps a repeatable-read
    snapshot, and with it the xmin horizon: no dead row version newer than the snapshot
    can be pruned or vacuumed meanwhile. The table statistics are sampled every
    `sample_ms`. `vacuum_after` runs a plain VACUUM of the queue's tables as soon as the
    hold ends (off by default: what autovacuum does on its own is part of the result).
    `explain_fetches` runs a library's timed workers with auto_explain on (ANALYZE,
    BUFFERS, no node timing) and keeps each fetch's plan, placed before, during or after
    the hold: what its fetch reads while the horizon is held. auto_explain explains every
    statement of those sessions, which slows them all: off by default.
    """

    from_s: float = Field(ge=0, le=86_400)
    for_s: float = Field(gt=0, le=86_400)
    sample_ms: float = Field(default=200, ge=20, le=10_000)
    vacuum_after: bool = False
    explain_fetches: bool = False


class HeldPhase(Model):
    """A horizon's held-snapshot phase: from `from_s` for `for_s` seconds, `readers`
    analytics-like sessions each hold a repeatable-read transaction that reads the
    queue's tables, pinning the xmin horizon as long-running reports do."""

    from_s: float = Field(ge=0, le=86_400)
    for_s: float = Field(gt=0, le=86_400)
    readers: int = Field(default=3, ge=1, le=16)


HORIZON_PHASES = ("warmup", "steady", "held", "recovery")


class Horizon(Model):
    """A long steady run (docs/long-horizon.md): the tenant groups' Poisson streams for
    `duration_s`, in four phases (warm-up until `warmup_s`, steady until the held
    phase, the held phase, recovery to the end); the queue's tables sampled every
    `sample_s`, its wait events every second; its fetch explained every
    `explain_every_s` (a library's: the fetches its workers make in the `explain_for_s`
    after each moment); waits and throughput per `window_s`; drift from the steady
    phase's first window to its last. `harness run --duration` sets `duration_s` (up to
    `max_duration_s`) and scales the phases and streams with it."""

    duration_s: float = Field(gt=0, le=86_400)
    max_duration_s: float = Field(default=21_600, gt=0, le=86_400)
    warmup_s: float = Field(default=0, ge=0, le=86_400)
    held: HeldPhase
    sample_s: float = Field(default=10, ge=1, le=3600)
    window_s: float = Field(default=60, ge=1, le=3600)
    explain_every_s: float = Field(default=300, ge=1, le=86_400)
    explain_for_s: float = Field(default=2, gt=0, le=600)
    explain_fetches: bool = True  # a library's fetches under auto_explain (it slows them)

    @property
    def phases(self) -> list[tuple[str, float, float]]:
        """(name, from_s, to_s) of each phase, in order."""
        held_end = self.held.from_s + self.held.for_s
        bounds = [0.0, self.warmup_s, self.held.from_s, held_end, self.duration_s]
        return [
            (name, start, end)
            for name, start, end in zip(HORIZON_PHASES, bounds[:-1], bounds[1:], strict=True)
        ]

    def phase_at(self, t_s: float) -> str:
        """The phase at `t_s` seconds from the clock's start (the last one after it)."""
        for name, _, end in self.phases:
            if t_s < end:
                return name
        return HORIZON_PHASES[-1]

    def hold(self) -> LongTransaction:
        """The held phase as the long transaction's holder runs it."""
        return LongTransaction(
            from_s=self.held.from_s,
            for_s=self.held.for_s,
            explain_fetches=self.explain_fetches,
        )


class IdleWindow(Model):
    """From `from_s` for `for_s` seconds the queue is idle: every job that arrived before
    it is expected done, none arrives in it, and a tenant group arrives after it (so the
    repetition goes on through it). Its workers poll an empty queue meanwhile: the
    harness counts their fetches (the calls of the queue's fetch statement in
    pg_stat_statements, on a server that has it loaded: the embedded server is started
    with it for such a scenario) and the server's CPU time (its processes' utime and
    stime, from /proc, on a server on this host)."""

    from_s: float = Field(ge=0, le=86_400)
    for_s: float = Field(gt=0, le=3600)

    @property
    def until_s(self) -> float:
        return self.from_s + self.for_s


LibrarySetting = Literal["default", "tuned"]


class Libraries(Model):
    """Every declared library mapping of the chosen settings joins `strategies`, after
    them, whatever adapters the harness has (a new adapter's mappings join without an
    edit): a mapping at its library's defaults (`default`), at its maintainers' settings
    (`tuned`), or both; never a recovery mapping (the faults scenarios'). `leave_out`
    names adapters or strategies not to run (a comment in the file says why)."""

    settings: list[LibrarySetting] = Field(
        default_factory=lambda: list[LibrarySetting](["default"]), min_length=1, max_length=2
    )
    leave_out: list[Name] = Field(default_factory=list, max_length=100)


class ReportOptions(Model):
    """What the report shows beside what every run's shows."""

    # Claim latency (the dequeue transaction as the workers timed it) over the run and in
    # the verdict: for a scenario about a dequeue's cost (large-tenant-alone).
    claim_latency: bool = False
    # One row per strategy: the others' waits beside the flood's price (the class with
    # the most jobs), Jain's index and an idle window's cost: an adversarial scenario's.
    mappings: bool = False


class Scenario(Model):
    name: Name
    description: str = ""
    seed: int = Field(default=1, ge=0, le=2**63 - 1)  # durations, arrivals and sizes drawn
    strategies: list[Name] = Field(min_length=1)
    libraries: Libraries | None = None  # every library mapping of these settings, too
    workers: list[WorkerCount] = Field(default_factory=list)
    repetitions: int = Field(default=2, ge=1, le=100)
    poll_interval_ms: float = Field(default=10, gt=0, le=10_000)
    timeout_s: float = Field(default=300, gt=0, le=86_400)
    enqueuers: int = Field(default=1, ge=1, le=32)  # processes sharing the batches
    tenant_cap: int | None = Field(default=None, ge=1, le=MAX_TENANT_CAP)  # capped strategy
    checks: list[Check] = Field(default_factory=list)  # properties checked from the data
    backlog: Backlog | None = None
    tenant_groups: list[TenantGroup] = Field(default_factory=list)
    explain: Explain | None = None
    reference: Reference | None = None
    faults: Faults | None = None
    long_transaction: LongTransaction | None = None
    horizon: Horizon | None = None  # a long steady run (docs/long-horizon.md)
    idle: IdleWindow | None = None  # a window of an idle queue: its polls and server CPU
    report: ReportOptions = Field(default_factory=ReportOptions)
    # Bounds on its figures (harness/scenario/thresholds.py): `harness run` exits 1 when
    # one is not kept.
    thresholds: list[Annotated[str, Field(max_length=500)]] = Field(
        default_factory=list, max_length=100
    )

    @field_validator(
        "workers", mode="before", json_schema_input_type=WorkerCount | list[WorkerCount]
    )
    @classmethod
    def _one_count_is_a_sweep_of_one(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) else value

    @field_validator("thresholds")
    @classmethod
    def _thresholds_parse(cls, value: list[str]) -> list[str]:
        for text in value:
            parse_threshold(text)  # ValueError: one that is none, saying what is allowed
        return value

    @property
    def parsed_thresholds(self) -> list[Threshold]:
        return [parse_threshold(text) for text in self.thresholds]

    @property
    def timed(self) -> bool:
        """Whether workers run a timed workload (tenant groups arrive, or a backlog is
        drained), not only plans."""
        return bool(self.tenant_groups) or (self.backlog is not None and self.backlog.drain)

    @property
    def expected_jobs(self) -> int:
        """Jobs per repetition: exact, but for Poisson streams' mean counts (see workload)."""
        backlog = self.backlog.total_jobs if self.backlog else 0
        return backlog + sum(group.expected_jobs for group in self.tenant_groups)

    @property
    def uses_faults(self) -> bool:
        """Fault features on: the side tables, the claim log and the fault books."""
        failing = any(group.failure_probability > 0 for group in self.tenant_groups)
        return (self.faults is not None and self.faults.harness_faults) or failing

    @property
    def worker_kills(self) -> list[WorkerKill]:
        return self.faults.worker_kills if self.faults is not None else []

    @property
    def backend_kills(self) -> list[BackendKill]:
        return self.faults.backend_kills if self.faults is not None else []

    @property
    def library_faults(self) -> bool:
        """Faults for the queues behind the adapter contract (LIBRARY_FAULTS)."""
        return self.faults is not None and self.faults.library_faults

    @property
    def server_crash(self) -> ServerCrash | None:
        return self.faults.server_crash if self.faults is not None else None

    @property
    def connection_exhaustion(self) -> ConnectionExhaustion | None:
        return self.faults.connection_exhaustion if self.faults is not None else None

    @property
    def explain_strategies(self) -> list[str]:
        if self.explain is None:
            return []
        return self.explain.strategies or self.strategies

    def variant_backlog(self, variant: str) -> Backlog:
        """The backlog as an explain variant reshapes it."""
        assert self.backlog is not None and self.explain is not None
        chosen = {v.name: v for v in self.explain.variants}[variant]
        return self.backlog.reshaped(chosen.tenants, chosen.jobs_per_tenant)

    @property
    def group_names(self) -> list[str]:
        backlog = [group.name for group in self.backlog.groups] if self.backlog else []
        return backlog + [group.name for group in self.tenant_groups]

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        _no_duplicates("strategies", self.strategies)
        _no_duplicates("tenant group names", self.group_names)
        _no_duplicates("workers", [str(count) for count in self.workers])
        if self.timed and not self.workers:
            raise ValueError(
                "workers is required when tenant_groups arrive or the backlog is drained "
                "(e.g. workers: 4)"
            )
        if not self.timed and self.explain is None:
            raise ValueError(
                "nothing to run: give tenant_groups or backlog.drain (a timed run), "
                "explain (plan captures), or both"
            )
        if self.expected_jobs > MAX_TOTAL_JOBS and self.timed:
            raise ValueError(f"{self.expected_jobs:,} jobs in all; at most {MAX_TOTAL_JOBS:,}")
        self._check_tenants()
        self._check_arrivals()
        if "tenant_cap" in self.checks and self.tenant_cap is None:
            raise ValueError("checks: tenant_cap needs the scenario's tenant_cap (e.g. 2)")
        if self.checks and not self.timed:
            raise ValueError("checks need a timed run (tenant_groups): they read its data")
        if self.explain is not None:
            self._check_explain(self.explain)
        if self.faults is not None:
            self._check_faults(self.faults)
        if self.long_transaction is not None:
            self._check_long_transaction(self.long_transaction)
            if self.faults is not None:
                raise ValueError(
                    "long_transaction and faults are measured apart: give one of them per scenario"
                )
        if self.horizon is not None:
            self._check_horizon(self.horizon)
        if self.idle is not None:
            self._check_idle(self.idle)
        if self.reference is not None:
            for figure in self.reference.figures:
                self.check_figure(figure)
        for index, threshold in enumerate(self.parsed_thresholds):
            try:
                self.check_threshold(threshold)
            except ValueError as error:
                raise ValueError(f"thresholds[{index}]: {error}") from None
        return self

    def _check_tenants(self) -> None:
        """At most MAX_TENANTS registered at once, named at the group that passes it."""
        backlog = self.backlog.groups if self.backlog else []
        fields: list[tuple[str, BacklogGroup | TenantGroup]] = [
            (f"backlog.groups[{i}]", group) for i, group in enumerate(backlog)
        ]
        fields += [(f"tenant_groups[{i}]", group) for i, group in enumerate(self.tenant_groups)]
        total = 0
        for where, group in fields:
            seen = group.tenant_keys if isinstance(group, TenantGroup) else group.tenants
            total += seen
            if total > MAX_TENANTS:
                raise ValueError(
                    f"{where}.tenants: {seen:,} tenants bring the scenario to "
                    f"{total:,} (backlog and tenant groups); at most {MAX_TENANTS:,} in all"
                )

    def _check_arrivals(self) -> None:
        """A job arriving at or after timeout_s can only time out the repetition."""
        for index, group in enumerate(self.tenant_groups):
            if group.last_arrival_s >= self.timeout_s:
                raise ValueError(
                    f"tenant_groups[{index}].{group.arrival_field}: its last jobs arrive at "
                    f"{group.last_arrival_s:g} s, not before timeout_s ({self.timeout_s:g} s); "
                    "arrivals must end before it: raise timeout_s or arrive earlier"
                )

    def _check_idle(self, idle: IdleWindow) -> None:
        """A timed run, the window before the timeout, no arrival inside it and one after
        it; no fault nor held snapshot, which would be measured with the polls."""
        if not self.tenant_groups:
            raise ValueError("idle needs tenant_groups: a group arriving after the window")
        if idle.until_s >= self.timeout_s:
            raise ValueError(
                f"idle: the window ends at {idle.until_s:g} s, not before timeout_s "
                f"({self.timeout_s:g} s)"
            )
        for index, group in enumerate(self.tenant_groups):
            if group.enqueue_at_s < idle.until_s and group.last_arrival_s >= idle.from_s:
                raise ValueError(
                    f"tenant_groups[{index}]: its jobs arrive from {group.enqueue_at_s:g} s "
                    f"to {group.last_arrival_s:g} s, within idle's window "
                    f"({idle.from_s:g}-{idle.until_s:g} s): the queue would not be idle"
                )
        if all(group.enqueue_at_s < idle.until_s for group in self.tenant_groups):
            raise ValueError(
                f"idle: no tenant group arrives after the window ({idle.until_s:g} s): the "
                "repetition would end before it"
            )
        if self.faults is not None or self.long_transaction is not None:
            raise ValueError("idle and faults or long_transaction are measured apart")

    def _check_explain(self, explain: Explain) -> None:
        if self.backlog is None:
            raise ValueError(
                "explain needs a backlog: a plan on an empty queue says nothing about a skewed one"
            )
        backlog_groups = {group.name for group in self.backlog.groups}
        _no_duplicates("explain variant names", [variant.name for variant in explain.variants])
        for index, variant in enumerate(explain.variants):
            unknown = sorted((set(variant.tenants) | set(variant.jobs_per_tenant)) - backlog_groups)
            if unknown:
                raise ValueError(
                    f"explain variant '{variant.name}': {unknown} are not backlog "
                    f"groups {sorted(backlog_groups)}"
                )
            reshaping = (
                "tenants" if variant.tenants or not variant.jobs_per_tenant else "jobs_per_tenant"
            )
            self._check_variant(f"explain.variants[{index}].{reshaping}", variant)

    def _check_variant(self, where: str, variant: ExplainVariant) -> None:
        """The variant's backlog within the backlog's own limits, and its tenants with the
        tenant groups' within MAX_TENANTS: the run builds it `reshaped`, which checks
        it again."""
        assert self.backlog is not None
        groups = self.backlog.groups
        counts = [variant.tenants.get(group.name, group.tenants) for group in groups]
        queued = [
            variant.jobs_per_tenant.get(group.name, group.jobs_per_tenant) for group in groups
        ]
        jobs = sum(count * each for count, each in zip(counts, queued, strict=True))
        if jobs > MAX_BACKLOG_JOBS:
            raise ValueError(
                f"{where}: {jobs:,} backlog jobs in variant '{variant.name}'; "
                f"at most {MAX_BACKLOG_JOBS:,}"
            )
        tenants = sum(counts) + sum(group.tenant_keys for group in self.tenant_groups)
        if tenants > MAX_TENANTS:
            raise ValueError(
                f"{where}: {tenants:,} tenants in variant '{variant.name}' (its backlog and "
                f"the tenant groups); at most {MAX_TENANTS:,} in all"
            )

    def _check_faults(self, faults: Faults) -> None:
        if not self.timed:
            raise ValueError("faults need a timed run (tenant_groups): they happen to workers")
        fewest = min(self.workers)
        targets = [crash.worker for crash in faults.crashes]
        if not faults.restart_workers and len(set(targets)) < len(targets):
            raise ValueError(
                "faults.crashes: a worker is killed twice but restart_workers is false: "
                "nothing would be left to kill"
            )
        for index, crash in enumerate(faults.crashes):
            self._check_worker_and_moment(f"faults.crashes[{index}]", crash, fewest)
        if faults.server_restart is not None:
            self._check_restart(faults.server_restart)
        for index, kill in enumerate(faults.worker_kills):
            self._check_kill(f"faults.worker_kills[{index}]", kill, fewest)
        self._check_backend_kills(faults.backend_kills)
        if faults.server_crash is not None:
            self._check_crash(faults.server_crash)
        if faults.connection_exhaustion is not None:
            self._check_exhaustion(faults.connection_exhaustion, faults.server_crash)
        # backend_kills and server_crash cut the sessions of any queue's workers; the
        # others are a library's alone, or the harness's alone
        library_only = [name for name in LIBRARY_ONLY if getattr(faults, name)]
        if library_only and (faults.crashes or faults.lease or faults.server_restart):
            raise ValueError(
                f"faults: {library_only[0]} (a library's workers) and crashes, lease or "
                "server_restart (the harness's own) cannot be in one scenario"
            )
        if faults.connection_exhaustion is not None and (faults.crashes or faults.server_restart):
            raise ValueError(
                "faults.connection_exhaustion and crashes or server_restart cannot be in one "
                "scenario: a restarted server ends the connections it holds, and a crashed "
                "worker's replacement would be refused its first connection"
            )
        if faults.server_crash is not None and faults.server_restart is not None:
            raise ValueError(
                "faults.server_crash and server_restart cannot be in one scenario: the "
                "server goes down once"
            )

    def _check_crash(self, crash: ServerCrash) -> None:
        """Back up before the timeout; every job enqueued before it (an enqueue cut by the
        crash may or may not have committed: the books could not tell a lost batch from
        one the library holds); no long transaction, whose session it would end."""
        back = crash.at_s + crash.down_s
        if back >= self.timeout_s:
            raise ValueError(
                f"faults.server_crash: at_s + down_s ({back:g} s) is not before timeout_s "
                f"({self.timeout_s:g} s)"
            )
        last = max(group.last_arrival_s for group in self.tenant_groups)
        if last >= crash.at_s:
            raise ValueError(
                f"faults.server_crash: at_s {crash.at_s:g} is not after the last arrival "
                f"({last:g} s): a batch cut by the crash could not be counted"
            )
        if self.long_transaction is not None:
            raise ValueError(
                "faults.server_crash and long_transaction cannot be in one scenario: the "
                "crash would end the held transaction"
            )

    def _check_exhaustion(
        self, exhaustion: ConnectionExhaustion, crash: ServerCrash | None
    ) -> None:
        """Its window ends by the timeout; no crash, which would end the connections it
        holds."""
        self._check_window("faults.connection_exhaustion", exhaustion.from_s, exhaustion.for_s)
        if crash is not None:
            raise ValueError(
                "faults.connection_exhaustion and server_crash cannot be in one scenario: "
                "the crash would end the connections it holds"
            )

    def _check_window(self, where: str, from_s: float, for_s: float) -> None:
        """A fault's window ends by the timeout."""
        end = from_s + for_s
        if end > self.timeout_s:
            raise ValueError(
                f"{where}: its window ends at {end:g} s (from_s + for_s), after timeout_s "
                f"({self.timeout_s:g} s)"
            )

    def _check_backend_kills(self, kills: list[BackendKill]) -> None:
        """Each window ends by the timeout; no two windows overlap (their kills would be
        one series, counted twice)."""
        for index, kill in enumerate(kills):
            self._check_window(f"faults.backend_kills[{index}]", kill.from_s, kill.for_s)
        ordered = sorted(enumerate(kills), key=lambda pair: pair[1].from_s)
        for (before, first), (after, second) in pairwise(ordered):
            if second.from_s < first.from_s + first.for_s:
                raise ValueError(
                    f"faults.backend_kills[{after}]: its window (from {second.from_s:g} s) "
                    f"overlaps that of faults.backend_kills[{before}] (until "
                    f"{first.from_s + first.for_s:g} s)"
                )

    def _check_worker_and_moment(self, where: str, fault: Crash | WorkerKill, fewest: int) -> None:
        """A crash's or a kill's worker exists with the fewest workers; its moment comes
        before the timeout."""
        if fault.worker >= fewest:
            raise ValueError(
                f"{where}: worker {fault.worker} does not exist with {fewest} workers "
                f"(workers are numbered from 0)"
            )
        if fault.at_s >= self.timeout_s:
            raise ValueError(
                f"{where}: at_s {fault.at_s:g} is not before timeout_s ({self.timeout_s:g} s)"
            )

    def _check_kill(self, where: str, kill: WorkerKill, fewest: int) -> None:
        self._check_worker_and_moment(where, kill, fewest)
        if kill.restart and kill.every_s is not None and kill.every_s <= kill.restart_after_s:
            raise ValueError(
                f"{where}: every_s {kill.every_s:g} is not longer than restart_after_s "
                f"({kill.restart_after_s:g} s): the next kill would come before the restart"
            )
        if not kill.restart and kill.every_s is not None:
            raise ValueError(
                f"{where}: every_s with restart: false: a worker that stays dead is killed once"
            )

    def _check_restart(self, restart: ServerRestart) -> None:
        if restart.at_s >= self.timeout_s:
            raise ValueError(
                f"faults.server_restart: at_s {restart.at_s:g} is not before timeout_s "
                f"({self.timeout_s:g} s)"
            )
        # An insert cut by the restart may or may not have committed: the books could not
        # tell a lost batch from a doubled one, so arrivals must be over by then.
        last = max(group.last_arrival_s for group in self.tenant_groups)
        if restart.at_s <= last:
            raise ValueError(
                f"faults.server_restart: at_s {restart.at_s:g} is not after the last "
                f"arrival ({last:g} s); an enqueue cut by the restart would be in doubt"
            )

    def _check_long_transaction(self, hold: LongTransaction) -> None:
        if not self.timed:
            raise ValueError(
                "long_transaction needs a timed run (tenant_groups): it is held while workers churn"
            )
        if hold.from_s + hold.for_s >= self.timeout_s:
            raise ValueError(
                f"long_transaction.for_s: the hold ends at {hold.from_s + hold.for_s:g} s, not "
                f"before the scenario's timeout_s={self.timeout_s:g}"
            )

    def _check_horizon(self, horizon: Horizon) -> None:
        """Steady streams within its duration, its phases in order inside it, a sampler
        interval and windows that fit; nothing else held or faulted beside it."""
        if self.long_transaction is not None or self.faults is not None:
            raise ValueError(
                "horizon has its own held phase: long_transaction and faults are measured "
                "apart, give none of them with it"
            )
        if horizon.duration_s > horizon.max_duration_s:
            raise ValueError(
                f"horizon.duration_s: {horizon.duration_s:g} s is over max_duration_s "
                f"({horizon.max_duration_s:g} s); allowed: up to max_duration_s"
            )
        if horizon.duration_s >= self.timeout_s:
            raise ValueError(
                f"horizon.duration_s: {horizon.duration_s:g} s is not before timeout_s "
                f"({self.timeout_s:g} s); allowed: below timeout_s, with time to drain"
            )
        self._check_streams(horizon)
        self._check_phases(horizon)
        for name in ("sample_s", "window_s", "explain_every_s"):
            if getattr(horizon, name) > horizon.duration_s:
                raise ValueError(
                    f"horizon.{name}: {getattr(horizon, name):g} s is above duration_s "
                    f"({horizon.duration_s:g} s); allowed: 1 s to duration_s"
                )
        if horizon.window_s < horizon.sample_s:
            raise ValueError(
                f"horizon.window_s: {horizon.window_s:g} s is shorter than sample_s "
                f"({horizon.sample_s:g} s); allowed: sample_s to duration_s"
            )

    def _check_streams(self, horizon: Horizon) -> None:
        """Steady arrivals: every tenant group a Poisson stream that ends by duration_s."""
        if not self.tenant_groups:
            raise ValueError("horizon needs tenant_groups: steady streams (arrival: poisson)")
        for index, group in enumerate(self.tenant_groups):
            if group.arrival != "poisson":
                raise ValueError(
                    f"tenant_groups[{index}].arrival: a horizon's arrivals are steady; "
                    "allowed: poisson"
                )
            if group.last_arrival_s > horizon.duration_s:
                raise ValueError(
                    f"tenant_groups[{index}].window_s: its stream ends at "
                    f"{group.last_arrival_s:g} s, after horizon.duration_s "
                    f"({horizon.duration_s:g} s); allowed: ending by duration_s"
                )

    def _check_phases(self, horizon: Horizon) -> None:
        """Warm-up, steady, held, recovery: in order, none overlapping, all inside the
        duration, the steady phase two windows long at least (its first and last)."""
        held, end = horizon.held, horizon.held.from_s + horizon.held.for_s
        if held.from_s < horizon.warmup_s:
            raise ValueError(
                f"horizon.held.from_s: the held phase begins at {held.from_s:g} s, inside "
                f"the warm-up (until warmup_s {horizon.warmup_s:g} s); phases must not overlap"
            )
        if end > horizon.duration_s:
            raise ValueError(
                f"horizon.held.for_s: the held phase ends at {end:g} s, after duration_s "
                f"({horizon.duration_s:g} s); allowed: ending by duration_s"
            )
        steady = held.from_s - horizon.warmup_s
        if steady < 2 * horizon.window_s:
            raise ValueError(
                f"horizon.window_s: the steady phase ({steady:g} s, warmup_s to "
                f"held.from_s) holds fewer than two windows of {horizon.window_s:g} s; "
                "allowed: up to half the steady phase"
            )

    def check_figure(self, figure: ReferenceFigure) -> None:
        self._check_chosen(f"reference '{figure.label}'", figure, self.group_names)

    def check_threshold(self, threshold: Threshold) -> None:
        """A threshold on a figure this scenario measures; ValueError naming what it has
        otherwise (a scenario's own, and `harness run --threshold`'s, before any run).
        Its class may be `all`, the class that pools every tenant."""
        self._check_chosen(f"'{threshold.text}'", threshold, [*self.group_names, EVERY_TENANT])

    def _check_chosen(
        self, where: str, chosen: ReferenceFigure | Threshold, classes: list[str]
    ) -> None:
        """A figure (a reference's, a threshold's) of what the scenario measures: its
        strategies among those measured (a plan figure's among explain's, on one of its
        variants), a timed figure's workers count and tenant class among `classes`."""
        if chosen.is_plan_figure and self.explain is None:
            raise ValueError(f"{where}: {chosen.metric} needs plan captures (explain)")
        pool = self.explain_strategies if chosen.is_plan_figure else self.strategies
        for strategy in filter(None, (chosen.strategy, chosen.versus)):
            if strategy not in pool:
                raise ValueError(f"{where}: strategy '{strategy}' is not among {pool}")
        if chosen.is_plan_figure:
            variants = [v.name for v in self.explain.variants] if self.explain else []
            if chosen.variant not in variants:
                raise ValueError(f"{where}: variant must be one of the explain variants {variants}")
            return
        if not self.timed:
            raise ValueError(f"{where}: {chosen.metric} needs a timed run (tenant_groups)")
        if chosen.workers is None and len(self.workers) > 1:
            raise ValueError(
                f"{where}: say which workers count it is for; the scenario sweeps {self.workers}"
            )
        if chosen.workers is not None and chosen.workers not in self.workers:
            raise ValueError(
                f"{where}: workers {chosen.workers} is not among the scenario's {self.workers}"
            )
        if chosen.tenant_class not in classes:
            raise ValueError(
                f"{where}: tenant_class '{chosen.tenant_class}' is not a tenant group {classes}"
            )


def _no_duplicates(what: str, values: list[str]) -> None:
    seen = {value for value in values if values.count(value) > 1}
    if seen:
        raise ValueError(f"{what} must be unique; repeated: {sorted(seen)}")


MAX_SUITE_CASES = 32


class SuiteCase(Model):
    """One scenario of a suite, and what it is in the suite's table: the fault it runs
    (its column), so that several scenarios read as one library-by-fault matrix."""

    fault: Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9][\w ,.()-]*$")]
    scenario: Annotated[str, Field(min_length=1, max_length=255)]  # its file, from the suite's


class Suite(Model):
    """Scenarios run one after the other on one server and read together: a file with
    `suite:` in place of a scenario's fields (scenarios/real-queues-faults.yaml)."""

    name: Name
    description: str = ""
    suite: list[SuiteCase] = Field(min_length=1, max_length=MAX_SUITE_CASES)

    @model_validator(mode="after")
    def _each_fault_once(self) -> Suite:
        seen: dict[str, int] = {}
        for index, case in enumerate(self.suite):
            first = seen.setdefault(case.fault.casefold(), index)
            if first != index:
                raise ValueError(
                    f"suite[{index}].fault: {case.fault!r} is suite[{first}]'s too; "
                    "each case is one column of the suite's table: name each once"
                )
        return self
