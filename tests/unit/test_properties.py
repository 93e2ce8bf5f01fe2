"""The property checks on data made by hand: each can hold and each can fail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from harness.analysis.properties import (
    max_concurrent_per_tenant,
    never_stranded,
    priority_order,
    tenant_cap,
    weighted_share,
)

T0 = datetime(2026, 9, 30, tzinfo=UTC)


def jobs(rows: list[tuple[int, str, float, float, float]]) -> pd.DataFrame:
    """(tenant, class, enqueued s, started s, finished s) -> a jobs frame."""
    return pd.DataFrame(
        [
            {
                "job_id": i,
                "tenant_id": tenant,
                "tenant_class": cls,
                "enqueued_at": T0 + timedelta(seconds=enq),
                "started_at": T0 + timedelta(seconds=st),
                "finished_at": T0 + timedelta(seconds=fin),
            }
            for i, (tenant, cls, enq, st, fin) in enumerate(rows)
        ]
    )


def test_overlapping_intervals_are_counted_and_touching_ones_are_not() -> None:
    frame = jobs([(1, "a", 0, 0, 2), (1, "a", 0, 1, 3), (1, "a", 0, 2, 4), (2, "b", 0, 0, 9)])
    assert max_concurrent_per_tenant(frame) == 2  # the third starts as the first finishes
    assert tenant_cap(frame, 2).held is True
    assert tenant_cap(frame, 1).held is False


def test_weighted_share_compares_claims_per_weight_while_both_are_backlogged() -> None:
    # paid (w2) gets two claims per free (w1) claim until free's last start at 6 s
    rows = [(1, "free", 0, s, s + 1) for s in (0, 3, 6)]
    rows += [(2, "paid", 0, s, s + 1) for s in (1, 2, 4, 5, 7, 8)]
    assert weighted_share(jobs(rows), {"free": 1, "paid": 2}).held is True
    even = [(1, "free", 0, s, s + 1) for s in (0, 2, 4, 6)]
    even += [(2, "paid", 0, s, s + 1) for s in (1, 3, 5, 7)]
    verdict = weighted_share(jobs(even), {"free": 1, "paid": 2})
    assert verdict.held is False and verdict.measured == 2.0


def test_priority_order_counts_lower_priority_starts_while_a_higher_one_waits() -> None:
    rows = [(1, "bulk", 0, s, s + 1) for s in (0, 1, 2, 3, 4)]
    rows.append((2, "urgent", 0.5, 3.5, 4.5))  # waited while bulk started at 1, 2 and 3
    frame = jobs(rows)
    priorities = {"bulk": 0, "urgent": 10}
    verdict = priority_order(frame, priorities, workers=4)
    assert (verdict.measured, verdict.held) == (3.0, True)
    assert priority_order(frame, priorities, workers=2).held is False


def test_a_stranded_sample_fails_and_none_holds() -> None:
    clean = pd.DataFrame({"elapsed_s": [0.0, 0.02], "stranded": [0, 0], "oldest_age_s": [0.0, 0.0]})
    assert never_stranded(clean).held is True
    stranded = clean.assign(stranded=[0, 1], oldest_age_s=[0.0, 0.35])
    verdict = never_stranded(stranded)
    assert (verdict.held, verdict.measured) == (False, 0.35)
    assert never_stranded(clean.iloc[0:0]).held is None
