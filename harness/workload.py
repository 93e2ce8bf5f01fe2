"""The jobs a scenario queues: tenant ids, classes, durations, the backlog and the batches.

Tenant ids are numbered from 1: the backlog's groups first, in list order, then the
timed tenant groups. A job's duration is its tenant group's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from harness.scenario import Backlog, Scenario


@dataclass(frozen=True)
class Batch:
    """Jobs enqueued together in one statement, `at_s` seconds after the run's start."""

    at_s: float
    tenant_ids: list[int]

    @property
    def size(self) -> int:
        return len(self.tenant_ids)


@dataclass(frozen=True)
class TenantRange:
    group: str
    first: int
    count: int
    jobs_per_tenant: int
    duration_ms: float
    enqueue_at_s: float | None  # None: in the backlog, queued before the clock starts

    @property
    def ids(self) -> range:
        return range(self.first, self.first + self.count)


def tenant_ranges(scenario: Scenario, backlog: Backlog | None = None) -> Iterator[TenantRange]:
    """Every group's tenant ids, backlog first; `backlog` replaces the scenario's (variants)."""
    backlog = backlog or scenario.backlog
    first = 1
    for group in backlog.groups if backlog else []:
        yield TenantRange(
            group.name, first, group.tenants, group.jobs_per_tenant, group.duration_ms, None
        )
        first += group.tenants
    for timed in scenario.tenant_groups:
        yield TenantRange(
            timed.name,
            first,
            timed.tenants,
            timed.jobs_per_tenant,
            timed.duration_ms,
            timed.enqueue_at_s,
        )
        first += timed.tenants


def tenant_classes(scenario: Scenario, backlog: Backlog | None = None) -> dict[int, str]:
    """Tenant id -> its group's name."""
    return {tenant: r.group for r in tenant_ranges(scenario, backlog) for tenant in r.ids}


def durations_ms(scenario: Scenario) -> dict[int, float]:
    """Tenant id -> how long each of its jobs takes: what a worker sleeps for."""
    return {tenant: r.duration_ms for r in tenant_ranges(scenario) for tenant in r.ids}


@dataclass(frozen=True)
class BacklogRows:
    """The backlog as arrays for the set-based load (sql/queue.sql, backlog_* blocks)."""

    tenant_ids: list[int]  # every registered tenant, in insertion order
    jobs: list[int]  # queued jobs per tenant
    rotation: list[int]  # position in the rotation: 1 = served longest ago

    @property
    def total_jobs(self) -> int:
        return sum(self.jobs)


def backlog_rows(scenario: Scenario, backlog: Backlog) -> BacklogRows:
    ranges = [r for r in tenant_ranges(scenario, backlog) if r.enqueue_at_s is None]
    by_group = {r.group: r for r in ranges}
    position: dict[int, int] = {}
    for group in backlog.rotation_order:
        for tenant in by_group[group].ids:
            position[tenant] = len(position) + 1
    tenants = [tenant for r in ranges for tenant in r.ids]
    return BacklogRows(
        tenant_ids=tenants,
        jobs=[r.jobs_per_tenant for r in ranges for _ in r.ids],
        rotation=[position[tenant] for tenant in tenants],
    )


def build_batches(scenario: Scenario) -> list[Batch]:
    """One batch per distinct enqueue time; within it, each tenant's jobs in a row."""
    by_time: dict[float, Batch] = {}
    for r in tenant_ranges(scenario):
        if r.enqueue_at_s is None:
            continue
        batch = by_time.setdefault(r.enqueue_at_s, Batch(r.enqueue_at_s, []))
        for tenant in r.ids:
            batch.tenant_ids.extend([tenant] * r.jobs_per_tenant)
    return sorted(by_time.values(), key=lambda batch: batch.at_s)
