"""`harness simulate`: the ideal schedule of a scenario, without a database."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from rich.console import Console

from harness.analysis.fairness import fairness_rows, jain_rows, repetition_fairness, tenant_table
from harness.analysis.ideal import simulated_jobs
from harness.analysis.waits import summarize, summary_rows, with_waits
from harness.errors import HarnessError
from harness.queues.sql.strategies import load_strategies
from harness.report.console import console_table
from harness.results.folder import atomic_write
from harness.scenario.loader import load_scenario
from harness.scenario.workload import generate


def simulate_command(
    path: Path,
    workers: list[int] | None,
    strategies_dir: Path | None,
    out: Path | None,
    console: Console,
) -> pd.DataFrame:
    """The ideal schedule of a scenario, without a database: summary, fairness, timing."""
    strategies = load_strategies(strategies_dir)
    scenario = load_scenario(path, {n: s.traits for n, s in strategies.items()}).scenario
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
