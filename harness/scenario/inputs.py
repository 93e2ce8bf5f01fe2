"""The inputs of a scenario's repetitions, computed once from the scenario.

Every repetition of a scenario queues the same jobs (the workload is drawn from the seed),
so everything a repetition needs of the scenario is worked out here, once, and handed
down as one value: the workload, each tenant's class and duration distribution, the
parameters every statement may use, each enqueuer's schedule of batches, the backlog's
rows, and the fault plan. Nothing below the scenario run derives them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.scenario.arrivals import Arrivals
from harness.scenario.distributions import Duration, Failures
from harness.scenario.model import (
    BackendKill,
    ConnectionExhaustion,
    Crash,
    Faults,
    Horizon,
    LongTransaction,
    Scenario,
    ServerCrash,
    TenantGroup,
    WorkerKill,
)
from harness.scenario.workload import (
    BacklogRows,
    Workload,
    backlog_rows,
    build_batches,
    generate,
    tenant_classes,
    tenant_durations,
    tenant_ranges,
)

NO_CAP = 2**31 - 1  # a cap no tenant reaches: strategies without one see this
# A harness worker whose session is gone tries to connect again for this long, then fails
# the run (the server is not coming back); longer under a connection exhaustion.
RECONNECT_GIVE_UP_S = 60.0


@dataclass(frozen=True)
class FaultPlan:
    """What the scenario's faults do, if it has any."""

    crashes: list[Crash] = field(default_factory=list)
    restart_workers: bool = True
    lease_s: float | None = None  # None: no lease, a killed worker's job stays running
    restart_at_s: float | None = None  # a server restart (a server the harness started)
    failures: dict[int, Failures] = field(default_factory=dict)  # tenant -> how it fails
    # how long a worker whose session is gone tries to connect again before it fails the
    # run: past a connection exhaustion's end, which refuses it meanwhile
    reconnect_give_up_s: float = RECONNECT_GIVE_UP_S

    @property
    def at_least_once(self) -> bool:
        """A lease hands a job whose holder died to another worker: it may run twice."""
        return self.lease_s is not None


@dataclass(frozen=True)
class RunInputs:
    scenario: Scenario
    classes: dict[int, str]  # tenant id -> its group's name
    durations: dict[int, Duration]  # tenant id -> its jobs' duration distribution
    params: dict[str, Any]  # parameters every statement may use
    schedules: list[Arrivals]  # per enqueuer: its batches, by offset
    backlog: BacklogRows | None  # the pre-loaded queue, if the scenario has one
    faults: FaultPlan | None  # None: no fault features at all
    long_transaction: LongTransaction | None  # the scenario's, or its horizon's held phase
    kills: tuple[WorkerKill, ...] = ()  # a library's worker processes killed (worker_kills)
    backend_kills: tuple[BackendKill, ...] = ()  # its workers' sessions terminated
    server_crash: ServerCrash | None = None  # the server crashed under a library's queue
    # connections held until the server has none left to give a library's workers
    connection_exhaustion: ConnectionExhaustion | None = None
    horizon: Horizon | None = None  # a long steady run, sampled by the long transaction's holder

    @property
    def library_faults(self) -> bool:
        """Faults for a queue behind the adapter contract: its books count what its own
        recovery left (harness/run/faults.py fault_summary)."""
        faults = (self.kills, self.backend_kills, self.server_crash, self.connection_exhaustion)
        return any(faults)

    @property
    def restart_exited_s(self) -> float | None:
        """Under faults that cut a library's sessions, how long after a worker that exits
        on its own is started again (its enqueuers' failure at their stop is counted too);
        None: such an exit fails the run."""
        faults = self.scenario.faults
        return faults.restart_exited_after_s if faults and faults.cuts_sessions else None

    @cached_property
    def workload(self) -> Workload:
        """Every job of a repetition, in id order: drawn only when asked for (a plan
        capture of a million-job backlog needs its rows, not its jobs)."""
        return generate(self.scenario)

    @property
    def total_jobs(self) -> int:
        return self.workload.total_jobs

    @property
    def seed(self) -> int:
        return self.scenario.seed

    @classmethod
    def of(cls, scenario: Scenario) -> RunInputs:
        return cls(
            scenario=scenario,
            classes=tenant_classes(scenario),
            durations=tenant_durations(scenario),
            params=statement_params(scenario),
            schedules=enqueuer_schedules(scenario),
            backlog=backlog_rows(scenario, scenario.backlog) if scenario.backlog else None,
            faults=fault_plan(scenario) if _harness_plan(scenario) else None,
            long_transaction=_hold_of(scenario),
            kills=tuple(scenario.worker_kills),
            backend_kills=tuple(scenario.backend_kills),
            server_crash=scenario.server_crash,
            connection_exhaustion=scenario.connection_exhaustion,
            horizon=scenario.horizon,
        )


def _hold_of(scenario: Scenario) -> LongTransaction | None:
    """The transaction the holder keeps: the scenario's, or its horizon's held phase."""
    if scenario.horizon is not None:
        return scenario.horizon.hold()
    return scenario.long_transaction


def statement_params(scenario: Scenario) -> dict[str, Any]:
    """Parameters every statement of a run may use, beside its own."""
    return {"tenant_cap": scenario.tenant_cap or NO_CAP}


def enqueuer_schedules(scenario: Scenario) -> list[Arrivals]:
    """The batches dealt round-robin to the scenario's enqueuers, each by offset."""
    batches = build_batches(scenario)
    return batches.dealt(min(scenario.enqueuers, max(len(batches), 1)))


def _harness_plan(scenario: Scenario) -> bool:
    """The fault features for the harness's own strategies: its own faults or failing
    jobs, or the faults it shares with a library's queue that cut its workers' sessions
    or refuse them new ones (a library's queue takes those its own way and has no use
    for the plan)."""
    cut = scenario.backend_kills or scenario.server_crash or scenario.connection_exhaustion
    return scenario.uses_faults or bool(cut)


def fault_plan(scenario: Scenario) -> FaultPlan:
    faults = scenario.faults or Faults()
    return FaultPlan(
        crashes=sorted(faults.crashes, key=lambda crash: crash.at_s),
        restart_workers=faults.restart_workers,
        lease_s=faults.lease.seconds if faults.lease else None,
        restart_at_s=faults.server_restart.at_s if faults.server_restart else None,
        failures=_failures(scenario),
        reconnect_give_up_s=_reconnect_give_up_s(faults),
    )


def _reconnect_give_up_s(faults: Faults) -> float:
    """RECONNECT_GIVE_UP_S, or longer: until a connection exhaustion has ended, and as
    long again after it (RECONNECT_GIVE_UP_S at most)."""
    exhaustion = faults.connection_exhaustion
    if exhaustion is None:
        return RECONNECT_GIVE_UP_S
    return max(RECONNECT_GIVE_UP_S, exhaustion.from_s + exhaustion.for_s + RECONNECT_GIVE_UP_S)


def _failures(scenario: Scenario) -> dict[int, Failures]:
    return {
        tenant: Failures(
            r.group.failure_probability, r.group.max_attempts, r.group.backoff_ms / 1000
        )
        for r in tenant_ranges(scenario)
        if isinstance(r.group, TenantGroup) and r.group.failure_probability > 0
        for tenant in r.ids
    }
