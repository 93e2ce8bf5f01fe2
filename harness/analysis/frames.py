"""What the analysis modules share about the jobs table's frames: the keys of a
repetition, the pooled class, and ranges over repetitions."""

from __future__ import annotations

import pandas as pd

REPETITION_KEYS = ["scenario", "strategy", "workers", "repetition"]
ALL_TENANTS = "all"  # the class that pools every tenant


def ranges(summary: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Min and max over repetitions of each metric, per strategy, workers and class."""
    keys = ["strategy", "workers", "tenant_class"]
    grouped = summary.groupby(keys, sort=False)[metrics]
    low, high = grouped.min(), grouped.max()
    return low.join(high, lsuffix="_min", rsuffix="_max").reset_index()
