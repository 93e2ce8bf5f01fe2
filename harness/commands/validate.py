"""`harness validate`: every scenario checked, nothing run."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.queues.base import QueueEntry
from harness.queues.catalog import catalog, traits
from harness.run.captures import requests
from harness.run.repetition import plan
from harness.scenario.loader import LoadedScenario, load_scenario
from harness.scenario.workload import count_jobs


def load_all(paths: list[Path], entries: dict[str, QueueEntry]) -> list[LoadedScenario]:
    """Every scenario validated before anything runs: a typo in the last file costs nothing."""
    return [load_scenario(path, traits(entries)) for path in paths]


def validate_command(
    paths: list[Path],
    strategies_dir: Path | None,
    console: Console,
    adapters_dir: Path | None = None,
) -> None:
    for loaded in load_all(paths, catalog(strategies_dir, adapters_dir)):
        console.print(f"{loaded.path}: ok ({describe(loaded)})", highlight=False, soft_wrap=True)


def describe(loaded: LoadedScenario) -> str:
    """What a run of the scenario does: jobs and repetitions, captures, a held snapshot."""
    scenario = loaded.scenario
    parts = []
    if scenario.timed:
        parts.append(
            f"{count_jobs(scenario):,} jobs per repetition, {len(plan(scenario))} repetitions"
        )
    if scenario.explain is not None:
        parts.append(f"{len(requests(scenario))} plan captures")
    if scenario.long_transaction is not None:
        hold = scenario.long_transaction
        parts.append(f"a transaction held from {hold.from_s:g} s for {hold.for_s:g} s")
    return "; ".join(parts)
