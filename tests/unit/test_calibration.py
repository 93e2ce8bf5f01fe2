"""The calibration's fitting on hand-made jobs tables whose costs are known."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import pandas as pd
import pytest

from harness.analysis.calibration import (
    Calibration,
    CostDistribution,
    against_prediction,
    fit_calibration,
    worker_cycles,
)
from harness.errors import HarnessError

T0 = pd.Timestamp("2026-01-01", tz="UTC")


def at(ms: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(milliseconds=ms)


def backlog_run(
    workers: int,
    per_worker: int,
    claims_ms: Sequence[float],
    completion_ms: float,
    duration_ms: float = 20.0,
    strategy: str = "fifo",
) -> pd.DataFrame:
    """Every job queued at 0; each worker claims, works and completes back to back. The
    k-th claim of every worker costs claims_ms[k % len], on the server's clock."""
    rows = []
    for worker in range(workers):
        free = 0.0
        for k in range(per_worker):
            start = free + claims_ms[k % len(claims_ms)]
            free = start + duration_ms + completion_ms
            rows.append(job(strategy, workers, worker, 0.0, start, free, duration_ms))
    return numbered(rows)


def job(
    strategy: str,
    workers: int,
    worker: int,
    enqueued: float,
    started: float,
    finished: float,
    duration_ms: float,
    claim_ms: float = 1.0,
    repetition: int = 1,
) -> dict[str, object]:
    return {
        "scenario": "hand",
        "strategy": strategy,
        "workers": workers,
        "repetition": repetition,
        "tenant_id": 1,
        "tenant_class": "large",
        "enqueued_at": at(enqueued),
        "started_at": at(started),
        "finished_at": at(finished),
        "worker": worker,
        "duration_ms": duration_ms,
        "claim_ms": claim_ms,
    }


def numbered(rows: list[dict[str, object]]) -> pd.DataFrame:
    jobs = pd.DataFrame(rows).sort_values("started_at").reset_index(drop=True)
    return jobs.assign(job_id=range(1, len(jobs) + 1))


def fit(jobs: pd.DataFrame, polls: int = 0, **options: object) -> Calibration:
    counts = {
        (str(s), int(w), int(r)): polls
        for s, w, r in jobs[["strategy", "workers", "repetition"]].drop_duplicates().to_numpy()
    }
    return fit_calibration(jobs, "hand", 10.0, counts, **options)  # type: ignore[arg-type]


def test_constant_claim_and_completion_costs_are_recovered() -> None:
    calibration = fit(backlog_run(workers=3, per_worker=40, claims_ms=[1.5], completion_ms=0.7))
    (pair,) = calibration.pairs
    assert (pair.strategy, pair.workers, pair.repetitions) == ("fifo", 3, 1)
    assert pair.claim.median_ms == pytest.approx(1.5)
    assert pair.completion.median_ms == pytest.approx(0.7)
    assert pair.claim.count == 3 * 39  # a worker's last job has no next claim
    assert pair.overhead_ms == (pytest.approx(2.2),)
    assert pair.overhead_spread == 1.0


def test_each_repetitions_overhead_shows_how_steady_the_machine_was() -> None:
    calm = backlog_run(2, 20, [1.0], 1.0)
    busy = backlog_run(2, 20, [3.0], 2.0).assign(repetition=2)
    (pair,) = fit(pd.concat([calm, busy])).pairs
    assert pair.overhead_ms == (pytest.approx(2.0), pytest.approx(5.0))
    assert pair.overhead_spread == pytest.approx(2.5)


def test_a_spread_of_claim_costs_is_kept_as_a_distribution() -> None:
    claims = [1.0, 2.0, 3.0, 4.0]
    calibration = fit(backlog_run(workers=2, per_worker=81, claims_ms=claims, completion_ms=0.5))
    claim = calibration.pairs[0].claim
    # Gaps cycle 2, 3, 4, 1 ms (the first claim is before any finish): even shares.
    assert claim.quantiles_ms[0] == pytest.approx(1.0)
    assert claim.quantiles_ms[-1] == pytest.approx(4.0)
    assert claim.median_ms == pytest.approx(2.5)
    assert claim.mean_ms == pytest.approx(2.5, abs=0.02)


def test_a_queue_whose_workers_report_nothing_still_calibrates() -> None:
    # A library's jobs: no worker slot, no claim_ms; nothing to draw, so nothing charged.
    jobs = backlog_run(2, 10, [1.0], 0.5).assign(worker=None, claim_ms=None)
    (pair,) = fit(jobs).pairs
    assert (pair.claim.count, pair.client_claim.count) == (0, 0)
    assert pair.claim.median_ms == 0.0
    assert pair.completion.median_ms == pytest.approx(0.5)


def test_a_gap_waiting_for_an_arrival_is_not_a_claim() -> None:
    rows = [
        job("fifo", 1, 0, 0.0, 1.0, 22.0, 20.0),
        job("fifo", 1, 0, 0.0, 24.0, 45.0, 20.0),  # gap 2 ms, queued: a claim
        job("fifo", 1, 0, 500.0, 507.0, 528.0, 20.0),  # queued at 500 ms: idle, then polled
    ]
    cycles = worker_cycles(numbered(rows))
    assert cycles["queued"].tolist() == [True, False, False]
    assert fit(numbered(rows)).pairs[0].claim.quantiles_ms == (2.0,) * 101


def test_under_a_cap_a_gap_longer_than_the_poll_interval_held_a_poll() -> None:
    rows = [
        job("capped", 1, 0, 0.0, 1.0, 22.0, 20.0),
        job("capped", 1, 0, 0.0, 24.0, 45.0, 20.0),  # 2 ms: a claim
        job("capped", 1, 0, 0.0, 60.0, 81.0, 20.0),  # 15 ms > the 10 ms interval: held off
    ]
    calibration = fit(numbered(rows), policies={"capped": "capped"})
    assert calibration.pairs[0].claim.quantiles_ms == (2.0,) * 101
    plain = fit(numbered(rows), policies={"capped": "round_robin"})
    assert plain.pairs[0].claim.median_ms == pytest.approx(8.5)  # 2 and 15


def test_the_poll_period_comes_from_the_empty_polls_over_the_idle_time() -> None:
    # Two workers. Worker 0: a job at 0 (claim 1 ms, done at 21 ms), the next queued at
    # 1,021 ms and started at 1,022 ms, done at 1,042; worker 1 starts the third at 1,023.
    rows = [
        job("fifo", 1, 0, 0.0, 1.0, 21.0, 20.0),
        job("fifo", 1, 0, 1021.0, 1022.0, 1042.0, 20.0),
        job("fifo", 1, 0, 1021.0, 1023.0, 1043.0, 20.0, claim_ms=1.0),
    ]
    jobs = numbered(rows).assign(worker=[0, 0, 1], workers=2)
    pair = fit(jobs, polls=100).pairs[0]
    # Idle, less one claim per pickup (no gap was queued, so the claim is the client's
    # claim_ms, 1 ms): worker 0 after job 1 (1,001 - 1), before its first start (1 - 1)
    # and after its last job until the last finish (1); worker 1 before its first start
    # (1,023 - 1). Over 100 empty polls.
    assert pair.poll_source == "empty polls"
    assert pair.poll_ms == pytest.approx((1000 + 0 + 1 + 1022) / 100)
    few = fit(jobs, polls=10).pairs[0]
    assert few.poll_source == "interval + claim_ms"
    assert few.poll_ms == pytest.approx(10.0 + 1.0)


def test_growth_is_a_line_over_unsaturated_worker_counts() -> None:
    # 200 ms jobs. Busy shares: 200 / 201.5 (1 worker), 200 / 204.5 (3), 200 / 259 (8):
    # 8 workers drain at 0.78 of the best per worker, below 0.9 of it: saturated.
    runs = pd.concat(
        [
            backlog_run(1, 30, [1.0], 0.5, duration_ms=200),
            backlog_run(3, 30, [3.0], 1.5, duration_ms=200),
            backlog_run(8, 30, [50.0], 9.0, duration_ms=200),
        ]
    )
    calibration = fit(runs)
    assert [pair.busy_share for pair in calibration.pairs] == pytest.approx(
        [200 / 201.5, 200 / 204.5, 200 / 259], abs=1e-4
    )
    assert calibration.saturated == (("fifo", 8),)
    (growth,) = calibration.growth
    assert growth.claim.workers == (1, 3)
    assert growth.claim.per_worker_ms == pytest.approx(1.0)
    assert growth.claim.at_zero_ms == pytest.approx(0.0, abs=1e-9)
    assert growth.completion.per_worker_ms == pytest.approx(0.5)
    # 5 workers, not measured: the nearest measured (3) moved along the line, x 5/3.
    five = calibration.pair("fifo", "fifo", 5)
    assert (five.workers, five.repetitions) == (5, 0)
    assert five.claim.median_ms == pytest.approx(5.0)
    assert five.completion.median_ms == pytest.approx(2.5)
    # A measured count, saturated or not, is taken as measured.
    assert calibration.pair("fifo", "fifo", 8).claim.median_ms == pytest.approx(50.0)


def test_a_growth_line_never_falls() -> None:
    runs = pd.concat([backlog_run(1, 30, [3.0], 0.5), backlog_run(2, 30, [1.0], 0.5)])
    (growth,) = fit(runs).growth
    assert (growth.claim.at_zero_ms, growth.claim.per_worker_ms) == (pytest.approx(2.0), 0.0)


def test_a_strategy_not_calibrated_takes_the_nearest_in_kind() -> None:
    runs = pd.concat(
        [backlog_run(2, 10, [1.0], 0.5), backlog_run(2, 10, [2.0], 0.5, strategy="round_robin")]
    )
    calibration = fit(runs, policies={"fifo": "fifo", "round_robin": "round_robin"})
    assert calibration.stand_in("round_robin", "round_robin") == "round_robin"
    assert calibration.stand_in("fifo_hold", "fifo") == "fifo"
    assert calibration.stand_in("weighted", "weighted") == "round_robin"
    assert calibration.pair("weighted", "weighted", 2).claim.median_ms == pytest.approx(2.0)


def test_a_calibration_reads_back_as_written() -> None:
    runs = pd.concat([backlog_run(1, 20, [1.0, 3.0], 0.5), backlog_run(4, 20, [2.0], 0.8)])
    calibration = fit(runs, policies={"fifo": "fifo"})
    again = Calibration.from_dict(json.loads(json.dumps(calibration.to_dict())))
    assert again == calibration
    with pytest.raises(HarnessError, match="format_version 99"):
        Calibration.from_dict({**calibration.to_dict(), "format_version": 99})


def test_draws_follow_the_distribution_and_the_seed() -> None:
    spread = CostDistribution.of([1.0, 2.0, 2.0, 3.0, 10.0])
    rng = random.Random(3)
    draws = [spread.draw_ms(rng) for _ in range(20_000)]
    assert min(draws) >= 1.0 and max(draws) <= 10.0
    assert sum(draws) / len(draws) == pytest.approx(spread.mean_ms, rel=0.02)
    again = random.Random(3)
    assert [spread.draw_ms(again) for _ in range(5)] == draws[:5]


def test_the_target_holds_makespans_and_long_p50_waits_only() -> None:
    keys = {"strategy": "fifo", "workers": 4, "repetition": 1}
    measured = pd.DataFrame(
        [
            {**keys, "tenant_class": "large", "makespan_s": 6.0, "wait_p50_s": 3.0},
            {**keys, "tenant_class": "small", "makespan_s": 6.0, "wait_p50_s": 0.2},
        ]
    )
    predicted = measured.assign(makespan_s=[5.9, 5.0], wait_p50_s=[3.3, 0.1])
    table = against_prediction(measured, predicted).set_index(["tenant_class", "figure"])
    assert table.loc[("large", "makespan_s"), "ratio"] == pytest.approx(6.0 / 5.9)
    assert table["target"].to_dict() == {
        ("large", "makespan_s"): True,
        ("large", "wait_p50_s"): True,
        ("small", "makespan_s"): True,
        ("small", "wait_p50_s"): False,  # 0.2 s: below the 0.5 s the target starts at
    }
    assert table["within"].to_dict() == {
        ("large", "makespan_s"): True,
        ("large", "wait_p50_s"): False,  # 3.0 / 3.3: 9 % off
        ("small", "makespan_s"): False,  # 6.0 / 5.0
        ("small", "wait_p50_s"): False,
    }
