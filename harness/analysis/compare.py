"""Two runs compared: per strategy, workers and tenant class, medians and p95 of waits,
their ratios, and a flag where the change is large and significant (pure)."""

from __future__ import annotations

import pandas as pd

from harness.analysis.stats import mann_whitney_greater
from harness.analysis.waits import with_waits

KEYS = ["strategy", "workers", "tenant_class"]


def compare_runs(
    first: pd.DataFrame, second: pd.DataFrame, factor: float = 1.5, alpha: float = 0.01
) -> pd.DataFrame:
    """One row per strategy, workers and class present in both runs (all repetitions)."""
    a, b = with_waits(first), with_waits(second)
    rows = []
    for key, old in a.groupby(KEYS, sort=False):
        new = b
        for column, value in zip(KEYS, key, strict=True):
            new = new[new[column] == value]
        if new.empty:
            continue
        rows.append(
            _row(dict(zip(KEYS, key, strict=True)), old["wait_s"], new["wait_s"], factor, alpha)
        )
    return pd.DataFrame(rows)


def _row(
    key: dict[str, object], old: pd.Series, new: pd.Series, factor: float, alpha: float
) -> dict[str, object]:
    old_p50, new_p50 = old.median(), new.median()
    ratio = new_p50 / old_p50 if old_p50 else float("inf")
    slower = mann_whitney_greater(list(new), list(old))
    faster = mann_whitney_greater(list(old), list(new))
    if ratio >= factor and slower < alpha:
        change = "slower"
    elif ratio <= 1 / factor and faster < alpha:
        change = "faster"
    else:
        change = ""
    return {
        **key,
        "jobs_a": len(old),
        "jobs_b": len(new),
        "wait_p50_a": old_p50,
        "wait_p50_b": new_p50,
        "p50_ratio": ratio,
        "wait_p95_a": old.quantile(0.95),
        "wait_p95_b": new.quantile(0.95),
        "p95_ratio": new.quantile(0.95) / old.quantile(0.95)
        if old.quantile(0.95)
        else float("inf"),
        "p_slower": slower,
        "p_faster": faster,
        "change": change,
    }


def comparison_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """A is the first run, B the second; a change is flagged when large and significant."""
    headers = [
        "strategy",
        "workers",
        "tenants",
        "p50 A (s)",
        "p50 B (s)",
        "p50 B/A",
        "p95 A (s)",
        "p95 B (s)",
        "p95 B/A",
        "change",
    ]
    rows = [
        [
            r["strategy"],
            str(r["workers"]),
            r["tenant_class"],
            f"{r['wait_p50_a']:.3g}",
            f"{r['wait_p50_b']:.3g}",
            f"{r['p50_ratio']:.2f}x",
            f"{r['wait_p95_a']:.3g}",
            f"{r['wait_p95_b']:.3g}",
            f"{r['p95_ratio']:.2f}x",
            (r["change"].upper() + f" (p={min(r['p_slower'], r['p_faster']):.2g})")
            if r["change"]
            else "-",
        ]
        for r in table.to_dict("records")
    ]
    return headers, rows
