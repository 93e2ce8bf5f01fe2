"""What the analysis modules share about the jobs table's frames: the keys of a
repetition and its rows, a job's wait, the pooled class, and ranges over repetitions."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import pandas as pd

REPETITION_KEYS = ["scenario", "strategy", "workers", "repetition"]
# A repetition within one run (one scenario): what run.json's entries are keyed by.
REPETITION = ["strategy", "workers", "repetition"]
ALL_TENANTS = "all"  # the class that pools every tenant


def wait_seconds(jobs: pd.DataFrame) -> pd.Series:
    """Each job's wait: from its enqueue to its start, in seconds."""
    return (jobs["started_at"] - jobs["enqueued_at"]).dt.total_seconds()


def repetition_rows(frame: pd.DataFrame, repetition: Mapping[Hashable, Any]) -> pd.DataFrame:
    """The rows of one repetition (its REPETITION keys' values in `repetition`)."""
    chosen = np.ones(len(frame), dtype=bool)
    for key in REPETITION:
        chosen &= (frame[key] == repetition[key]).to_numpy()
    return frame[chosen]


def ranges(summary: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Min and max over repetitions of each metric, per strategy, workers and class."""
    keys = ["strategy", "workers", "tenant_class"]
    grouped = summary.groupby(keys, sort=False)[metrics]
    low, high = grouped.min(), grouped.max()
    return low.join(high, lsuffix="_min", rsuffix="_max").reset_index()
