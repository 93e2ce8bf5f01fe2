"""The jobs a scenario enqueues: tenant ids, durations and when each batch goes in."""

from __future__ import annotations

from dataclasses import dataclass

from harness.scenario import Scenario


@dataclass(frozen=True)
class Batch:
    """Jobs enqueued together in one statement, `at_s` seconds after the run's start."""

    at_s: float
    tenant_ids: list[int]
    durations_ms: list[float]

    @property
    def size(self) -> int:
        return len(self.tenant_ids)


def tenant_classes(scenario: Scenario) -> dict[int, str]:
    """Tenant id -> its group's name. Ids are numbered from 1 in the order groups appear."""
    classes: dict[int, str] = {}
    for group in scenario.tenant_groups:
        first = len(classes) + 1
        classes.update({tenant: group.name for tenant in range(first, first + group.tenants)})
    return classes


def build_batches(scenario: Scenario) -> list[Batch]:
    """One batch per distinct enqueue time; within it, each tenant's jobs in a row."""
    by_time: dict[float, Batch] = {}
    next_tenant = 1
    for group in scenario.tenant_groups:
        batch = by_time.setdefault(group.enqueue_at_s, Batch(group.enqueue_at_s, [], []))
        for tenant in range(next_tenant, next_tenant + group.tenants):
            batch.tenant_ids.extend([tenant] * group.jobs_per_tenant)
            batch.durations_ms.extend([group.duration_ms] * group.jobs_per_tenant)
        next_tenant += group.tenants
    return sorted(by_time.values(), key=lambda batch: batch.at_s)
