from __future__ import annotations

import itertools
import statistics

import numpy as np
import pytest

from harness.scenario.arrivals import Arrivals
from harness.scenario.distributions import Duration, job_duration_ms
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario, TenantGroup
from harness.scenario.workload import (
    backlog_rows,
    build_batches,
    burst_sizes,
    count_jobs,
    generate,
    group_arrivals,
    tenant_classes,
    tenant_durations,
)


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
    assert {tenant: d.a for tenant, d in tenant_durations(timed()).items()} == {
        1: 20,
        2: 5,
        3: 5,
        4: 1,
    }


def test_batches_group_by_time_and_keep_each_tenants_jobs_together() -> None:
    first, second = build_batches(timed())
    assert (first.at_s, first.tenant_ids) == (0, [1, 1, 1, 4])
    assert (second.at_s, second.tenant_ids) == (1.0, [2, 2, 3, 3])
    assert first.size + second.size == timed().expected_jobs == generate(timed()).total_jobs


def test_backlog_rows_follow_insertion_order_and_the_rotation() -> None:
    scenario = skewed()
    assert scenario.backlog is not None
    rows = backlog_rows(scenario, scenario.backlog)
    assert rows.tenant_ids == [1, 2, 3, 4, 5, 6]
    assert rows.jobs == [5, 1, 1, 0, 0, 0]
    # idle tenants (4-6) were served longest ago, then the small ones, the large one last
    assert rows.rotation == [6, 4, 5, 1, 2, 3]
    assert rows.total_jobs == 7 == scenario.expected_jobs
    assert len(build_batches(scenario)) == 0


def test_an_explain_variant_replaces_tenant_counts() -> None:
    scenario = skewed()
    assert scenario.backlog is not None and scenario.explain is not None
    variant = scenario.backlog.reshaped(scenario.explain.variants[0].tenants, {})
    rows = backlog_rows(scenario, variant)
    assert rows.tenant_ids == list(range(1, 9))
    assert rows.rotation[:3] == [8, 6, 7]
    assert tenant_classes(scenario, variant)[8] == "idle"


def test_job_ids_follow_insertion_order_backlog_first() -> None:
    scenario = Scenario.model_validate(
        {
            **skewed().model_dump(exclude={"explain"}),
            "workers": 2,
            "tenant_groups": [
                {
                    "name": "later",
                    "tenants": 2,
                    "jobs_per_tenant": 2,
                    "duration_ms": 3,
                    "enqueue_at_s": 0.5,
                }
            ],
        }
    )
    workload = generate(scenario)
    assert workload.backlog_jobs == 7
    assert workload.tenant_ids.tolist() == [1, 1, 1, 1, 1, 2, 3, 7, 7, 8, 8]
    assert workload.at_s.tolist() == [0.0] * 7 + [0.5] * 4
    assert workload.duration_ms(8) == 3
    assert count_jobs(scenario) == workload.total_jobs


def test_counting_a_poisson_groups_jobs_draws_the_same_stream() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "p",
            "workers": 1,
            "strategies": ["fifo"],
            "seed": 11,
            "tenant_groups": [
                {"name": "a", "tenants": 1, "jobs_per_tenant": 3, "duration_ms": 1},
                poisson().model_dump(exclude_none=True),
            ],
        }
    )
    assert count_jobs(scenario) == generate(scenario).total_jobs > 1900


def poisson(**fields: object) -> TenantGroup:
    base = {
        "name": "stream",
        "tenants": 50,
        "arrival": "poisson",
        "rate_per_s": 200,
        "window_s": 10,
        "duration_ms": 1,
    }
    return TenantGroup.model_validate({**base, **fields})


def drawn(seed: int) -> tuple[list[float], list[int]]:
    at_s, tenants = group_arrivals(seed, 0, poisson(enqueue_at_s=2), first=1)
    return at_s.tolist(), tenants.tolist()


def test_poisson_arrivals_are_seeded_and_have_the_rate() -> None:
    times, tenants = drawn(7)
    assert (times, tenants) == drawn(7)
    assert (times, tenants) != drawn(8)
    assert times == sorted(times) and times[0] >= 2 and times[-1] < 12
    # 2,000 expected; a Poisson count is within 4 standard deviations (~179) of it
    assert abs(len(times) - 2000) < 180
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.mean(gaps) == pytest.approx(1 / 200, rel=0.1)
    assert set(tenants) == set(range(1, 51))


def test_a_poisson_stream_is_held_as_arrays_not_an_object_per_arrival() -> None:
    """At the 5,000,000-job cap an object per arrival took 1.7 GiB: the stream, its
    batches and each enqueuer's share are arrays, a batch an object only when enqueued."""
    scenario = Scenario.model_validate(
        {
            "name": "p",
            "workers": 1,
            "strategies": ["fifo"],
            "enqueuers": 2,
            "tenant_groups": [poisson().model_dump(exclude_none=True)],
        }
    )
    at_s, tenants = group_arrivals(1, 0, scenario.tenant_groups[0], first=1)
    assert isinstance(at_s, np.ndarray) and isinstance(tenants, np.ndarray)
    inputs = RunInputs.of(scenario)
    for share in inputs.schedules:
        arrays = (share.at_s, share.bounds, share.tenant_ids, share.weights, share.priorities)
        assert all(isinstance(array, np.ndarray) for array in arrays)
    assert sum(share.jobs for share in inputs.schedules) == len(at_s) == count_jobs(scenario)
    assert isinstance(inputs.workload.tenant_ids, np.ndarray)
    assert isinstance(inputs.workload.at_s, np.ndarray)


def test_arrivals_at_one_offset_are_one_batch_in_the_order_drawn() -> None:
    arrivals = Arrivals.of_jobs(
        at_s=np.array([1.0, 0.0, 1.0, 0.5]),
        tenant_ids=np.array([1, 2, 3, 4]),
        weights=np.array([5, 6, 7, 8]),
        priorities=np.array([0, 0, 1, 0]),
    )
    assert [(b.at_s, b.tenant_ids, b.weights, b.priorities) for b in arrivals] == [
        (0.0, [2], [6], [0]),
        (0.5, [4], [8], [0]),
        (1.0, [1, 3], [5, 7], [0, 1]),
    ]
    first, second = arrivals.dealt(2)
    assert [b.tenant_ids for b in first] == [[2], [1, 3]]
    assert [b.tenant_ids for b in second] == [[4]]
    assert arrivals.job_at_s().tolist() == [0.0, 0.5, 1.0, 1.0]
    assert len(Arrivals.of_jobs(*(np.empty(0) for _ in range(4)))) == 0


def test_zipf_sizes_sum_to_the_total_and_fall_with_rank() -> None:
    import random

    group = TenantGroup.model_validate(
        {"name": "z", "tenants": 1000, "jobs": 20000, "zipf_s": 1.1, "duration_ms": 1}
    )
    sizes = burst_sizes(random.Random(1), group)
    assert sum(sizes) == 20000 and len(sizes) == 1000
    harmonic = sum(1 / k**1.1 for k in range(1, 1001))
    assert sizes[0] == pytest.approx(20000 / harmonic, rel=0.1)  # ~3,500 for the largest
    assert sizes[0] > sizes[9] > statistics.mean(sizes[900:])
    assert statistics.median(sizes) <= 6  # most tenants tiny: rank 500 expects ~4 jobs


@pytest.mark.parametrize(
    ("duration", "mean", "median"),
    [
        (Duration("uniform", 10, 30), 20, 20),
        (Duration("exponential", 20), 20, 20 * 0.6931),
        (Duration("lognormal", 20, 1.0), 20 * 1.6487, 20),
    ],
)
def test_durations_are_seeded_draws_with_the_distributions_moments(
    duration: Duration, mean: float, median: float
) -> None:
    draws = [job_duration_ms(3, job, duration) for job in range(1, 40001)]
    assert draws == [job_duration_ms(3, job, duration) for job in range(1, 40001)]
    assert draws != [job_duration_ms(4, job, duration) for job in range(1, 40001)]
    assert statistics.mean(draws) == pytest.approx(mean, rel=0.05)
    assert statistics.median(draws) == pytest.approx(median, rel=0.05)
    assert min(draws) >= 0
