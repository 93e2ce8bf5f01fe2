"""What each CLI command does, as plain functions over validated models."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from harness.bench import RunOutcome, run_scenario
from harness.errors import HarnessError
from harness.progress import ProgressBars
from harness.providers import choose_provider, open_server
from harness.report import console_table, reference_rows, summary_rows
from harness.runner import plan
from harness.scenario import LoadedScenario, load_scenario
from harness.strategies import load_strategies


def load_all(paths: list[Path], strategies_dir: Path | None) -> list[LoadedScenario]:
    """Every scenario validated before anything runs: a typo in the last file costs nothing."""
    names = set(load_strategies(strategies_dir))
    return [load_scenario(path, names) for path in paths]


def validate_command(paths: list[Path], strategies_dir: Path | None, console: Console) -> None:
    for loaded in load_all(paths, strategies_dir):
        scenario = loaded.scenario
        console.print(
            f"{loaded.path}: ok ({scenario.total_jobs:,} jobs per repetition, "
            f"{len(plan(scenario))} repetitions)",
            highlight=False,
        )


def sql_command(name: str, strategies_dir: Path | None) -> None:
    strategies = load_strategies(strategies_dir)
    if name not in strategies:
        raise HarnessError(f"unknown strategy '{name}'; available: {sorted(strategies)}")
    print(strategies[name].shown(), end="")


def run_command(
    paths: list[Path],
    pg: str | None,
    dsn: str | None,
    allow_mismatch: bool,
    results_dir: Path,
    strategies_dir: Path | None,
    console: Console,
) -> list[RunOutcome]:
    strategies = load_strategies(strategies_dir)
    scenarios = [load_scenario(path, set(strategies)) for path in paths]
    choice = choose_provider(pg, dsn, os.environ, allow_mismatch)
    outcomes = []
    console.print(f"Starting PostgreSQL ({choice.kind})...", highlight=False)
    with open_server(choice) as server:
        for loaded in scenarios:
            total = len(plan(loaded.scenario))
            console.rule(f"{loaded.scenario.name}: {total} repetitions")
            with ProgressBars(console, total) as bars:
                outcome = run_scenario(loaded, strategies, server, results_dir, bars)
            show_outcome(outcome, console)
            outcomes.append(outcome)
    return outcomes


def show_outcome(outcome: RunOutcome, console: Console) -> None:
    if outcome.reference is not None:
        title = f"Beside the reference ({outcome.reference_source})"
        console.print(console_table(title, *reference_rows(outcome.reference)))
    console.print(
        console_table(
            "Waits and last job done (seconds), range over repetitions",
            *summary_rows(outcome.summary),
        )
    )
    console.print(f"Results: {outcome.folder.path}", highlight=False)
