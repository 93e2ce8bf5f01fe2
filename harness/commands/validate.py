"""`harness validate`: every scenario checked, nothing run."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from rich.console import Console

from harness.queues.base import QueueEntry
from harness.queues.catalog import catalog, traits
from harness.run.captures import requests
from harness.run.repetition import plan
from harness.scenario.loader import LoadedScenario, LoadedSuite, load_any
from harness.scenario.workload import count_jobs


def load_all(
    paths: list[Path],
    entries: dict[str, QueueEntry],
    duration_s: float | None = None,
    only: Sequence[str] = (),
) -> list[LoadedScenario | LoadedSuite]:
    """Every scenario validated before anything runs: a typo in the last file costs
    nothing. A suite's scenarios are each validated too; `duration_s` stretches each
    one's horizon (harness run --duration), `only` keeps those strategies of each
    (harness run --strategy)."""
    return [load_any(path, traits(entries), duration_s, only) for path in paths]


def scenarios_of(loaded: list[LoadedScenario | LoadedSuite]) -> list[LoadedScenario]:
    """The scenarios to run, a suite's in its order."""
    return [
        scenario
        for item in loaded
        for scenario in (item.cases if isinstance(item, LoadedSuite) else [item])
    ]


def validate_command(
    paths: list[Path],
    strategies_dir: Path | None,
    console: Console,
    adapters_dir: Path | None = None,
) -> None:
    say = partial(console.print, highlight=False, soft_wrap=True, markup=False)
    for loaded in load_all(paths, catalog(strategies_dir, adapters_dir)):
        if isinstance(loaded, LoadedSuite):
            say(f"{loaded.path}: ok ({describe_suite(loaded)})")
            for case, scenario in zip(loaded.suite.suite, loaded.cases, strict=True):
                say(f"  {case.fault}: {scenario.path}: ok ({describe(scenario)})")
        else:
            say(f"{loaded.path}: ok ({describe(loaded)})")


def describe_suite(loaded: LoadedSuite) -> str:
    """A suite's run: how many scenarios, how many repetitions in all."""
    repetitions = sum(len(plan(case.scenario)) for case in loaded.cases if case.scenario.timed)
    return (
        f"a suite of {len(loaded.cases)} scenarios, {repetitions} repetitions in all: "
        + ", ".join(case.fault for case in loaded.suite.suite)
    )


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
        explained = ", each library's fetches explained" if hold.explain_fetches else ""
        parts.append(f"a transaction held from {hold.from_s:g} s for {hold.for_s:g} s{explained}")
    return "; ".join(parts)
