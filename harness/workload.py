"""The jobs a scenario queues: tenant ids, classes, durations, the backlog and the batches.

Tenant ids are numbered from 1: the backlog's groups first, in list order, then the
timed tenant groups. A job's duration, weight and priority are its tenant group's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.scenario import Backlog, BacklogGroup, Scenario, TenantGroup


@dataclass(frozen=True)
class Batch:
    """Jobs enqueued together in one statement, `at_s` seconds after the run's start."""

    at_s: float
    tenant_ids: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)  # per job: its tenant's weight
    priorities: list[int] = field(default_factory=list)  # per job

    @property
    def size(self) -> int:
        return len(self.tenant_ids)


@dataclass(frozen=True)
class TenantRange:
    """A tenant group's ids, and what its jobs are like."""

    group: BacklogGroup | TenantGroup
    first: int

    @property
    def ids(self) -> range:
        return range(self.first, self.first + self.group.tenants)

    @property
    def in_backlog(self) -> bool:
        return isinstance(self.group, BacklogGroup)


def tenant_ranges(scenario: Scenario, backlog: Backlog | None = None) -> Iterator[TenantRange]:
    """Every group's tenant ids, backlog first; `backlog` replaces the scenario's (variants)."""
    backlog = backlog or scenario.backlog
    first = 1
    groups: list[BacklogGroup | TenantGroup] = [*(backlog.groups if backlog else [])]
    for group in [*groups, *scenario.tenant_groups]:
        yield TenantRange(group, first)
        first += group.tenants


def tenant_classes(scenario: Scenario, backlog: Backlog | None = None) -> dict[int, str]:
    """Tenant id -> its group's name."""
    return {tenant: r.group.name for r in tenant_ranges(scenario, backlog) for tenant in r.ids}


def durations_ms(scenario: Scenario) -> dict[int, float]:
    """Tenant id -> how long each of its jobs takes: what a worker sleeps for."""
    return {tenant: r.group.duration_ms for r in tenant_ranges(scenario) for tenant in r.ids}


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
        jobs=[group.jobs_per_tenant for _, group in tenants],
        rotation=[position[tenant] for tenant, _ in tenants],
        weights=[group.weight for _, group in tenants],
        priorities=[group.priority for _, group in tenants],
    )


def build_batches(scenario: Scenario) -> list[Batch]:
    """One batch per distinct enqueue time; within it, each tenant's jobs in a row."""
    by_time: dict[float, Batch] = {}
    for r in tenant_ranges(scenario):
        group = r.group
        if not isinstance(group, TenantGroup):
            continue
        for round_ in range(group.repeat):
            at_s = round(group.enqueue_at_s + round_ * group.every_s, 6)
            batch = by_time.setdefault(at_s, Batch(at_s))
            for tenant in r.ids:
                batch.tenant_ids.extend([tenant] * group.jobs_per_tenant)
                batch.weights.extend([group.weight] * group.jobs_per_tenant)
                batch.priorities.extend([group.priority] * group.jobs_per_tenant)
    return sorted(by_time.values(), key=lambda batch: batch.at_s)
