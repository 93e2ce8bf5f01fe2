"""`harness sql`: a strategy's SQL exactly as the workers run it."""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.queues.sql.strategies import load_strategies


def sql_command(name: str, strategies_dir: Path | None) -> None:
    strategies = load_strategies(strategies_dir)
    if name not in strategies:
        raise HarnessError(f"unknown strategy '{name}'; available: {sorted(strategies)}")
    print(strategies[name].shown(), end="")
