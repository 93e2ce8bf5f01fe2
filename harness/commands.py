"""What each CLI command does, as plain functions over validated models."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from harness.analysis import summarize, with_waits
from harness.bench import RunOptions, run_scenario
from harness.check import (
    BASELINE_FORMAT_VERSION,
    CheckSettings,
    Finding,
    Probe,
    baseline_document,
    compare,
    probes_from,
)
from harness.compare import compare_runs, comparison_rows
from harness.errors import HarnessError
from harness.explain import requests
from harness.fairness import repetition_fairness, tenant_table
from harness.ideal import simulated_jobs
from harness.isolation import (
    POOLS,
    TABLE_HEADERS,
    IsolationSettings,
    PoolKind,
    run_isolation,
    set_local_leaked,
    table_rows,
    write_results,
)
from harness.metadata import collect_all
from harness.overhead import (
    Measurement,
    OverheadSettings,
    goals,
    overhead_document,
    run_overhead,
    summarise,
)
from harness.pgbouncer import pgbouncer_version
from harness.plots import FORMATS, compare_ecdf, encode
from harness.probing import measure
from harness.progress import ProgressBars
from harness.providers import ProviderChoice, choose_provider, open_server
from harness.render import Rendered, render_run
from harness.report import (
    FLAG_LEGEND,
    bloat_rows,
    console_table,
    fairness_rows,
    fault_rows,
    findings_rows,
    ideal_rows,
    jain_rows,
    junit_xml,
    markdown_table,
    overhead_rows,
    plans_rows,
    property_rows,
    reference_rows,
    summary_rows,
)
from harness.results import RunFolder, atomic_write, load_jobs
from harness.runner import own_schema, plan
from harness.scenario import LoadedScenario, load_scenario
from harness.strategies import Strategy, load_strategies
from harness.workload import count_jobs, generate


def load_all(paths: list[Path], strategies_dir: Path | None) -> list[LoadedScenario]:
    """Every scenario validated before anything runs: a typo in the last file costs nothing."""
    names = set(load_strategies(strategies_dir))
    return [load_scenario(path, names) for path in paths]


_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _check_schema_name(options: RunOptions) -> None:
    if options.reuse_schema and options.schema is None:
        raise HarnessError("--reuse-schema needs --schema: the schema to take over")
    if options.schema is None:
        return
    if not _SCHEMA_NAME.fullmatch(options.schema) or options.schema.startswith("pg_"):
        raise HarnessError(
            f"--schema: '{options.schema}' is not allowed; use lowercase letters, digits "
            "and _, starting with a letter or _, at most 63 characters, not pg_..."
        )


def validate_command(paths: list[Path], strategies_dir: Path | None, console: Console) -> None:
    for loaded in load_all(paths, strategies_dir):
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
) -> list[Rendered]:
    strategies = load_strategies(strategies_dir)
    scenarios = [load_scenario(path, set(strategies)) for path in paths]
    for loaded in scenarios:
        _check_selection(loaded, options)
    _check_schema_name(options)
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


def show_outcome(outcome: Rendered, console: Console) -> None:
    if outcome.reference is not None:
        title = f"Beside the reference ({outcome.tables.reference_source})"
        console.print(console_table(title, *reference_rows(outcome.reference)))
    if outcome.summary is not None:
        console.print(
            console_table(
                "Waits and last job done (seconds), range over repetitions",
                *summary_rows(outcome.summary),
            )
        )
    if outcome.tables.fairness is not None and len(outcome.tables.fairness):
        title = "Fairness: Jain's index over tenants' slowdowns (1 = all alike)"
        console.print(console_table(title, *jain_rows(outcome.tables.fairness)))
    ideal = outcome.tables.ideal
    if ideal is not None and len(ideal):
        main = ideal[ideal["figure"].isin(["wait_p50_s", "makespan_s"])]
        title = "Measured against the ideal schedule (seconds; all figures: ideal.csv)"
        console.print(console_table(title, *ideal_rows(main)))
    if outcome.tables.faults is not None:
        title = "Faults: lost, duplicated, stuck, dead-lettered, recovery (s) per repetition"
        console.print(console_table(title, *fault_rows(outcome.tables.faults)))
    if outcome.tables.bloat is not None:
        title = "Long transaction: claim latency and bloat before, during and after the hold"
        console.print(console_table(title, *bloat_rows(outcome.tables.bloat)))
    if outcome.plans is not None:
        title = f"Dequeue plans: EXPLAIN (ANALYZE, BUFFERS), medians. {FLAG_LEGEND}"
        console.print(console_table(title, *plans_rows(outcome.plans, compact=True)))
    if outcome.tables.properties is not None:
        console.print(
            console_table(
                "Properties checked from the recorded data",
                *property_rows(outcome.tables.properties),
            )
        )
    console.print(f"Results: {outcome.folder.path}", highlight=False)
    console.print(f"Report: {outcome.report}", highlight=False)


def report_command(run: Path, console: Console) -> Rendered:
    """Rebuild every derived file of a run folder from its raw files."""
    if not (run / "run.json").is_file():
        raise HarnessError(f"{run}: not a run folder (no run.json)")
    try:
        rendered = render_run(RunFolder(path=run, run_id=run.name))
    except (ValueError, KeyError, OSError) as error:
        raise HarnessError(f"{run}: cannot render: {error}") from error
    show_outcome(rendered, console)
    return rendered


def compare_command(
    first: Path, second: Path, out: Path, factor: float, alpha: float, console: Console
) -> None:
    """Two runs side by side: medians and p95 per strategy and class, flagged changes."""
    runs = [_jobs_of(run) for run in (first, second)]
    table = compare_runs(runs[0], runs[1], factor, alpha)
    headers, rows = comparison_rows(table)
    title = f"Waits, A = {first} -> B = {second}"
    console.print(console_table(title, headers, rows))
    try:
        out.mkdir(parents=True, exist_ok=False)
    except FileExistsError as error:
        raise HarnessError(f"{out} exists; results are never overwritten: pass --out") from error
    atomic_write(out / "compare.csv", table.to_csv(index=False).encode())
    atomic_write(out / "compare.md", f"# {title}\n\n{markdown_table(headers, rows)}".encode())
    figure = compare_ecdf(runs[0], runs[1], (f"A {first.name}", f"B {second.name}"))
    for form in FORMATS:
        atomic_write(out / f"waits.{form}", encode(figure, form))
    console.print(f"Comparison: {out}", highlight=False)


def isolation_command(
    settings: IsolationSettings,
    pool: str,
    strict: bool,
    choice: ProviderChoice,
    results_dir: Path,
    console: Console,
) -> int:
    """SET and SET LOCAL through each pool; with `strict`, exit 1 if SET LOCAL leaked."""
    pools = _pools(pool)
    console.print(f"Starting PostgreSQL ({choice.kind})...", highlight=False)
    with open_server(choice) as server:
        results = run_isolation(server.dsn, settings, pools)
        metadata = collect_all(server.dsn, {"kind": server.provider, **server.details})
    if "pgbouncer" in pools:
        metadata["pgbouncer"] = pgbouncer_version()
    folder = write_results(results_dir, settings, results, metadata)
    title = f"Tenant isolation: SET vs SET LOCAL ({settings.jobs} jobs per pool and mode)"
    console.print(console_table(title, TABLE_HEADERS, table_rows(results)))
    console.print(f"Results: {folder.path}", highlight=False)
    leaked = set_local_leaked(results)
    if leaked:
        console.print("SET LOCAL leaked: see jobs.csv", highlight=False)
    return 1 if strict and leaked else 0


def _pools(pool: str) -> list[PoolKind]:
    if pool == "all":
        return list(POOLS)
    if pool not in POOLS:
        raise HarnessError(f"--pool: unknown pool '{pool}'; allowed: {', '.join(POOLS)}, all")
    return [pool]  # type: ignore[list-item]  # checked against POOLS just above


def _jobs_of(run: Path) -> pd.DataFrame:
    if not (run / "jobs.csv").is_file():
        raise HarnessError(f"{run}: no jobs.csv; compare needs two runs with timed workloads")
    return load_jobs(run)


@dataclass(frozen=True)
class CheckRequest:
    baseline: Path
    probes: Path
    settings: CheckSettings
    update_baseline: bool = False
    markdown: Path | None = None
    junit: Path | None = None


def check_command(
    request: CheckRequest,
    pg: str | None,
    dsn: str | None,
    allow_mismatch: bool,
    strategies_dir: Path | None,
    console: Console,
) -> int:
    """Measure the probes, compare with the baseline; the exit code says if it regressed."""
    strategies = load_strategies(strategies_dir)
    probes = load_scenario(request.probes, set(strategies))
    old = _old_baseline(request, probes, console)
    choice = choose_provider(pg, dsn, os.environ, allow_mismatch)
    started = time.monotonic()
    measured, metadata = _measure_probes(choice, probes, strategies, request, console)
    findings = compare(old, measured, request.settings) if old is not None else []
    _show_findings(findings, request, console, time.monotonic() - started)
    if request.update_baseline:
        document = baseline_document(
            measured, request.settings, str(request.probes), probes.sha256, metadata
        )
        request.baseline.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(request.baseline, (json.dumps(document, indent=2) + "\n").encode())
        console.print(f"Baseline written: {request.baseline}", highlight=False)
        return 0
    return 1 if any(f.verdict == "regression" for f in findings) else 0


def _measure_probes(
    choice: ProviderChoice,
    probes: LoadedScenario,
    strategies: dict[str, Strategy],
    request: CheckRequest,
    console: Console,
) -> tuple[list[Probe], dict[str, Any]]:
    schema = f"harness_check_{os.getpid()}"
    with open_server(choice) as server:
        with (
            ProgressBars(console, len(requests(probes.scenario))) as bars,
            own_schema(server.dsn, schema),
        ):
            measured = list(
                measure(
                    server.dsn, schema, probes.scenario, strategies, request.settings.samples, bars
                )
            )
        return measured, collect_all(server.dsn, {"kind": server.provider, **server.details})


def _old_baseline(
    request: CheckRequest, probes: LoadedScenario, console: Console
) -> list[Probe] | None:
    """The baseline to compare with; when updating, one that cannot be compared is only
    reported, since replacing it is the point."""
    if not request.update_baseline:
        return read_baseline(request.baseline, probes)
    if not request.baseline.exists():
        return None
    try:
        return read_baseline(request.baseline, probes)
    except HarnessError as error:
        console.print(f"The old baseline is not comparable: {error}", highlight=False)
        return None


def read_baseline(path: Path, probes: LoadedScenario) -> list[Probe]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise HarnessError(
            f"{path}: cannot read the baseline ({error}); make one with "
            "harness check --update-baseline"
        ) from error
    version = document.get("format_version") if isinstance(document, dict) else None
    if version != BASELINE_FORMAT_VERSION:
        raise HarnessError(
            f"{path}: baseline format_version {version}; this harness reads "
            f"{BASELINE_FORMAT_VERSION}"
        )
    if document.get("probes_sha256") != probes.sha256:
        raise HarnessError(
            f"{path}: made with other probes than {probes.path}; make a new "
            "one with harness check --update-baseline"
        )
    try:
        return probes_from(document)
    except (KeyError, TypeError) as error:
        raise HarnessError(f"{path}: a probe entry is malformed ({error})") from error


def _show_findings(
    findings: list[Finding], request: CheckRequest, console: Console, seconds: float
) -> None:
    headers, rows = findings_rows(findings)
    if findings:
        console.print(console_table("Dequeue against the baseline", headers, rows))
    regressions = [f for f in findings if f.verdict == "regression"]
    for finding in regressions:
        console.print(
            f"REGRESSION: {finding.message}", highlight=False, markup=False, soft_wrap=True
        )
    verdict = f"{len(regressions)} regression(s)" if regressions else "no regression"
    console.print(
        f"harness check: {verdict} ({len(findings)} figures, {seconds:.0f} s)", highlight=False
    )
    if request.markdown is not None:
        lines = "".join(f"- REGRESSION: {finding.message}\n" for finding in regressions)
        text = f"## harness check: {verdict}\n\n{markdown_table(headers, rows)}\n{lines}"
        atomic_write(request.markdown, text.encode())
    if request.junit is not None:
        atomic_write(request.junit, junit_xml(findings))


def simulate_command(
    path: Path,
    workers: list[int] | None,
    strategies_dir: Path | None,
    out: Path | None,
    console: Console,
) -> pd.DataFrame:
    """The ideal schedule of a scenario, without a database: summary, fairness, timing."""
    strategies = load_strategies(strategies_dir)
    scenario = load_scenario(path, set(strategies)).scenario
    if not scenario.timed:
        raise HarnessError(f"{path}: nothing to simulate: the scenario has no tenant_groups")
    policies = {name: strategies[name].simulate_as for name in scenario.strategies}
    unsimulated = [name for name, policy in policies.items() if policy is None]
    if unsimulated:
        raise HarnessError(
            f"strategies {unsimulated} have no simulation policy; add a `-- simulate: "
            "POLICY` header to their file (fifo, round_robin, round_robin_active, ...)"
        )
    if out is not None and out.exists():
        raise HarnessError(f"{out} exists; results are never overwritten")
    began = time.perf_counter()
    workload = generate(scenario)
    jobs = simulated_jobs(scenario, workload, policies, workers or scenario.workers)
    tenants = tenant_table(with_waits(jobs))
    summary = summarize(jobs, tenants)
    elapsed = time.perf_counter() - began
    console.print(console_table(f"Ideal schedule: {scenario.name}", *summary_rows(summary)))
    console.print(console_table("Fairness", *fairness_rows(summary)))
    console.print(console_table("Fairness", *jain_rows(repetition_fairness(tenants))))
    console.print(
        f"{workload.total_jobs:,} jobs of {len(workload.tenants):,} tenants, "
        f"{len(summary.groupby(['strategy', 'workers']))} schedules, in {elapsed:.1f} s",
        highlight=False,
    )
    if out is not None:
        atomic_write(out, summary.to_csv(index=False).encode())
        console.print(f"Summary: {out}", highlight=False)
    return summary


def overhead_command(
    settings: OverheadSettings,
    pg: str | None,
    dsn: str | None,
    allow_mismatch: bool,
    results_dir: Path,
    strategies_dir: Path | None,
    strict: bool,
    console: Console,
) -> int:
    """The workers against pgbench on the same claim SQL; 1 only if --strict and a goal
    is missed."""
    strategies = load_strategies(strategies_dir)
    if settings.strategy not in strategies:
        raise HarnessError(
            f"--strategy: unknown strategy '{settings.strategy}'; available: {sorted(strategies)}"
        )
    strategy = strategies[settings.strategy]
    choice = choose_provider(pg, dsn, os.environ, allow_mismatch)
    console.print(f"Starting PostgreSQL ({choice.kind})...", highlight=False)
    with open_server(choice) as server:
        schema = f"harness_overhead_{os.getpid()}"
        with own_schema(server.dsn, schema):
            measured = run_overhead(
                server.dsn, schema, strategy, settings, lambda m: _show_measurement(m, console)
            )
        metadata = collect_all(server.dsn, {"kind": server.provider, **server.details})
    summaries = summarise(measured, settings)
    headers, rows = overhead_rows(summaries)
    title = (
        f"Client overhead: harness workers against pgbench ({settings.strategy}, "
        f"{settings.clients} clients, median and range of {settings.rounds} rounds)"
    )
    console.print(console_table(title, headers, rows))
    reached = goals(summaries)
    for goal in reached:
        console.print(goal.message, highlight=False, markup=False)
    folder = RunFolder.create(results_dir, "overhead")
    folder.write_json("overhead.json", overhead_document(settings, strategy, measured, metadata))
    lines = "".join(f"- {goal.message}\n" for goal in reached)
    # Other work on the machine moves both arms' figures far more than the goals allow.
    load = ", ".join(f"{value:.2f}" for value in metadata["host"]["load_average"])
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
