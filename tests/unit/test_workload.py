from __future__ import annotations

from harness.scenario import Scenario
from harness.workload import build_batches, tenant_classes


def scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "w",
            "workers": 4,
            "strategies": ["fifo"],
            "tenant_groups": [
                {"name": "large", "tenants": 1, "jobs_per_tenant": 3, "duration_ms": 20},
                {
                    "name": "small",
                    "tenants": 2,
                    "jobs_per_tenant": 2,
                    "duration_ms": 5,
                    "enqueue_at_s": 1.0,
                },
                {"name": "also-now", "tenants": 1, "jobs_per_tenant": 1, "duration_ms": 1},
            ],
        }
    )


def test_tenant_ids_are_numbered_from_one_in_group_order() -> None:
    assert tenant_classes(scenario()) == {1: "large", 2: "small", 3: "small", 4: "also-now"}


def test_batches_group_by_time_and_keep_each_tenants_jobs_together() -> None:
    first, second = build_batches(scenario())
    assert (first.at_s, first.tenant_ids, first.durations_ms) == (0, [1, 1, 1, 4], [20, 20, 20, 1])
    assert (second.at_s, second.tenant_ids, second.durations_ms) == (
        1.0,
        [2, 2, 3, 3],
        [5, 5, 5, 5],
    )
    assert first.size + second.size == scenario().total_jobs
