"""Measured against ideal: the simulator's schedule of the same workload, as a yardstick.

The ideal of a (strategy, workers) pair is harness.simulate's schedule of the scenario's
generated workload under the strategy's policy with zero claim cost; the "costed" ideal
is the same schedule with the costs of a calibration (harness/analysis/calibration.py):
claims and completions drawn from the measured distributions, idle workers polling.
Both are turned into a jobs table shaped like jobs.csv (times from a fixed epoch), so
the same summarize() reads them; measured / ideal then compares like with like. Pure: no
database, no files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.calibration import Calibration, empty_polls_of, fit_calibration
from harness.analysis.simulate import ZERO_COSTS, Schedule, sim_jobs, simulate
from harness.analysis.waits import summarize
from harness.report.cells import number
from harness.report.sections import Section, Table
from harness.scenario.arrivals import Floats
from harness.scenario.model import Scenario
from harness.scenario.workload import Workload, generate

EPOCH = pd.Timestamp("2000-01-01", tz="UTC")
MAIN_FIGURES = ["wait_p50_s", "wait_p95_s", "makespan_s", "head_wait_p50_s"]


def schedule_jobs(
    scenario: Scenario, workload: Workload, schedule: Schedule, strategy: str, workers: int
) -> pd.DataFrame:
    """A simulated schedule as a jobs table (the columns summarize() needs)."""
    n = workload.total_jobs
    classes = {tenant: info.group for tenant, info in workload.tenants.items()}
    return pd.DataFrame(
        {
            "scenario": scenario.name,
            "strategy": strategy,
            "workers": workers,
            "repetition": 1,
            "job_id": range(1, n + 1),
            "tenant_id": workload.tenant_ids,
            "tenant_class": [classes[tenant] for tenant in workload.tenant_ids.tolist()],
            "enqueued_at": _moments(workload.at_s),
            "started_at": _moments(schedule.start_s),
            "finished_at": _moments(schedule.finish_s),
            "worker": schedule.worker,
            "duration_ms": workload.durations_ms,
            "claim_ms": 0.0,
        }
    )


def _moments(offsets_s: Sequence[float] | Floats) -> pd.DatetimeIndex:
    """Offsets in seconds as timestamps, to the microsecond as jobs.csv has them."""
    micros = (np.asarray(offsets_s, dtype=float) * 1e6).round().astype("int64")
    return EPOCH + pd.to_timedelta(micros, unit="us")


def ideal_summary(
    scenario: Scenario,
    policies: dict[str, str | None],
    calibration: Calibration | None = None,
    workload: Workload | None = None,
) -> pd.DataFrame:
    """summarize() of the simulated schedule of every strategy with a policy and every
    worker count; with a `calibration`, at its costs. `workload`: the scenario's, if the
    caller has generated it already."""
    workload = workload or generate(scenario)
    jobs = simulated_jobs(scenario, workload, policies, scenario.workers, calibration)
    return summarize(jobs) if len(jobs) else pd.DataFrame()


def simulated_jobs(
    scenario: Scenario,
    workload: Workload,
    policies: dict[str, str | None],
    workers: list[int],
    calibration: Calibration | None = None,
) -> pd.DataFrame:
    """The jobs table of each simulated (strategy, workers) pair, one after the other.
    Costs are drawn from the scenario's seed, so a costed schedule is reproducible."""
    jobs = sim_jobs(workload)
    frames = []
    for count in workers:
        for strategy in scenario.strategies:
            policy = policies.get(strategy)
            if policy is None:
                continue
            costs = ZERO_COSTS
            if calibration is not None:
                costs = calibration.costs(strategy, policy, count, scenario.seed)
            schedule = simulate(jobs, policy, count, tenant_cap=scenario.tenant_cap, costs=costs)
            frames.append(schedule_jobs(scenario, workload, schedule, strategy, count))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run_calibration(
    scenario: Scenario,
    policies: dict[str, str | None],
    jobs: pd.DataFrame,
    repetitions: list[dict[str, Any]],
) -> Calibration:
    """A run's calibration: its jobs' costs; `repetitions`: run.json's entries, for the
    empty polls."""
    return fit_calibration(
        jobs, scenario.name, scenario.poll_interval_ms, empty_polls_of(repetitions), policies
    )


def versus_ideal(
    measured: pd.DataFrame, ideal: pd.DataFrame, costed: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per strategy, workers, class and main figure: measured (median over repetitions),
    ideal, measured / ideal, and the same against the costed ideal."""
    keys = ["strategy", "workers", "tenant_class"]
    typical = measured.groupby(keys, sort=False)[MAIN_FIGURES].median()
    table = _long(typical, "measured").merge(
        _long(ideal.set_index(keys)[MAIN_FIGURES], "ideal"), on=[*keys, "figure"]
    )
    table["ratio"] = table["measured"] / table["ideal"].where(table["ideal"] > 0)
    if costed is not None and len(costed):
        costed_long = _long(costed.set_index(keys)[MAIN_FIGURES], "ideal_costed")
        table = table.merge(costed_long, on=[*keys, "figure"], how="left")
        table["ratio_costed"] = table["measured"] / table["ideal_costed"].where(
            table["ideal_costed"] > 0
        )
    return table


def _long(wide: pd.DataFrame, name: str) -> pd.DataFrame:
    stacked: pd.Series = wide.rename_axis(columns="figure").stack()  # type: ignore[assignment]
    return stacked.rename(name).reset_index()


IDEAL_NOTE = (
    "Ideal: the simulator's schedule of the same jobs under the strategy's policy, "
    "workers never idle while a job is free, zero claim cost (harness/analysis/simulate.py); "
    "costed: the same jobs at the run's own costs (calibration.json: claims and "
    "completions drawn from the measured distributions, idle workers polling). Measured: "
    "median over repetitions. Ratios are left out where the ideal is 0."
)


def ideal_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    costed = "ideal_costed" in table
    headers = ["strategy", "workers", "tenants", "figure", "measured", "ideal", "measured/ideal"]
    headers += ["ideal, costed", "measured/costed"] if costed else []
    rows = []
    for record in table.to_dict("records"):
        row = [
            record["strategy"],
            str(record["workers"]),
            record["tenant_class"],
            record["figure"],
            number(record["measured"]),
            number(record["ideal"]),
            number(record["ratio"]),
        ]
        if costed:
            row += [number(record["ideal_costed"]), number(record["ratio_costed"])]
        rows.append(row)
    return headers, rows


def ideal_section(table: pd.DataFrame) -> Section:
    """Every figure in documents; the terminal shows the p50 waits and makespans."""
    main = table[table["figure"].isin(["wait_p50_s", "makespan_s"])]
    console = Table.of(
        ideal_rows(main), "Measured against the ideal schedule (seconds; all figures: ideal.csv)"
    )
    return Section(
        "ideal",
        "Against the ideal schedule",
        IDEAL_NOTE,
        tables=[Table.of(ideal_rows(table))],
        console=[console],
    )
