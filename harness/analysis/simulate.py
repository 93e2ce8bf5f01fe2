"""The ideal schedule: what a perfect queue would do with the same jobs, by discrete events.

No database. Workers never poll: a free worker takes the next job the policy names the
instant there is one, and a claim costs `claim_ms` (0 for the ideal; a measured median
to see how much of a run's wait the dequeue itself explains). Each policy mirrors the
order its strategy's SQL gives:

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
arrivals, then free workers claim, lowest worker index first. Backlog tenants start with
the rotation order of the backlog load.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
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
        tenant_ids=workload.tenant_ids,
        at_s=workload.at_s,
        duration_s=[ms / 1000 for ms in workload.durations_ms],
        weights={tenant: info.weight for tenant, info in workload.tenants.items()},
        priorities={tenant: info.priority for tenant, info in workload.tenants.items()},
        rotation=workload.rotation,
    )


def simulate(
    jobs: SimJobs,
    policy: str,
    workers: int,
    claim_ms: float = 0.0,
    tenant_cap: int | None = None,
) -> Schedule:
    """Every job's start and finish under `policy` with `workers` ideal workers."""
    queue = _make_policy(policy, jobs, tenant_cap)
    claim_s = claim_ms / 1000
    n = len(jobs)
    start, finish, worker_of = [0.0] * n, [0.0] * n, [0] * n
    idle = list(range(workers))  # a heap: the lowest free worker index claims first
    busy: list[tuple[float, int, int]] = []  # (finish time, worker, job index)
    arrived = 0
    while arrived < n or busy:
        now = min(busy[0][0] if busy else math.inf, jobs.at_s[arrived] if arrived < n else math.inf)
        while busy and busy[0][0] <= now:
            _, worker, ended = heapq.heappop(busy)
            queue.finished(ended)
            heapq.heappush(idle, worker)
        while arrived < n and jobs.at_s[arrived] <= now:
            queue.arrive(arrived)
            arrived += 1
        while idle and (taken := queue.take(now)) is not None:
            worker = heapq.heappop(idle)
            start[taken] = now + claim_s
            finish[taken] = start[taken] + jobs.duration_s[taken]
            worker_of[taken] = worker
            heapq.heappush(busy, (finish[taken], worker, taken))
    return Schedule(start, finish, worker_of)


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
