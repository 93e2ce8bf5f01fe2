"""The ideal schedule: what a perfect queue would do with the same jobs, by discrete events.

No database. In the ideal, workers never poll: a free worker takes the next job the
policy names the instant there is one, and a claim costs nothing. With `Costs` (a run's
calibration, harness/analysis/calibration.py), each claim and each completion costs what
a draw from the measured distributions says, and an idle worker sees a new job only when
it next polls. Each policy mirrors the order its strategy's SQL gives:

  fifo                lowest job id first (ids ascend with enqueue time)
  round_robin         the tenant served longest ago (last_served, then tenant id), its
                      oldest job; a tenant keeps its last_served while idle
  round_robin_active  the same, but a tenant leaves the rotation when its queue empties
                      and re-enters at the head (last_served = -infinity)
  weighted            lowest pass, then tenant id; a claim adds 1/weight to the pass; a
                      tenant registers at the lowest pass of those registered (or 0)
  capped              round_robin over tenants running fewer than tenant_cap jobs
  priority            highest priority, then round_robin within it

Events at the same moment: completions first (they free workers and cap slots), then
arrivals, then workers that look for a job (free or polling), lowest worker index
first. Backlog tenants start with the rotation order of the backlog load.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.scenario.workload import Workload

POLICIES = ("fifo", "round_robin", "round_robin_active", "weighted", "capped", "priority")
NEVER = -math.inf


@dataclass(frozen=True)
class SimJobs:
    """Jobs in id order (job i has id i + 1): what the simulator needs of a workload."""

    tenant_ids: Sequence[int]
    at_s: Sequence[float]  # enqueue offsets, non-decreasing
    duration_s: Sequence[float]
    weights: dict[int, int] = field(default_factory=dict)  # tenant -> weight (default 1)
    priorities: dict[int, int] = field(default_factory=dict)  # tenant -> priority (0)
    rotation: dict[int, int] = field(default_factory=dict)  # backlog tenant -> position

    def __len__(self) -> int:
        return len(self.tenant_ids)


@dataclass(frozen=True)
class Schedule:
    start_s: list[float]  # per job, in id order
    finish_s: list[float]
    worker: list[int]

    @property
    def makespan_s(self) -> float:
        return max(self.finish_s, default=0.0)


def sim_jobs(workload: Workload) -> SimJobs:
    """A generated workload, with each job's drawn duration, as the simulator's input."""
    return SimJobs(
        tenant_ids=workload.tenant_ids.tolist(),  # indexed job by job: lists are faster
        at_s=workload.at_s.tolist(),
        duration_s=[ms / 1000 for ms in workload.durations_ms],
        weights={tenant: info.weight for tenant, info in workload.tenants.items()},
        priorities={tenant: info.priority for tenant, info in workload.tenants.items()},
        rotation=workload.rotation,
    )


Draw = Callable[[random.Random], float]  # one cost, in seconds


@dataclass(frozen=True)
class Costs:
    """What the queue costs a worker, in seconds. `claim`: from the moment a worker looks
    for a job (it is free, or it polls) to that job's start; the job is chosen at that
    moment. `completion`: from the end of the job's duration to its finish. An idle
    worker looks again every `poll_s` (worker i first at i * poll_s / workers); None: it
    sees a new job the instant it arrives. Draws come from one generator seeded with
    `seed`, in the order of events."""

    claim: Draw
    completion: Draw
    poll_s: float | None = None
    seed: int = 1

    @classmethod
    def fixed(
        cls, claim_ms: float = 0.0, completion_ms: float = 0.0, poll_ms: float | None = None
    ) -> Costs:
        claim_s, completion_s = claim_ms / 1000, completion_ms / 1000
        return cls(
            claim=lambda rng: claim_s,
            completion=lambda rng: completion_s,
            poll_s=None if poll_ms is None else poll_ms / 1000,
        )


ZERO_COSTS = Costs.fixed()
# Events at one moment, in this order: completions, arrivals, then workers looking.
_COMPLETION, _ARRIVAL, _LOOK = 0, 1, 2


def simulate(
    jobs: SimJobs,
    policy: str,
    workers: int,
    *,
    tenant_cap: int | None = None,
    costs: Costs = ZERO_COSTS,
) -> Schedule:
    """Every job's start and finish under `policy` with `workers` workers and `costs`
    (none by default: the ideal)."""
    crew = _Crew(jobs, _make_policy(policy, jobs, tenant_cap), costs, workers)
    return crew.run()


class _Crew:
    """The workers and their event queue: (time, kind, worker, job) in a heap."""

    def __init__(self, jobs: SimJobs, queue: _Policy, costs: Costs, workers: int) -> None:
        self.jobs, self.queue, self.costs = jobs, queue, costs
        self.rng = random.Random(costs.seed)
        n = len(jobs)
        self.start, self.finish, self.worker_of = [0.0] * n, [0.0] * n, [0] * n
        self.events: list[tuple[float, int, int, int]] = []
        self.idle = list(range(workers))  # without polling: a heap, lowest index first
        if costs.poll_s is not None:  # polling from the clock's start, phases spread evenly
            step = costs.poll_s / workers
            self.events = [(worker * step, _LOOK, worker, -1) for worker in range(workers)]
            self.idle = []
        self.taken = self.running = 0

    def run(self) -> Schedule:
        arrived, n, at_s = 0, len(self.jobs), self.jobs.at_s
        while self.taken < n or self.running:
            arrival = at_s[arrived] if arrived < n else math.inf
            if self.events and (self.events[0][0], self.events[0][1]) < (arrival, _ARRIVAL):
                self.handle(*heapq.heappop(self.events))
                continue
            self.queue.arrive(arrived)
            arrived += 1
            self.wake(arrival)
        return Schedule(self.start, self.finish, self.worker_of)

    def handle(self, now: float, kind: int, worker: int, job: int) -> None:
        if kind == _COMPLETION:
            self.running -= 1
            self.queue.finished(job)  # may free a cap slot for an idle worker
            heapq.heappush(self.events, (now, _LOOK, worker, -1))
            self.wake(now)
            return
        taken = self.queue.take(now)
        if taken is not None:
            self.assign(now, worker, taken)
        elif self.costs.poll_s is not None:
            heapq.heappush(self.events, (now + self.costs.poll_s, _LOOK, worker, -1))
        else:
            heapq.heappush(self.idle, worker)

    def assign(self, now: float, worker: int, job: int) -> None:
        start = now + self.costs.claim(self.rng)
        finish = start + self.jobs.duration_s[job] + self.costs.completion(self.rng)
        self.start[job], self.finish[job], self.worker_of[job] = start, finish, worker
        heapq.heappush(self.events, (finish, _COMPLETION, worker, job))
        self.taken += 1
        self.running += 1

    def wake(self, now: float) -> None:
        """Without polling, one idle worker (the lowest) looks when a job may have become
        free: an arrival or a completion adds at most one."""
        if self.idle:
            heapq.heappush(self.events, (now, _LOOK, heapq.heappop(self.idle), -1))


def alone_makespan(at_s: Sequence[float], duration_s: Sequence[float], workers: int) -> float:
    """How long a tenant's jobs take with the workers to itself: first enqueue to last
    finish, FIFO, no claim cost. The denominator of a tenant's slowdown.

    The fifo policy's schedule, computed directly: each job in order goes to the worker
    free soonest, at its arrival or when that worker frees up (tests check the two agree).
    """
    if not at_s:
        return 0.0
    free = [0.0] * min(workers, len(at_s))
    last = 0.0
    for arrival, duration in zip(at_s, duration_s, strict=True):
        finish = max(arrival, free[0]) + duration
        heapq.heapreplace(free, finish)
        last = max(last, finish)
    return last - min(at_s)


class _Policy:
    def arrive(self, job: int) -> None:
        raise NotImplementedError

    def take(self, now: float) -> int | None:
        raise NotImplementedError

    def finished(self, job: int) -> None:
        """A job of this policy's ended (frees a cap slot)."""


class _Fifo(_Policy):
    def __init__(self) -> None:
        self.queued: deque[int] = deque()

    def arrive(self, job: int) -> None:
        self.queued.append(job)

    def take(self, now: float) -> int | None:
        return self.queued.popleft() if self.queued else None


class _Rotation(_Policy):
    """Tenants with queued jobs in a heap by their key; each serves its oldest job."""

    def __init__(self, jobs: SimJobs) -> None:
        self.jobs = jobs
        self.queued: dict[int, deque[int]] = {}
        # Backlog tenants were served before the clock started, in rotation order.
        self.last_served = {tenant: -1e9 + at for tenant, at in jobs.rotation.items()}
        self.ready: list[tuple[tuple[float, ...], int]] = []  # (key, tenant)
        self.in_ready: set[int] = set()

    def key(self, tenant: int) -> tuple[float, ...]:
        return (self.last_served.get(tenant, NEVER), tenant)

    def eligible(self, tenant: int) -> bool:
        return bool(self.queued.get(tenant))

    def arrive(self, job: int) -> None:
        tenant = self.jobs.tenant_ids[job]
        self.register(tenant)
        self.queued.setdefault(tenant, deque()).append(job)
        self.offer(tenant)

    def register(self, tenant: int) -> None:
        self.last_served.setdefault(tenant, NEVER)

    def offer(self, tenant: int) -> None:
        if tenant not in self.in_ready and self.eligible(tenant):
            heapq.heappush(self.ready, (self.key(tenant), tenant))
            self.in_ready.add(tenant)

    def take(self, now: float) -> int | None:
        if not self.ready:
            return None
        _, tenant = heapq.heappop(self.ready)
        self.in_ready.discard(tenant)
        job = self.queued[tenant].popleft()
        self.served(tenant, now)
        self.offer(tenant)
        return job

    def served(self, tenant: int, now: float) -> None:
        self.last_served[tenant] = now


class _ActiveRotation(_Rotation):
    def served(self, tenant: int, now: float) -> None:
        if self.queued[tenant]:
            self.last_served[tenant] = now
        else:
            self.last_served.pop(tenant, None)  # retired: re-enters at the head


class _Weighted(_Rotation):
    def __init__(self, jobs: SimJobs) -> None:
        super().__init__(jobs)
        self.passes = {tenant: at * 1e-9 for tenant, at in jobs.rotation.items()}
        self.lowest: list[tuple[float, int]] = [(p, t) for t, p in self.passes.items()]
        heapq.heapify(self.lowest)

    def key(self, tenant: int) -> tuple[float, ...]:
        return (self.passes[tenant], tenant)

    def register(self, tenant: int) -> None:
        if tenant in self.passes:
            return
        while self.lowest and self.passes[self.lowest[0][1]] != self.lowest[0][0]:
            heapq.heappop(self.lowest)  # a stale entry: that tenant's pass has grown
        self.passes[tenant] = self.lowest[0][0] if self.lowest else 0.0
        heapq.heappush(self.lowest, (self.passes[tenant], tenant))

    def served(self, tenant: int, now: float) -> None:
        self.passes[tenant] += 1.0 / self.jobs.weights.get(tenant, 1)
        heapq.heappush(self.lowest, (self.passes[tenant], tenant))


class _Capped(_Rotation):
    def __init__(self, jobs: SimJobs, cap: int) -> None:
        super().__init__(jobs)
        self.cap = cap
        self.running: dict[int, int] = {}

    def eligible(self, tenant: int) -> bool:
        return super().eligible(tenant) and self.running.get(tenant, 0) < self.cap

    def served(self, tenant: int, now: float) -> None:
        super().served(tenant, now)
        self.running[tenant] = self.running.get(tenant, 0) + 1

    def finished(self, job: int) -> None:
        tenant = self.jobs.tenant_ids[job]
        self.running[tenant] -= 1
        self.offer(tenant)


class _Priority(_Rotation):
    def key(self, tenant: int) -> tuple[float, ...]:
        return (-self.jobs.priorities.get(tenant, 0), *super().key(tenant))


def _make_policy(policy: str, jobs: SimJobs, tenant_cap: int | None) -> _Policy:
    if policy == "fifo":
        return _Fifo()
    if policy == "round_robin":
        return _Rotation(jobs)
    if policy == "round_robin_active":
        return _ActiveRotation(jobs)
    if policy == "weighted":
        return _Weighted(jobs)
    if policy == "capped":
        if tenant_cap is None:
            raise HarnessError("the capped policy needs the scenario's tenant_cap")
        return _Capped(jobs, tenant_cap)
    if policy == "priority":
        return _Priority(jobs)
    raise HarnessError(f"unknown simulation policy '{policy}'; known: {', '.join(POLICIES)}")
