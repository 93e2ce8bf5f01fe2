"""Pure analysis of a library's fetches under a held snapshot (`explain_fetches`).

Inputs are the plans auto_explain gave of each fetch a timed worker made (harness/run
gathers them, stamped with their arrival) and fetch-plans.csv, their figures. Definitions:
  at_s      = when the plan reached the harness, in seconds from the clock's start (the
              long transaction's clock: its window's began_s and ended_s are on it)
  phase     = before (at_s before began_s, or no hold began), during (up to ended_s),
              after (from ended_s on)
  buffers   = the fetch's shared buffers, hit + read (its top node's: the whole plan's)
  top node  = the node that read the most buffers of its own (its buffers less its
              children's): the scan that walked the dead versions, if any did
  p50, max  = per repetition and phase, over the fetches placed in it
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.frames import REPETITION
from harness.analysis.plans import describe, nodes

PHASES = ["before", "during", "after"]
FETCH_COLUMNS = [
    "at_s",
    "phase",
    "shared_hit",
    "shared_read",
    "shared_buffers",
    "rows",
    "top_node",
    "top_node_buffers",
    "duration_ms",
]


def fetch_figures(plan: dict[str, Any], duration_ms: float) -> dict[str, Any]:
    """One fetch's figures from its plan's root node (auto_explain's "Plan")."""
    hit, read = _buffers(plan, "Hit"), _buffers(plan, "Read")
    top, own = max(_own_buffers(plan), key=lambda pair: pair[1])
    return {
        "shared_hit": hit,
        "shared_read": read,
        "shared_buffers": hit + read,
        "rows": int(plan.get("Actual Rows", 0)),
        "top_node": describe(top),
        "top_node_buffers": own,
        "duration_ms": round(duration_ms, 4),
    }


def _buffers(node: dict[str, Any], kind: str) -> int:
    return int(node.get(f"Shared {kind} Blocks", 0))


def _total(node: dict[str, Any]) -> int:
    return _buffers(node, "Hit") + _buffers(node, "Read")


def _own_buffers(plan: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
    """Every node with the buffers it read itself (its own less its children's)."""
    return [
        (node, _total(node) - sum(_total(child) for child in node.get("Plans", [])))
        for node in nodes(plan)
    ]


def phase_of(at_s: pd.Series, began_s: float | None, ended_s: float | None) -> pd.Series:
    """Each moment's phase of a hold that began and ended at those seconds (None: it
    never began, or never ended before the workers stopped)."""
    began = np.inf if began_s is None or pd.isna(began_s) else began_s
    ended = np.inf if ended_s is None or pd.isna(ended_s) else ended_s
    phase = np.select([at_s < began, at_s < ended], ["before", "during"], default="after")
    return pd.Series(phase, index=at_s.index, dtype=object)


def fetch_summary(fetches: pd.DataFrame) -> pd.DataFrame:
    """Per repetition: fetches, the median and the largest buffers of a fetch, and the
    most frequent top node, in each phase."""
    rows = []
    for keys, group in fetches.groupby(REPETITION, sort=False):
        row = dict(zip(REPETITION, keys, strict=True))
        for phase in PHASES:
            placed = group[group["phase"] == phase]
            buffers = placed["shared_buffers"]
            row[f"fetches_{phase}"] = len(placed)
            row[f"fetch_buffers_p50_{phase}"] = float(buffers.median()) if len(placed) else np.nan
            row[f"fetch_buffers_max_{phase}"] = float(buffers.max()) if len(placed) else np.nan
            row[f"fetch_top_node_{phase}"] = (
                str(placed["top_node"].mode().iloc[0]) if len(placed) else ""
            )
        rows.append(row)
    columns = [*REPETITION, *(f"{figure}_{p}" for p in PHASES for figure in _FIGURES)]
    return pd.DataFrame(rows, columns=columns)


_FIGURES = ["fetches", "fetch_buffers_p50", "fetch_buffers_max", "fetch_top_node"]
