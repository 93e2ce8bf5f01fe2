"""The jobs a scenario queues: tenant ids, classes, durations, the backlog and the batches.

Tenant ids are numbered from 1: the backlog's groups first, in list order, then the
timed tenant groups. A job's weight and priority are its tenant group's; its duration is
drawn from the group's distribution by the scenario's seed and the job's id.

Everything drawn (Zipf sizes, Poisson arrival times, durations) comes from the seed, so
a scenario generates the same workload on every run and machine. Job ids follow the
order of insertion: the backlog tenant by tenant, then the batches by time, each in its
tenants' order. With one enqueuer the server hands out exactly these ids (a fresh
identity per repetition); with several, batches race and ids may interleave, which
changes which job gets which drawn duration, not the distribution.
"""

from __future__ import annotations

import random
from array import array
from bisect import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate

import numpy as np

from harness.scenario.arrivals import Arrivals, Floats, Ints
from harness.scenario.distributions import Duration, job_duration_ms, splitmix64
from harness.scenario.model import Backlog, BacklogGroup, Scenario, TenantGroup


@dataclass(frozen=True)
class TenantRange:
    """A tenant group's ids, and what its jobs are like."""

    group: BacklogGroup | TenantGroup
    first: int

    @property
    def ids(self) -> range:
        """The tenant ids the queue sees: each tenant's keys, in a row."""
        return range(self.first, self.first + self._keys * self.group.tenants)

    @property
    def _keys(self) -> int:
        return self.group.keys if isinstance(self.group, TenantGroup) else 1

    def owner(self, key: int) -> int:
        """The tenant a key of the group belongs to: its first key's id."""
        return self.first + (key - self.first) // self._keys * self._keys

    @property
    def in_backlog(self) -> bool:
        return isinstance(self.group, BacklogGroup)


def tenant_ranges(scenario: Scenario, backlog: Backlog | None = None) -> Iterator[TenantRange]:
    """Every group's tenant ids, backlog first; `backlog` replaces the scenario's (variants)."""
    backlog = backlog or scenario.backlog
    first = 1
    groups: list[BacklogGroup | TenantGroup] = [*(backlog.groups if backlog else [])]
    for group in [*groups, *scenario.tenant_groups]:
        found = TenantRange(group, first)
        yield found
        first += len(found.ids)


def tenant_classes(scenario: Scenario, backlog: Backlog | None = None) -> dict[int, str]:
    """Tenant id -> its group's name."""
    return {tenant: r.group.name for r in tenant_ranges(scenario, backlog) for tenant in r.ids}


def tenant_owners(scenario: Scenario) -> dict[int, int]:
    """Each key of a group whose tenants enqueue under several (`keys`) -> its tenant (its
    first key's id); keys that are tenants of their own are not listed."""
    return {
        key: r.owner(key)
        for r in tenant_ranges(scenario)
        if isinstance(r.group, TenantGroup) and r.group.keys > 1
        for key in r.ids
    }


def tenant_durations(scenario: Scenario) -> dict[int, Duration]:
    """Tenant id -> the distribution its jobs' durations are drawn from."""
    return {tenant: r.group.duration_spec() for r in tenant_ranges(scenario) for tenant in r.ids}


@dataclass(frozen=True)
class BacklogRows:
    """The backlog as arrays for the set-based load (sql/queue.sql, backlog_* blocks)."""

    tenant_ids: list[int]  # every registered tenant, in insertion order
    jobs: list[int]  # queued jobs per tenant
    rotation: list[int]  # position in the rotation: 1 = served longest ago
    weights: list[int]
    priorities: list[int]

    @property
    def total_jobs(self) -> int:
        return sum(self.jobs)

    def params(self) -> dict[str, list[int]]:
        return {
            "tenant_ids": self.tenant_ids,
            "jobs": self.jobs,
            "rotation": self.rotation,
            "weights": self.weights,
            "priorities": self.priorities,
        }


def backlog_rows(scenario: Scenario, backlog: Backlog) -> BacklogRows:
    ranges = [r for r in tenant_ranges(scenario, backlog) if r.in_backlog]
    by_group = {r.group.name: r for r in ranges}
    position: dict[int, int] = {}
    for group in backlog.rotation_order:
        for tenant in by_group[group].ids:
            position[tenant] = len(position) + 1
    tenants = [(tenant, r.group) for r in ranges for tenant in r.ids]
    return BacklogRows(
        tenant_ids=[tenant for tenant, _ in tenants],
        jobs=[group.jobs_per_tenant or 0 for _, group in tenants],
        rotation=[position[tenant] for tenant, _ in tenants],
        weights=[group.weight for _, group in tenants],
        priorities=[group.priority for _, group in tenants],
    )


def build_batches(scenario: Scenario) -> Arrivals:
    """One batch per distinct enqueue time; within it, groups in list order and each
    tenant's jobs in a row."""
    drawn = [
        (r.group, *group_arrivals(scenario.seed, index, r.group, r.first))
        for index, r in enumerate(tenant_ranges(scenario))
        if isinstance(r.group, TenantGroup)
    ]
    return Arrivals.of_jobs(
        at_s=np.concatenate([np.empty(0), *(at_s for _, at_s, _ in drawn)]),
        tenant_ids=_ints(tenants for _, _, tenants in drawn),
        weights=_ints(np.full(len(at_s), group.weight) for group, at_s, _ in drawn),
        priorities=_ints(np.full(len(at_s), group.priority) for group, at_s, _ in drawn),
    )


def _ints(parts: Iterator[Ints]) -> Ints:
    return np.concatenate([np.empty(0, np.int64), *parts]).astype(np.int64)


def group_arrivals(seed: int, index: int, group: TenantGroup, first: int) -> tuple[Floats, Ints]:
    """A group's jobs as (offset in s, tenant id) arrays, in the order drawn: its bursts,
    each tenant's jobs in a row, or its Poisson stream."""
    rng = _group_rng(seed, index)
    if group.arrival == "poisson":
        return _poisson(rng, group, first)
    sizes = burst_sizes(rng, group)
    one_burst = _dealt_over_keys(first, group.keys, sizes)
    rounds = range(group.repeat)
    offsets = np.array([round(group.enqueue_at_s + k * group.every_s, 6) for k in rounds])
    return np.repeat(offsets, len(one_burst)), np.tile(one_burst, group.repeat)


def _dealt_over_keys(first: int, keys: int, sizes: list[int]) -> Ints:
    """Each tenant's jobs in a row, dealt over its `keys` key ids in turn (job k of tenant
    t to key first + t * keys + k mod keys); with one key each, the tenant's id."""
    owners = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    turn = np.concatenate([np.empty(0, np.int64), *(np.arange(n) for n in sizes)])
    return (first + owners * keys + turn.astype(np.int64) % keys).astype(np.int64)


def _group_rng(seed: int, index: int) -> random.Random:
    """The draws of the group at `index` of tenant_ranges (sizes, or arrivals)."""
    return random.Random(splitmix64(seed ^ splitmix64(index)))


def burst_sizes(rng: random.Random, group: TenantGroup) -> list[int]:
    """Jobs per tenant in one burst: all alike, or `jobs` drawn one by one by Zipf weight."""
    if group.jobs_per_tenant is not None:
        return [group.jobs_per_tenant] * group.tenants
    sizes = [0] * group.tenants
    cumulative = _zipf_cumulative(group)
    for tenant in rng.choices(range(group.tenants), cum_weights=cumulative, k=group.jobs or 0):
        sizes[tenant] += 1
    return sizes


def _zipf_cumulative(group: TenantGroup) -> list[float] | None:
    if group.zipf_s is None:
        return None  # uniform
    s = group.zipf_s
    return list(accumulate(1 / rank**s for rank in range(1, group.tenants + 1)))


def _poisson(rng: random.Random, group: TenantGroup, first: int) -> tuple[Floats, Ints]:
    """A Poisson stream in compact arrays: no object is kept per arrival."""
    times, tenants = array("d"), array("q")
    for at_s, tenant in _poisson_draws(rng, group, first):
        times.append(at_s)
        tenants.append(tenant)
    return np.frombuffer(times, np.float64), np.frombuffer(tenants, np.int64)


def _poisson_draws(
    rng: random.Random, group: TenantGroup, first: int
) -> Iterator[tuple[float, int]]:
    """(offset s, tenant id) of single jobs with exponential gaps, drawn one by one as
    every earlier release drew them."""
    assert group.rate_per_s is not None and group.window_s is not None
    end = group.enqueue_at_s + group.window_s
    cumulative = _zipf_cumulative(group)
    at_s = group.enqueue_at_s + rng.expovariate(group.rate_per_s)
    while at_s < end:
        if cumulative is None:
            offset = rng.randrange(group.tenants)
        else:
            offset = min(bisect(cumulative, rng.random() * cumulative[-1]), group.tenants - 1)
        yield round(at_s, 6), first + offset
        at_s += rng.expovariate(group.rate_per_s)


@dataclass(frozen=True)
class TenantInfo:
    group: str
    duration: Duration
    weight: int
    priority: int


@dataclass(frozen=True, eq=False)
class Workload:
    """Every job of a repetition in id order (ids from 1): the backlog, queued before the
    clock starts (offset 0), then the batches. What the simulator schedules."""

    seed: int
    backlog_jobs: int
    tenant_ids: Ints  # per job
    at_s: Floats  # per job: when it is enqueued, from the start
    tenants: dict[int, TenantInfo]
    rotation: dict[int, int] = field(default_factory=dict)  # backlog tenant -> position

    @property
    def total_jobs(self) -> int:
        return len(self.tenant_ids)

    def duration_ms(self, job_id: int) -> float:
        tenant = int(self.tenant_ids[job_id - 1])
        return job_duration_ms(self.seed, job_id, self.tenants[tenant].duration)

    @cached_property
    def durations_ms(self) -> list[float]:
        """Every job's duration, in id order (drawn once: a million take a few seconds)."""
        tenants = self.tenant_ids.tolist()
        return [
            job_duration_ms(self.seed, job, self.tenants[tenant].duration)
            for job, tenant in enumerate(tenants, start=1)
        ]


def count_jobs(scenario: Scenario) -> int:
    """Jobs per repetition, without building the workload: Poisson counts are drawn."""
    total = scenario.backlog.total_jobs if scenario.backlog else 0
    for index, r in enumerate(tenant_ranges(scenario)):
        if isinstance(r.group, TenantGroup) and r.group.arrival == "poisson":
            draws = _poisson_draws(_group_rng(scenario.seed, index), r.group, r.first)
            total += sum(1 for _ in draws)  # counted, not kept
        elif isinstance(r.group, TenantGroup):
            total += r.group.expected_jobs
    return total


def generate(scenario: Scenario) -> Workload:
    backlog = np.empty(0, np.int64)
    rotation: dict[int, int] = {}
    if scenario.backlog is not None:
        rows = backlog_rows(scenario, scenario.backlog)
        backlog = np.repeat(np.array(rows.tenant_ids, np.int64), rows.jobs)
        rotation = dict(zip(rows.tenant_ids, rows.rotation, strict=True))
    arrivals = build_batches(scenario)
    tenants = {
        tenant: TenantInfo(r.group.name, r.group.duration_spec(), r.group.weight, r.group.priority)
        for r in tenant_ranges(scenario)
        for tenant in r.ids
    }
    return Workload(
        seed=scenario.seed,
        backlog_jobs=len(backlog),
        tenant_ids=np.concatenate([backlog, arrivals.tenant_ids]),
        at_s=np.concatenate([np.zeros(len(backlog)), arrivals.job_at_s()]),
        tenants=tenants,
        rotation=rotation,
    )
