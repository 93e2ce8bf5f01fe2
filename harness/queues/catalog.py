"""Every queue a scenario can name in `strategies:`, in one place.

Two kinds, each through one door: the built-in SQL strategies and the files of
`--strategies-dir` (harness/queues/sql/), and the mappings of every declared adapter, a
queue library in any language, Python's included (harness/queues/contract/; the shipped
ones in harness/queues/adapters/ and those of `--adapters-dir`). Each entry says what
the queue cannot take (its traits, which the scenario loader checks), how to make it for
a run, what `harness sql NAME` shows of it, and what it needs installed (its
requirements, checked and made ready before any server starts).
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.queues.base import Missing, QueueEntry, Say
from harness.queues.contract import queue as contract
from harness.queues.sql.queue import sql_entry
from harness.queues.sql.strategies import load_strategies
from harness.scenario.traits import QueueTraits


def catalog(
    strategies_dir: Path | None = None, adapters_dir: Path | None = None
) -> dict[str, QueueEntry]:
    """Every queue by name: the SQL strategies (and those of `strategies_dir`), and every
    declared adapter's mappings (and those of `adapters_dir`). Two adapters may not
    declare one name."""
    built_in = {name: sql_entry(s) for name, s in load_strategies(strategies_dir).items()}
    found: dict[str, QueueEntry] = {}
    for entry in contract.entries(adapters_dir):
        if entry.name in found:
            raise HarnessError(
                f"strategy '{entry.name}' is declared twice (by two adapters): rename one"
            )
        found[entry.name] = entry
    return {**found, **built_in}


def traits(entries: dict[str, QueueEntry]) -> dict[str, QueueTraits]:
    """What the scenario loader checks: name -> what that queue cannot take, and why."""
    return {name: entry.traits for name, entry in entries.items()}


def unmet(entries: dict[str, QueueEntry], names: list[str]) -> dict[str, list[tuple[str, str]]]:
    """What the named queues need and this installation lacks: per install line, each
    (queue, what it needs)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name in names:
        for requirement in entries[name].requires:
            missing: Missing | None = requirement.missing()
            if missing is not None:
                found.setdefault(missing.install, []).append((name, missing.what))
    return found


def require(entries: dict[str, QueueEntry], names: list[str], where: str, say: Say) -> None:
    """The named queues' requirements, met and made ready; else one line naming what to
    install, for which strategies (HarnessError: nothing was measured)."""
    found = unmet(entries, names)
    if found:
        raise HarnessError(f"{where}: " + "; ".join(_sentence(i, q) for i, q in found.items()))
    for name in names:
        for requirement in entries[name].requires:
            requirement.prepare(say)


def _sentence(install: str, queues: list[tuple[str, str]]) -> str:
    needs = ", ".join(dict.fromkeys(what for _, what in queues))
    strategies = ", ".join(name for name, _ in queues)
    verb = "strategy {} needs" if len(queues) == 1 else "strategies {} need"
    return f"{verb.format(strategies)} {needs}, not installed: {install}"
