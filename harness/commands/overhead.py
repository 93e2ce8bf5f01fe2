"""`harness overhead`: the workers against pgbench on the same claim SQL."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from harness.errors import HarnessError
from harness.experiments.overhead import (
    Measurement,
    OverheadSettings,
    goals,
    overhead_document,
    overhead_headline,
    overhead_rows,
    run_overhead,
    summarise,
)
from harness.queues.sql.strategies import Strategy, load_strategies
from harness.report.console import console_table
from harness.report.sections import markdown_table
from harness.results.folder import RunFolder, check_results_dir
from harness.results.headline import Results, results_document
from harness.server.kinds import ProviderChoice
from harness.server.provenance import collect_all
from harness.server.providers import open_server
from harness.server.schema import own_schema


def overhead_command(
    settings: OverheadSettings,
    choice: ProviderChoice,
    results_dir: Path,
    strategies_dir: Path | None,
    strict: bool,
    console: Console,
) -> int:
    """The workers against pgbench on the same claim SQL, on each server of `choice` in
    turn, each in a folder of its own; 1 only if --strict and a goal is missed."""
    strategies = load_strategies(strategies_dir)
    if settings.strategy not in strategies:
        raise HarnessError(
            f"--strategy: unknown strategy '{settings.strategy}'; available: {sorted(strategies)}"
        )
    check_results_dir(results_dir, ["overhead"])  # its folder is made once it has measured
    strategy = strategies[settings.strategy]
    codes = [
        _overhead_on(one, settings, strategy, results_dir, strict, console) for one in choice.each()
    ]
    return max(codes)


def _overhead_on(
    choice: ProviderChoice,
    settings: OverheadSettings,
    strategy: Strategy,
    results_dir: Path,
    strict: bool,
    console: Console,
) -> int:
    console.print(choice.starting, highlight=False)
    started_at = datetime.now(UTC)
    with open_server(choice) as server:
        schema = f"harness_overhead_{os.getpid()}"
        with own_schema(server.dsn, schema) as owned:
            measured = run_overhead(
                server.dsn, schema, strategy, settings, lambda m: _show_measurement(m, console)
            )
        if owned.left:
            console.print(f"warning: {owned.left}", highlight=False, markup=False)
        metadata = collect_all(server.dsn, {"kind": server.provider, **server.details})
    summaries = summarise(measured, settings)
    headers, rows = overhead_rows(summaries)
    title = (
        f"Client overhead: harness workers against pgbench ({settings.strategy}, "
        f"{settings.clients} clients, median and range of {settings.rounds} rounds)"
    )
    console.print(console_table(title, headers, rows), crop=False)
    reached = goals(summaries)
    for goal in reached:
        console.print(goal.message, highlight=False, markup=False)
    folder = RunFolder.create(results_dir, "overhead")
    document = overhead_document(settings, strategy, measured, metadata)
    document.write(folder.path / document.NAME)
    results_document(
        run_id=folder.run_id,
        kind="overhead",
        name="overhead",
        status="goals met" if all(goal.met for goal in reached) else "goal missed",
        started_at=started_at.isoformat(),
        metadata=metadata,
        figures=overhead_headline(measured, settings),
    ).write(folder.path / Results.NAME)
    lines = "".join(f"- {goal.message}\n" for goal in reached)
    # Other work on the machine moves both arms' figures far more than the goals allow.
    averages = metadata["host"]["load_average"]
    load = ", ".join(f"{value:.2f}" for value in averages) if averages else "not kept here"
    lines += f"\nHost load average (1, 5, 15 min) when it finished: {load}\n"
    folder.write("overhead.md", f"# {title}\n\n{markdown_table(headers, rows)}\n{lines}")
    console.print(f"Results: {folder.path}", highlight=False)
    return 1 if strict and not all(goal.met for goal in reached) else 0


def _show_measurement(m: Measurement, console: Console) -> None:
    console.print(
        f"round {m.round}, {m.work_ms} ms jobs, {m.arm}: {m.jobs} jobs in {m.makespan_s:.3f} s, "
        f"{m.throughput:,.0f} jobs/s, claim {m.claim_ms:.3f} ms",
        highlight=False,
    )
