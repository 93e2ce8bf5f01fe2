"""`harness simulate`: the ideal schedule of a scenario, without a database; with
`--calibration RUN_DIR`, the schedule at the costs measured in that run, and with
`--measured RUN_DIR`, that prediction beside what a run of the scenario measured."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import yaml
from rich.console import Console

from harness.analysis.calibration import Calibration, CalibrationDocument, against_prediction
from harness.analysis.fairness import fairness_rows, jain_rows, repetition_fairness, tenant_table
from harness.analysis.ideal import run_calibration, simulated_jobs
from harness.analysis.waits import summarize, summary_rows, with_waits
from harness.errors import HarnessError
from harness.queues.catalog import catalog, traits
from harness.report.cells import number
from harness.report.console import console_table
from harness.results.document import load_document, refuse_several_majors
from harness.results.folder import atomic_write
from harness.results.jobs import load_jobs
from harness.scenario.loader import load_scenario
from harness.scenario.model import Scenario
from harness.scenario.workload import generate, tenant_owners


def simulate_command(
    path: Path,
    workers: list[int] | None,
    strategies_dir: Path | None,
    out: Path | None,
    console: Console,
    calibration_dir: Path | None = None,
    measured_dir: Path | None = None,
    fit_repetitions: list[int] | None = None,
) -> pd.DataFrame:
    """The ideal (or calibrated) schedule of a scenario, without a database: summary,
    fairness, timing; beside a run's measured figures if asked."""
    scenario, policies = _scenario_and_policies(path, strategies_dir)
    if out is not None and out.exists():
        raise HarnessError(f"{out} exists; results are never overwritten")
    for run, option in ((calibration_dir, "--calibration"), (measured_dir, "--measured")):
        if run is not None:
            refuse_several_majors(run, option)
    calibration = None
    if calibration_dir is not None:
        calibration = _calibration(calibration_dir, fit_repetitions)
    elif fit_repetitions:
        raise HarnessError("--fit-repetition needs --calibration RUN_DIR")
    measured = None
    if measured_dir is not None:
        measured = _measured_summary(measured_dir)
        if fit_repetitions and calibration_dir is not None and _same(measured_dir, calibration_dir):
            measured = _left_out(measured, fit_repetitions, measured_dir)
    counts = workers or scenario.workers
    summary = _simulate_and_show(console, scenario, policies, counts, calibration)
    if calibration is not None and calibration_dir is not None:
        _print_sources(console, calibration, calibration_dir, policies, counts)
    if measured is not None and measured_dir is not None:
        table = against_prediction(measured, summary)
        console.print(f"Measured: {measured_dir}/summary.csv", highlight=False)
        console.print(console_table("Measured / predicted", *_rows(table)), crop=False)
    if out is not None:
        atomic_write(out, summary.to_csv(index=False).encode())
        console.print(f"Summary: {out}", highlight=False)
    return summary


def _scenario_and_policies(
    path: Path, strategies_dir: Path | None
) -> tuple[Scenario, dict[str, str | None]]:
    """The timed scenario, and the simulation policy of each of its strategies."""
    entries = catalog(strategies_dir)
    scenario = load_scenario(path, traits(entries)).scenario
    if not scenario.timed:
        raise HarnessError(f"{path}: nothing to simulate: the scenario has no tenant_groups")
    policies = {name: entries[name].simulate_as for name in scenario.strategies}
    unsimulated = [name for name, policy in policies.items() if policy is None]
    if unsimulated:
        raise HarnessError(
            f"{path}: strategies {unsimulated} have no simulation policy (a strategy file "
            "takes one in a `-- simulate: POLICY` header: fifo, round_robin, "
            "round_robin_active, ...; the queue libraries have none)"
        )
    return scenario, policies


def _simulate_and_show(
    console: Console,
    scenario: Scenario,
    policies: dict[str, str | None],
    counts: list[int],
    calibration: Calibration | None,
) -> pd.DataFrame:
    """Every (strategy, workers) schedule, summarized and printed with how long it took."""
    began = time.perf_counter()
    workload = generate(scenario)
    jobs = simulated_jobs(scenario, workload, policies, counts, calibration)
    tenants = tenant_table(with_waits(jobs), tenant_owners(scenario))
    summary = summarize(jobs, tenants)
    elapsed = time.perf_counter() - began
    kind = "Ideal schedule" if calibration is None else "Calibrated schedule"
    console.print(console_table(f"{kind}: {scenario.name}", *summary_rows(summary)), crop=False)
    console.print(console_table("Fairness", *fairness_rows(summary)), crop=False)
    console.print(console_table("Fairness", *jain_rows(repetition_fairness(tenants))), crop=False)
    console.print(
        f"{workload.total_jobs:,} jobs of {len(workload.tenants):,} tenants, "
        f"{len(summary.groupby(['strategy', 'workers']))} schedules, in {elapsed:.1f} s",
        highlight=False,
    )
    return summary


def load_calibration(run: Path) -> Calibration:
    """A run folder's calibration.json (derived: `harness report RUN_DIR` writes it)."""
    path = run / "calibration.json"
    if not path.exists():
        raise HarnessError(
            f"{path}: no such file; `harness report {run}` writes it for a run of a timed "
            "scenario whose strategies have simulation policies"
        )
    return CalibrationDocument.read(path).calibration(str(path))


def _calibration(run: Path, repetitions: list[int] | None) -> Calibration:
    """The run's calibration.json, or, for some of its repetitions, one fitted afresh from
    its raw files as `harness report` fits it from all of them."""
    if not repetitions:
        return load_calibration(run)
    document = load_document(run)
    policies = document.simulation
    if not policies:
        raise HarnessError(f"{run}/run.json: no simulation policies recorded; nothing to fit")
    scenario = Scenario.model_validate(yaml.safe_load((run / "scenario.yaml").read_text()))
    jobs = load_jobs(run)
    jobs = jobs[jobs["repetition"].isin(repetitions)]
    if jobs.empty:
        raise HarnessError(f"{run}/jobs.csv: no jobs of repetitions {sorted(repetitions)}")
    entries = [e.model_dump() for e in document.repetitions if e.repetition in repetitions]
    return run_calibration(scenario, policies, jobs, entries)


def _same(one: Path, other: Path) -> bool:
    return one.resolve() == other.resolve()


def _left_out(summary: pd.DataFrame, repetitions: list[int], run: Path) -> pd.DataFrame:
    """The repetitions the calibration was not fitted on: a prediction of other data."""
    rest = summary[~summary["repetition"].isin(repetitions)]
    if rest.empty:
        raise HarnessError(f"{run}: every repetition was used to fit; none is left to compare")
    return rest


def _measured_summary(run: Path) -> pd.DataFrame:
    path = run / "summary.csv"
    if not path.exists():
        raise HarnessError(f"{path}: no such file; `harness report {run}` writes it")
    return pd.read_csv(path)


def _print_sources(
    console: Console,
    calibration: Calibration,
    run: Path,
    policies: dict[str, str | None],
    counts: list[int],
) -> None:
    """Which measured costs each simulated pair drew from, where it was not its own."""
    console.print(f"Costs: {run}/calibration.json ({calibration.scenario})", highlight=False)
    for strategy, policy in policies.items():
        source = calibration.stand_in(strategy, policy)
        if source != strategy:
            console.print(f"  {strategy}: not calibrated; takes {source}'s costs", highlight=False)
        measured = {pair.workers for pair in calibration.pairs if pair.strategy == source}
        for count in sorted(set(counts) - measured):
            console.print(
                f"  {strategy} x{count}: not measured; {source}'s costs moved along its "
                "growth line",
                highlight=False,
            )


def _rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = ["strategy", "workers", "tenants", "figure", "measured", "predicted", "ratio"]
    # ! marks a figure the target holds (makespan; p50 wait above 0.5 s) off by over 5 %
    rows = [
        [
            record["strategy"],
            str(record["workers"]),
            record["tenant_class"],
            record["figure"],
            number(record["measured"]),
            number(record["predicted"]),
            f"{record['ratio']:.3f}" + ("" if record["within"] or not record["target"] else " !"),
        ]
        for record in table.to_dict("records")
    ]
    return headers, rows
