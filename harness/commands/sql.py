"""`harness sql`: a strategy's SQL exactly as the workers run it."""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError, unknown_name
from harness.queues.catalog import catalog


def sql_command(name: str, strategies_dir: Path | None, adapters_dir: Path | None = None) -> None:
    entries = catalog(strategies_dir, adapters_dir)
    entry = entries.get(name)
    if entry is None:
        raise HarnessError(f"unknown strategy '{name}'; {unknown_name(name, entries, 'available')}")
    if entry.shown is None:
        raise HarnessError(f"strategy '{name}' runs no SQL of the harness's own to show")
    print(entry.shown(), end="")
