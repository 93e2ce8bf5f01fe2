from __future__ import annotations

from harness.scenario import Scenario
from harness.workload import backlog_rows, build_batches, durations_ms, tenant_classes


def timed() -> Scenario:
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


def skewed() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "s",
            "strategies": ["round_robin"],
            "backlog": {
                "groups": [
                    {"name": "large", "tenants": 1, "jobs_per_tenant": 5},
                    {"name": "small", "tenants": 2, "jobs_per_tenant": 1},
                    {"name": "idle", "tenants": 3, "jobs_per_tenant": 0},
                ],
                "rotation": ["idle", "small", "large"],
            },
            "explain": {"variants": [{"name": "more-idle", "tenants": {"idle": 5}}]},
        }
    )


def test_tenant_ids_are_numbered_from_one_in_group_order() -> None:
    assert tenant_classes(timed()) == {1: "large", 2: "small", 3: "small", 4: "also-now"}
    assert durations_ms(timed()) == {1: 20, 2: 5, 3: 5, 4: 1}


def test_batches_group_by_time_and_keep_each_tenants_jobs_together() -> None:
    first, second = build_batches(timed())
    assert (first.at_s, first.tenant_ids) == (0, [1, 1, 1, 4])
    assert (second.at_s, second.tenant_ids) == (1.0, [2, 2, 3, 3])
    assert first.size + second.size == timed().total_jobs


def test_backlog_rows_follow_insertion_order_and_the_rotation() -> None:
    scenario = skewed()
    assert scenario.backlog is not None
    rows = backlog_rows(scenario, scenario.backlog)
    assert rows.tenant_ids == [1, 2, 3, 4, 5, 6]
    assert rows.jobs == [5, 1, 1, 0, 0, 0]
    # idle tenants (4-6) were served longest ago, then the small ones, the large one last
    assert rows.rotation == [6, 4, 5, 1, 2, 3]
    assert rows.total_jobs == 7 == scenario.total_jobs
    assert build_batches(scenario) == []


def test_an_explain_variant_replaces_tenant_counts() -> None:
    scenario = skewed()
    assert scenario.backlog is not None and scenario.explain is not None
    variant = scenario.backlog.with_tenants(scenario.explain.variants[0].tenants)
    rows = backlog_rows(scenario, variant)
    assert rows.tenant_ids == list(range(1, 9))
    assert rows.rotation[:3] == [8, 6, 7]
    assert tenant_classes(scenario, variant)[8] == "idle"
