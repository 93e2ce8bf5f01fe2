"""Fairness figures on jobs tables worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.analysis.fairness import jain_index, repetition_fairness, tenant_table
from harness.analysis.waits import with_waits

T0 = pd.Timestamp("2026-01-01", tz="UTC")


def job(job_id: int, tenant: int, enqueued: float, started: float, ms: float) -> dict:
    return {
        "scenario": "s",
        "strategy": "x",
        "workers": 2,
        "repetition": 1,
        "job_id": job_id,
        "tenant_id": tenant,
        "tenant_class": "a" if tenant == 1 else "b",
        "enqueued_at": T0 + pd.Timedelta(seconds=enqueued),
        "started_at": T0 + pd.Timedelta(seconds=started),
        "finished_at": T0 + pd.Timedelta(seconds=started + ms / 1000),
        "duration_ms": ms,
        "claim_ms": 1.0,
    }


def test_jains_index_is_one_when_equal_and_one_over_n_when_one_takes_all() -> None:
    assert jain_index(pd.Series([3.0, 3.0, 3.0])) == 1
    assert jain_index(pd.Series([5.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)
    assert jain_index(pd.Series([2.0, 1.0])) == pytest.approx(0.9)


def test_head_wait_slowdown_and_the_worst_tenant() -> None:
    jobs = pd.DataFrame(
        [
            # tenant 1: two 10 ms jobs at 0, run one after the other with 2 workers
            job(1, 1, 0.0, 0.0, 10),
            job(2, 1, 0.0, 0.01, 10),
            # tenant 2: one 10 ms job at 0.005 that waits until 0.02
            job(3, 2, 0.005, 0.02, 10),
        ]
    )
    tenants = tenant_table(with_waits(jobs)).set_index("tenant_id")
    # alone, 2 workers run tenant 1's two jobs side by side: 0.01 s
    assert tenants.loc[1, "makespan_s"] == pytest.approx(0.02)
    assert tenants.loc[1, "alone_s"] == pytest.approx(0.01)
    assert tenants.loc[1, "slowdown"] == pytest.approx(2.0)
    assert tenants.loc[1, "head_wait_s"] == 0
    assert tenants.loc[2, "head_wait_s"] == pytest.approx(0.015)
    assert tenants.loc[2, "slowdown"] == pytest.approx(0.025 / 0.01)
    fairness = repetition_fairness(tenants.reset_index()).iloc[0]
    assert fairness["jain_index"] == pytest.approx(4.5**2 / (2 * (2**2 + 2.5**2)))
    assert (fairness["worst_tenant"], fairness["worst_class"]) == (2, "b")
