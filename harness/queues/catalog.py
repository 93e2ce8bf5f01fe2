"""Every queue a scenario can name in `strategies:`, in one place.

The built-in SQL strategies and the files of `--strategies-dir` (harness/queues/sql/),
the Python queue libraries' mappings (harness/queues/libraries/), and the mappings of
every declared adapter (harness/queues/contract/; the shipped ones and `--adapters-dir`).
Each entry says what the queue cannot take (its traits, which the scenario loader
checks), how to make it for a run, and what `harness sql NAME` shows of it.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.queues import libraries
from harness.queues.base import QueueEntry
from harness.queues.contract import queue as contract
from harness.queues.sql.queue import sql_entry
from harness.queues.sql.strategies import load_strategies
from harness.scenario.traits import QueueTraits


def catalog(
    strategies_dir: Path | None = None, adapters_dir: Path | None = None
) -> dict[str, QueueEntry]:
    """Every queue by name: the SQL strategies (and those of `strategies_dir`), the
    Python libraries' mappings, and every declared adapter's (and those of
    `adapters_dir`). Two libraries or adapters may not declare one name."""
    built_in = {name: sql_entry(s) for name, s in load_strategies(strategies_dir).items()}
    found: dict[str, QueueEntry] = {}
    for entry in libraries.entries() + contract.entries(adapters_dir):
        if entry.name in found:
            raise HarnessError(
                f"strategy '{entry.name}' is declared twice (by a library or an adapter of "
                "--adapters-dir): rename one"
            )
        found[entry.name] = entry
    return {**found, **built_in}


def traits(entries: dict[str, QueueEntry]) -> dict[str, QueueTraits]:
    """What the scenario loader checks: name -> what that queue cannot take, and why."""
    return {name: entry.traits for name, entry in entries.items()}


def register_programs() -> None:
    """Every program a fleet member may be assigned, registered (harness/queues/programs.py):
    the SQL strategies' and the adapters' were as this module imported theirs; the
    libraries' now."""
    libraries.register_programs()
