"""`harness run` and `harness explain`: scenarios on one server, each shown as it ends."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from harness.commands.outcome import show_outcome
from harness.commands.progress import ProgressBars
from harness.commands.validate import load_all
from harness.errors import HarnessError
from harness.queues.catalog import catalog
from harness.run.captures import requests
from harness.run.render import Rendered
from harness.run.repetition import plan
from harness.run.scenario_run import RunOptions, run_scenario
from harness.scenario.loader import LoadedScenario
from harness.server.providers import choose_provider, open_server
from harness.server.schema import check_schema_name


def run_command(
    paths: list[Path],
    pg: str | None,
    dsn: str | None,
    allow_mismatch: bool,
    results_dir: Path,
    strategies_dir: Path | None,
    options: RunOptions,
    console: Console,
) -> list[Rendered]:
    entries = catalog(strategies_dir)
    scenarios = load_all(paths, entries)
    for loaded in scenarios:
        _check_selection(loaded, options)
    check_schema_name(options.schema, options.reuse_schema)
    choice = choose_provider(pg, dsn, os.environ, allow_mismatch)
    outcomes = []
    console.print(f"Starting PostgreSQL ({choice.kind})...", highlight=False)
    with open_server(choice) as server:
        for loaded in scenarios:
            steps = _steps(loaded, options)
            console.rule(f"{loaded.scenario.name}: {steps} steps")
            with ProgressBars(console, steps) as bars:
                outcome = run_scenario(loaded, entries, server, results_dir, bars, options)
            show_outcome(outcome, console)
            outcomes.append(outcome)
    if len(outcomes) > 1:
        console.rule("Reports")
        for outcome in outcomes:
            console.print(f"{outcome.report}", highlight=False)
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
