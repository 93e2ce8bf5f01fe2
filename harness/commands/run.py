"""`harness run` and `harness explain`: scenarios on one server, each shown as it ends."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from harness.analysis.thresholds import thresholds_junit
from harness.check.verdict import github_command, on_github
from harness.commands.outcome import show_outcome, show_suite
from harness.commands.progress import ProgressBars
from harness.commands.validate import describe_suite, load_all, scenarios_of
from harness.errors import HarnessError
from harness.queues.catalog import catalog, require
from harness.queues.contract.manifest import load_adapters, replacements
from harness.results.folder import atomic_write, check_results_dir
from harness.run.captures import requests
from harness.run.crew import LOCAL, Placement
from harness.run.faults import refuse_restart
from harness.run.fleet import Fleet, check_fleet_id, faults_refused, open_fleet
from harness.run.repetition import plan
from harness.run.scenario_run import RunOptions, Servers, named_queues, run_scenario
from harness.run.suite import SuiteOutcome, run_suite
from harness.scenario.loader import LoadedScenario, LoadedSuite
from harness.scenario.thresholds import parse_threshold
from harness.server.kinds import ProviderChoice, Server
from harness.server.providers import open_server
from harness.server.schema import check_schema_name

if TYPE_CHECKING:
    from harness.run.render import Rendered


def run_command(
    paths: list[Path],
    choice: ProviderChoice,
    results_dir: Path,
    strategies_dir: Path | None,
    options: RunOptions,
    console: Console,
) -> list[Rendered]:
    """Each scenario in its run folder, on each server of `choice` in turn; a suite's
    scenarios each in theirs, and the suite's tables in a folder of its own."""
    entries = catalog(strategies_dir, options.adapters_dir)
    given = load_all(paths, entries, options.duration_s, options.only_strategies)
    scenarios = scenarios_of(given)
    for loaded in scenarios:
        _check_selection(loaded, options)
        _check_fleet(loaded, options)
        _check_thresholds(loaded, options.thresholds)
    _check_majors(choice, options)
    check_schema_name(options.schema, options.reuse_schema)
    suites = [item.suite.name for item in given if isinstance(item, LoadedSuite)]
    check_results_dir(results_dir, suites + [s.scenario.name for s in scenarios], latest=True)
    for loaded in scenarios:
        refuse_restart(loaded, choice.kind)
    say = partial(console.print, highlight=False, markup=False)
    for replaced in replacements(load_adapters(options.adapters_dir)):
        say(f"Note: {replaced} (run.json records it)")
    for loaded in scenarios:
        for note in loaded.notes:
            say(f"Note: {loaded.scenario.name}: {note}")
    for loaded in scenarios:  # a library or runtime missing: one line, before any server
        require(entries, named_queues(loaded.scenario), str(loaded.path), say)
    if any(loaded.scenario.idle is not None for loaded in scenarios):
        choice = replace(choice, statement_stats=True)  # its idle window's fetches counted
    outcomes: list[Rendered] = []
    ran: list[SuiteOutcome] = []
    with _servers(choice, options, console) as (servers, placement):

        def run_one(loaded: LoadedScenario) -> Rendered:
            steps = _steps(loaded, options) * len(choice.targets)
            console.rule(f"{loaded.scenario.name}: {steps} steps")
            with ProgressBars(console, steps) as bars:
                outcome = run_scenario(
                    loaded, entries, servers, results_dir, bars, options, placement
                )
            show_outcome(outcome, console)
            for line in outcome.failed_thresholds:
                say(f"THRESHOLD FAILED: {line}")
                if on_github():
                    say(github_command("error", f"harness run: {loaded.scenario.name}", line))
            outcomes.append(outcome)
            return outcome

        for item in given:
            if isinstance(item, LoadedSuite):
                console.rule(f"suite {item.suite.name}: {describe_suite(item)}")
                ran.append(run_suite(item, results_dir, run_one))
                show_suite(ran[-1], console)
            else:
                run_one(item)
    if len(outcomes) > 1:
        console.rule("Reports")
        for report in [outcome.report for outcome in outcomes] + [suite.report for suite in ran]:
            console.print(f"{report}", highlight=False)
    return outcomes


def _check_thresholds(loaded: LoadedScenario, given: tuple[str, ...]) -> None:
    """Each --threshold on a figure the scenario measures, before any server starts."""
    for text in given:
        try:
            loaded.scenario.check_threshold(parse_threshold(text))
        except ValueError as error:
            raise HarnessError(f"--threshold: {loaded.path}: {error}") from None


def _check_fleet(loaded: LoadedScenario, options: RunOptions) -> None:
    """A fleet's members need a share of every repetition's workers, and the faults need
    the workers here (they are killed and replaced as processes of this host)."""
    scenario = loaded.scenario
    if options.local_workers and not options.fleet:
        raise HarnessError("--local-workers goes with --fleet N")
    if options.fleet_id is not None:
        check_fleet_id(options.fleet_id, "--fleet-id")
    if not options.fleet or not scenario.timed:
        return
    if scenario.uses_faults or scenario.library_faults:
        raise faults_refused(str(loaded.path))
    remote = min(scenario.workers) - options.local_workers
    if remote < options.fleet:
        raise HarnessError(
            f"{loaded.path}: workers {min(scenario.workers)} leave {remote} for --fleet "
            f"{options.fleet} members (with --local-workers {options.local_workers}); "
            "every member needs at least one"
        )


def _check_majors(choice: ProviderChoice, options: RunOptions) -> None:
    """Several majors run one after the other, on servers of this host."""
    if len(choice.targets) == 1:
        return
    for given, option in ((options.fleet, "--fleet"), (choice.listen, "--listen")):
        if given:
            raise HarnessError(f"{option} goes with one --pg-version, not several")
    if choice.allow_version_mismatch:
        raise HarnessError(
            "--allow-version-mismatch goes with one --pg-version: a run of several keeps "
            "each major's figures apart by the major its server runs"
        )


@contextlib.contextmanager
def _servers(
    choice: ProviderChoice, options: RunOptions, console: Console
) -> Iterator[tuple[Servers, Placement]]:
    """One server for every scenario; or, with several majors, a fresh server of each
    major in turn for each scenario, started when its turn comes."""
    if len(choice.targets) > 1:
        turns = tuple(partial(_started, one, console) for one in choice.each())
        yield Servers(choice.kind, choice.majors, turns), LOCAL
        return
    with _started(choice, console) as server, _placement(server, options, console) as placement:
        yield (
            Servers(choice.kind, choice.majors, (lambda: contextlib.nullcontext(server),)),
            (placement),
        )


@contextlib.contextmanager
def _started(choice: ProviderChoice, console: Console) -> Iterator[Server]:
    console.print(choice.starting, highlight=False)
    with open_server(choice) as server:
        yield server


@contextlib.contextmanager
def _placement(server: Server, options: RunOptions, console: Console) -> Iterator[Placement]:
    """Here, or over a fleet whose members have all joined."""
    if not options.fleet:
        yield LOCAL
        return
    fleet = Fleet(
        server.dsn,
        options.fleet_id or secrets.token_hex(4),
        options.fleet,
        options.local_workers,
        options.fleet_timeout_s,
        member_dsn=server.details.get("tcp_dsn") or server.details.get("dsn") or "URL",
    )
    # A member's host name is its own text: printed as it is, never read as markup; and
    # never wrapped: the line members join by is a command to copy whole, however long
    # its password file's path (TMPDIR) makes it.
    say = partial(console.print, markup=False, highlight=False, soft_wrap=True)
    with open_fleet(fleet, say) as opened:
        yield opened


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


def write_junit(path: Path, outcomes: list[Rendered]) -> None:
    """--junit: every run's thresholds as JUnit XML, written whole, its folder made."""
    data = thresholds_junit(
        [(outcome.document.scenario.name, outcome.tables.thresholds) for outcome in outcomes]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
