"""Every queue a scenario can name in `strategies:`, in one place.

The built-in SQL strategies and the files of `--strategies-dir` (harness/queues/sql/).
Each entry says what the queue cannot take (its traits, which the scenario loader
checks), how to make it for a run, and what `harness sql NAME` shows of it.
"""

from __future__ import annotations

from pathlib import Path

from harness.queues.base import QueueEntry
from harness.queues.sql.queue import sql_entry
from harness.queues.sql.strategies import load_strategies
from harness.scenario.traits import QueueTraits


def catalog(strategies_dir: Path | None = None) -> dict[str, QueueEntry]:
    return {name: sql_entry(strategy) for name, strategy in load_strategies(strategies_dir).items()}


def traits(entries: dict[str, QueueEntry]) -> dict[str, QueueTraits]:
    """What the scenario loader checks: name -> what that queue cannot take, and why."""
    return {name: entry.traits for name, entry in entries.items()}
