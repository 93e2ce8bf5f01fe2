"""Every queue a scenario can name in `strategies:`, in one place.

The built-in SQL strategies and the files of `--strategies-dir` (harness/queues/sql/),
and the queue libraries' mappings (harness/queues/libraries/).
Each entry says what the queue cannot take (its traits, which the scenario loader
checks), how to make it for a run, and what `harness sql NAME` shows of it.
"""

from __future__ import annotations

from pathlib import Path

from harness.queues import libraries
from harness.queues.base import QueueEntry
from harness.queues.sql.queue import sql_entry
from harness.queues.sql.strategies import load_strategies
from harness.scenario.traits import QueueTraits


def catalog(strategies_dir: Path | None = None) -> dict[str, QueueEntry]:
    built_in = {name: sql_entry(s) for name, s in load_strategies(strategies_dir).items()}
    return {**{entry.name: entry for entry in libraries.entries()}, **built_in}


def traits(entries: dict[str, QueueEntry]) -> dict[str, QueueTraits]:
    """What the scenario loader checks: name -> what that queue cannot take, and why."""
    return {name: entry.traits for name, entry in entries.items()}


def register_programs() -> None:
    """Every program a fleet member may be assigned, registered (harness/queues/programs.py):
    the SQL strategies' were as this module imported theirs; the libraries' now."""
    libraries.register_programs()
