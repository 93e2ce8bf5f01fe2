from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pandas as pd

from harness.analysis.compare import compare_runs, comparison_rows

T0 = datetime(2026, 9, 30, tzinfo=UTC)


def run(scale: float, seed: int, n: int = 60) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = []
    for job in range(n):
        wait = scale * rng.uniform(0.5, 1.5)
        rows.append(
            {
                "scenario": "s",
                "strategy": "fifo",
                "workers": 2,
                "repetition": 1,
                "job_id": job,
                "tenant_id": 2,
                "tenant_class": "small",
                "enqueued_at": T0,
                "started_at": T0 + timedelta(seconds=wait),
                "finished_at": T0 + timedelta(seconds=wait + 0.02),
                "worker": 0,
                "duration_ms": 20.0,
                "claim_ms": 1.0,
            }
        )
    return pd.DataFrame(rows)


def test_a_known_shift_is_flagged_slower() -> None:
    table = compare_runs(run(1.0, seed=1), run(3.0, seed=2))
    row = table.iloc[0]
    assert row["change"] == "slower"
    assert 2.5 < row["p50_ratio"] < 3.5
    assert row["p_slower"] < 1e-6


def test_the_same_distribution_is_not_flagged() -> None:
    table = compare_runs(run(1.0, seed=1), run(1.0, seed=3))
    assert table.iloc[0]["change"] == ""


def test_a_faster_run_is_flagged_faster() -> None:
    assert compare_runs(run(3.0, seed=1), run(1.0, seed=2)).iloc[0]["change"] == "faster"


def test_rows_show_both_runs_and_the_flag() -> None:
    headers, rows = comparison_rows(compare_runs(run(1.0, seed=1), run(3.0, seed=2)))
    assert headers[:4] == ["strategy", "workers", "tenants", "p50 A (s)"]
    assert rows[0][-1].startswith("SLOWER (p=")
