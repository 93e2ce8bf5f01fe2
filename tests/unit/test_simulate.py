"""The simulator against schedules worked out by hand, and its consistency checks."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from harness.analysis.calibration import CostDistribution
from harness.analysis.simulate import Costs, SimJobs, alone_makespan, sim_jobs, simulate
from harness.errors import HarnessError
from harness.queues.sql.strategies import load_strategies
from harness.scenario.loader import load_scenario
from harness.scenario.workload import generate
from tests.conftest import SCENARIOS, builtin_traits

# Tenant 1 queues three 10 ms jobs at 0; tenant 2 two 10 ms jobs at 0.005 s.
TWO_TENANTS = SimJobs(
    tenant_ids=[1, 1, 1, 2, 2],
    at_s=[0, 0, 0, 0.005, 0.005],
    duration_s=[0.010] * 5,
)


def starts(
    jobs: SimJobs, policy: str, workers: int, tenant_cap: int | None = None, **costs: float
) -> list[float]:
    schedule = simulate(jobs, policy, workers, tenant_cap=tenant_cap, costs=Costs.fixed(**costs))
    return [round(start, 9) for start in schedule.start_s]


def test_fifo_with_one_worker_runs_jobs_back_to_back_in_id_order() -> None:
    #   job:   1     2     3     4     5
    assert starts(TWO_TENANTS, "fifo", 1) == [0, 0.01, 0.02, 0.03, 0.04]


def test_round_robin_serves_the_tenant_served_longest_ago() -> None:
    # 0: job 1 (tenant 1; tenant 2 not queued yet). 0.01: tenant 2 has never been served
    # (-infinity) and goes first: job 4. 0.02: tenant 1 (served at 0) before tenant 2
    # (served at 0.01): job 2. 0.03: tenant 2's job 5. 0.04: job 3.
    assert starts(TWO_TENANTS, "round_robin", 1) == [0, 0.02, 0.04, 0.01, 0.03]


def test_two_workers_and_a_claim_cost() -> None:
    # Workers 0 and 1 claim jobs 1 and 2 at 0 (start 0.001, end 0.011). At 0.011 both
    # are free: tenant 2 (never served) gets job 4 at 0.012, then tenant 1 job 3.
    got = starts(TWO_TENANTS, "round_robin", 2, claim_ms=1)
    assert got == [0.001, 0.001, 0.012, 0.012, 0.023]


def test_a_completion_cost_lengthens_every_job_and_delays_the_next_claim() -> None:
    # One worker, claim 1 ms, completion 2 ms: a cycle of 13 ms per 10 ms job.
    assert starts(TWO_TENANTS, "fifo", 1, claim_ms=1, completion_ms=2) == [
        0.001,
        0.014,
        0.027,
        0.040,
        0.053,
    ]
    schedule = simulate(TWO_TENANTS, "fifo", 1, costs=Costs.fixed(1, 2))
    assert round(schedule.makespan_s, 9) == 0.065


def test_an_idle_worker_sees_a_job_only_when_it_polls() -> None:
    # Job 1 at 0 runs 0.001-0.011; the worker looks again at 0.011 (empty), polls every
    # 4 ms: 0.015, 0.019, 0.023, and takes job 2 (queued at 0.020) then: start 0.024.
    jobs = SimJobs(tenant_ids=[1, 1], at_s=[0, 0.020], duration_s=[0.010, 0.010])
    assert starts(jobs, "fifo", 1, claim_ms=1, poll_ms=4) == [0.001, 0.024]
    assert starts(jobs, "fifo", 1, claim_ms=1) == [0.001, 0.021]  # no polling: at once


def test_idle_workers_poll_at_phases_spread_over_the_interval() -> None:
    # Poll 4 ms, two workers: worker 0 looks at 0, 0.004, 0.008; worker 1 at 0.002,
    # 0.006. A job queued at 0.005 goes to worker 1 at 0.006.
    jobs = SimJobs(tenant_ids=[1], at_s=[0.005], duration_s=[0.010])
    schedule = simulate(jobs, "fifo", 2, costs=Costs.fixed(poll_ms=4))
    assert (round(schedule.start_s[0], 9), schedule.worker[0]) == (0.006, 1)


def test_a_completion_frees_a_cap_slot_before_the_polls_of_that_instant() -> None:
    # Cap 1: worker 0 runs job 1 from 0 to 0.010; worker 1 polls (0.002, 0.006, 0.010)
    # but tenant 1 is at its cap. At 0.010 job 1 completes first, then both workers
    # look: the lower index, worker 0, takes job 2.
    jobs = SimJobs(tenant_ids=[1, 1], at_s=[0, 0], duration_s=[0.010, 0.010])
    schedule = simulate(jobs, "capped", 2, tenant_cap=1, costs=Costs.fixed(poll_ms=4))
    assert [round(start, 9) for start in schedule.start_s] == [0, 0.010]
    assert schedule.worker == [0, 0]


def test_drawn_costs_are_reproducible_from_the_seed() -> None:
    spread = CostDistribution.of([0.5, 1.0, 1.5, 4.0, 9.0])

    def costs(seed: int) -> Costs:
        def draw(rng: random.Random) -> float:
            return spread.draw_ms(rng) / 1000

        return Costs(claim=draw, completion=draw, poll_s=0.005, seed=seed)

    jobs = SimJobs(tenant_ids=[1, 2] * 50, at_s=[0] * 100, duration_s=[0.005] * 100)
    first, again = (simulate(jobs, "round_robin", 3, costs=costs(7)) for _ in range(2))
    other = simulate(jobs, "round_robin", 3, costs=costs(8))
    assert first == again
    assert first.start_s != other.start_s
    # 100 jobs, 3 workers, each cycle 5 ms plus two draws of mean ~3 ms: about 0.37 s
    assert 0.25 < first.makespan_s < 0.55


def test_capped_never_runs_more_than_the_cap_of_one_tenant() -> None:
    jobs = SimJobs(tenant_ids=[1, 1, 1, 1, 2], at_s=[0] * 5, duration_s=[0.01] * 5)
    # Cap 1 with 3 workers: tenant 1 one job at a time, tenant 2's job alongside.
    assert starts(jobs, "capped", 3, tenant_cap=1) == [0, 0.01, 0.02, 0.03, 0]


def test_weighted_gives_a_heavier_tenant_more_turns() -> None:
    jobs = SimJobs(
        tenant_ids=[1] * 4 + [2] * 4, at_s=[0] * 8, duration_s=[0.01] * 8, weights={2: 2}
    )
    # Passes: both start at 0 (tenant id breaks the tie); tenant 1 adds 1, tenant 2 0.5.
    # Order: 1 (1), 2 (0.5), 2 (1), 1 (2), 2 (1.5), 2 (2), 1 (3), 1 (4).
    order = sorted(range(8), key=lambda job: simulate(jobs, "weighted", 1).start_s[job])
    assert [jobs.tenant_ids[job] for job in order] == [1, 2, 2, 1, 2, 2, 1, 1]


def test_priority_serves_the_higher_priority_first() -> None:
    jobs = SimJobs(tenant_ids=[1, 1, 2, 2], at_s=[0] * 4, duration_s=[0.01] * 4, priorities={2: 5})
    assert starts(jobs, "priority", 1) == [0.02, 0.03, 0, 0.01]


def test_round_robin_active_puts_a_returning_tenant_at_the_head() -> None:
    # One worker. Tenant 1's only job runs at 0 (tenant 1 leaves the active rotation);
    # tenant 2 is served at 0.01. At 0.015 tenant 3 (new) and tenant 1 (back) queue a
    # job each. round_robin: tenant 3 (-infinity) at 0.02, tenant 1 (served at 0) at
    # 0.03. round_robin_active: tenant 1 re-entered at -infinity too and its lower id
    # wins the tie: tenant 1 at 0.02, tenant 3 at 0.03.
    jobs = SimJobs(
        tenant_ids=[1, 2, 2, 2, 3, 1],
        at_s=[0, 0, 0, 0, 0.015, 0.015],
        duration_s=[0.01] * 6,
    )
    assert starts(jobs, "round_robin", 1) == [0, 0.01, 0.04, 0.05, 0.02, 0.03]
    assert starts(jobs, "round_robin_active", 1) == [0, 0.01, 0.04, 0.05, 0.03, 0.02]


def test_the_backlog_rotation_orders_tenants_before_the_clock() -> None:
    jobs = SimJobs(tenant_ids=[1, 2], at_s=[0, 0], duration_s=[0.01, 0.01], rotation={1: 2, 2: 1})
    assert starts(jobs, "round_robin", 1) == [0.01, 0]  # tenant 2 was served longest ago


def test_alone_makespan_equals_the_fifo_simulation() -> None:
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 30)
        at_s = sorted(rng.uniform(0, 1) for _ in range(n))
        durations = [rng.expovariate(20) for _ in range(n)]
        workers = rng.randint(1, 6)
        jobs = SimJobs(tenant_ids=[1] * n, at_s=at_s, duration_s=durations)
        expected = simulate(jobs, "fifo", workers).makespan_s - at_s[0]
        assert alone_makespan(at_s, durations, workers) == pytest.approx(expected, abs=1e-12)


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(HarnessError, match="unknown simulation policy 'lifo'"):
        simulate(TWO_TENANTS, "lifo", 1)


def test_the_articles_fifo_ideal_small_tenant_median_wait_is_about_4_1_s() -> None:
    scenario = load_scenario(SCENARIOS / "noisy-neighbour.yaml", builtin_traits()).scenario
    jobs = sim_jobs(generate(scenario))
    schedule = simulate(jobs, "fifo", 4)
    small = sorted(
        schedule.start_s[i] - jobs.at_s[i] for i in range(len(jobs)) if jobs.tenant_ids[i] > 1
    )
    # 1,000 jobs of 20 ms on 4 workers end at 5.0 s; the small jobs arrive at 1.0 s.
    assert small[len(small) // 2] == pytest.approx(4.12, abs=1e-9)


def test_every_strategy_has_a_policy_and_a_wrong_header_is_refused(tmp_path: Path) -> None:
    assert all(strategy.simulate_as for strategy in load_strategies().values())
    (tmp_path / "odd.sql").write_text(
        "-- extends: round_robin\n-- simulate: lottery\n-- name: dequeue\nselect 1, 1;\n"
    )
    with pytest.raises(HarnessError, match="simulate: 'lottery' is not a policy"):
        load_strategies(tmp_path)


def test_planet_scale_at_a_tenth_schedules_every_job_once(tmp_path: Path) -> None:
    """planet-scale's 10,000 tenants with a tenth of its jobs (the whole million is the
    benchmark `harness simulate scenarios/planet-scale.yaml --workers 1000`, which prints
    its time: docs/simulator.md): every job is scheduled once, after it arrived, and the
    stream's 50 s window sets the end. How long it took is printed, not asserted."""
    text = (SCENARIOS / "planet-scale.yaml").read_text()
    text = text.replace("jobs_per_tenant: 50000", "jobs_per_tenant: 5000")
    text = text.replace("rate_per_s: 10000", "rate_per_s: 1000")
    path = tmp_path / "planet-tenth.yaml"
    path.write_text(text)
    scenario = load_scenario(path, builtin_traits()).scenario
    began = time.perf_counter()
    jobs = sim_jobs(generate(scenario))
    schedule = simulate(jobs, "round_robin", 100)
    print(
        f"planet-scale / 10: {len(jobs):,} jobs, 100 workers: {time.perf_counter() - began:.1f} s"
    )
    assert 95_000 < len(jobs) < 105_000 and len(set(jobs.tenant_ids)) > 5_000
    assert len(schedule.start_s) == len(jobs)
    assert all(start >= at for start, at in zip(schedule.start_s, jobs.at_s, strict=True))
    assert 50 < schedule.makespan_s < 60
