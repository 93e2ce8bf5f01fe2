"""What each CLI command does, as plain functions over validated models."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from harness.bench import RunOptions, RunOutcome, run_scenario
from harness.errors import HarnessError
from harness.explain import requests
from harness.plans import SORTS_TENANTS, WALKS_GLOBAL_INDEX
from harness.progress import ProgressBars
from harness.providers import choose_provider, open_server
from harness.report import console_table, plans_rows, reference_rows, summary_rows
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
        parts = []
        if scenario.timed:
            parts.append(
                f"{scenario.total_jobs:,} jobs per repetition, {len(plan(scenario))} repetitions"
            )
        if scenario.explain is not None:
            parts.append(f"{len(requests(scenario))} plan captures")
        console.print(f"{loaded.path}: ok ({'; '.join(parts)})", highlight=False)


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
    options: RunOptions,
    console: Console,
) -> list[RunOutcome]:
    strategies = load_strategies(strategies_dir)
    scenarios = [load_scenario(path, set(strategies)) for path in paths]
    for loaded in scenarios:
        _check_selection(loaded, options)
    choice = choose_provider(pg, dsn, os.environ, allow_mismatch)
    outcomes = []
    console.print(f"Starting PostgreSQL ({choice.kind})...", highlight=False)
    with open_server(choice) as server:
        for loaded in scenarios:
            steps = _steps(loaded, options)
            console.rule(f"{loaded.scenario.name}: {steps} steps")
            with ProgressBars(console, steps) as bars:
                outcome = run_scenario(loaded, strategies, server, results_dir, bars, options)
            show_outcome(outcome, console)
            outcomes.append(outcome)
    return outcomes


def _check_selection(loaded: LoadedScenario, options: RunOptions) -> None:
    """`harness explain` filters must name what the scenario has."""
    scenario = loaded.scenario
    if not options.timed and scenario.explain is None:
        raise HarnessError(f"{loaded.path}: no explain section; nothing to capture")
    if scenario.explain is None:
        return
    chosen = [
        ("--strategy", options.explain_strategies, scenario.explain_strategies),
        ("--variant", options.explain_variants, [v.name for v in scenario.explain.variants]),
    ]
    for flag, wanted, available in chosen:
        unknown = sorted(set(wanted or []) - set(available))
        if unknown:
            raise HarnessError(f"{flag}: {loaded.path} has no {unknown}; it has {available}")


def _steps(loaded: LoadedScenario, options: RunOptions) -> int:
    scenario = loaded.scenario
    timed = len(plan(scenario)) if options.timed and scenario.timed else 0
    plans = 0
    if options.plans and scenario.explain is not None:
        plans = len(requests(scenario, options.explain_strategies, options.explain_variants))
    return timed + plans


def show_outcome(outcome: RunOutcome, console: Console) -> None:
    if outcome.reference is not None:
        title = f"Beside the reference ({outcome.reference_source})"
        console.print(console_table(title, *reference_rows(outcome.reference)))
    if outcome.summary is not None:
        console.print(
            console_table(
                "Waits and last job done (seconds), range over repetitions",
                *summary_rows(outcome.summary),
            )
        )
    if outcome.plans is not None:
        title = (
            "Dequeue plans: EXPLAIN (ANALYZE, BUFFERS), medians. GLOBAL WALK: "
            f"{WALKS_GLOBAL_INDEX}; SORTS TENANTS: {SORTS_TENANTS}"
        )
        console.print(console_table(title, *plans_rows(outcome.plans, compact=True)))
    console.print(f"Results: {outcome.folder.path}", highlight=False)
