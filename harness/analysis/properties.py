"""Properties of a strategy, checked from the recorded data, not by reading its SQL (pure).

Each check takes one repetition's jobs (and the monitor's samples) and says what it
measured, the bound it must stay within, and whether it held:
  never_stranded  no queued job whose tenant is missing from queue_tenants, in any
                  sample the runner took while the workers ran (bound: 0 s)
  weighted_share  while every tenant still has queued jobs, claims per unit of weight
                  are equal to within 10 % (max / min of claims/weight <= 1.10)
  tenant_cap      the most jobs of one tenant running at once, from the started/finished
                  intervals, is at most the scenario's tenant_cap
  priority_order  for each job, the lower-priority jobs that started after it was
                  enqueued and before it started: at most one per worker (claims
                  already in flight when it was enqueued)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.report.cells import number
from harness.report.sections import Section, Table
from harness.scenario.model import Scenario
from harness.scenario.workload import tenant_ranges

SHARE_TOLERANCE = 0.10


@dataclass(frozen=True)
class Verdict:
    measured: float | None  # None: the check does not apply to this strategy
    bound: float
    held: bool | None
    detail: str = ""


def never_stranded(samples: pd.DataFrame) -> Verdict:
    """samples: elapsed_s, stranded (jobs), oldest_age_s, as the monitor block returned."""
    if samples.empty:
        return Verdict(None, 0.0, None, "the strategy has no monitor block")
    stranded = samples[samples["stranded"] > 0]
    worst = float(stranded["oldest_age_s"].max()) if len(stranded) else 0.0
    return Verdict(
        worst, 0.0, stranded.empty, f"{len(samples)} samples, {len(stranded)} with a stranded job"
    )


def weighted_share(jobs: pd.DataFrame, weights: dict[str, int]) -> Verdict:
    """jobs: one repetition; weights: tenant class -> weight."""
    window_start = jobs["enqueued_at"].min()
    window_end = jobs.groupby("tenant_id")["started_at"].max().min()
    window = jobs[(jobs["started_at"] >= window_start) & (jobs["started_at"] < window_end)]
    claims = window.groupby(["tenant_id", "tenant_class"]).size()
    if len(claims) < 2 or claims.min() == 0:
        return Verdict(None, 1 + SHARE_TOLERANCE, None, "fewer than two backlogged tenants")
    per_weight = [count / weights[tenant_class] for (_, tenant_class), count in claims.items()]
    spread = max(per_weight) / min(per_weight)
    shares = ", ".join(
        f"tenant {tenant} ({cls}, w{weights[cls]}): {count}"
        for (tenant, cls), count in claims.items()
    )
    return Verdict(
        spread,
        1 + SHARE_TOLERANCE,
        spread <= 1 + SHARE_TOLERANCE,
        f"claims while all were backlogged: {shares}",
    )


def tenant_cap(jobs: pd.DataFrame, cap: int | None) -> Verdict:
    worst = max_concurrent_per_tenant(jobs)
    if cap is None:
        return Verdict(float(worst), float("inf"), None, "the scenario sets no tenant_cap")
    return Verdict(
        float(worst), float(cap), worst <= cap, "most jobs of one tenant running at once"
    )


def max_concurrent_per_tenant(jobs: pd.DataFrame) -> int:
    worst = 0
    for _, tenant in jobs.groupby("tenant_id"):
        starts = pd.DataFrame({"at": tenant["started_at"], "step": 1})
        ends = pd.DataFrame({"at": tenant["finished_at"], "step": -1})
        # At equal times an end comes first: a job that finishes as another starts is
        # not running beside it.
        events = pd.concat([ends, starts]).sort_values(["at", "step"], kind="stable")
        worst = max(worst, int(events["step"].cumsum().max()))
    return worst


def priority_order(jobs: pd.DataFrame, priorities: dict[str, int], workers: int) -> Verdict:
    levels = jobs["tenant_class"].map(priorities)
    if levels.nunique() < 2:
        return Verdict(None, float(workers), None, "one priority only")
    starts = jobs["started_at"].to_numpy()
    worst = 0
    for level in sorted(levels.unique())[1:]:
        lower = np.sort(starts[(levels < level).to_numpy()])
        high = jobs[(levels == level).to_numpy()]
        after = np.searchsorted(lower, high["enqueued_at"].to_numpy(), side="right")
        before = np.searchsorted(lower, high["started_at"].to_numpy(), side="left")
        worst = max(worst, int((before - after).clip(min=0).max()))
    return Verdict(
        float(worst),
        float(workers),
        worst <= workers,
        "most lower-priority starts while one higher-priority job waited",
    )


CHECKS: dict[str, Callable[..., Verdict]] = {
    "never_stranded": never_stranded,
    "weighted_share": weighted_share,
    "tenant_cap": tenant_cap,
    "priority_order": priority_order,
}


MONITOR_COLUMNS = ["strategy", "workers", "repetition", "elapsed_s", "stranded", "oldest_age_s"]


def property_table(jobs: pd.DataFrame, monitor: pd.DataFrame, scenario: Scenario) -> pd.DataFrame:
    """The scenario's checks, per strategy and worker count: the worst repetition's value,
    the bound, and whether every repetition held."""
    groups = [r.group for r in tenant_ranges(scenario)]
    weights = {group.name: group.weight for group in groups}
    priorities = {group.name: group.priority for group in groups}
    rows = []
    for (strategy, workers, repetition), run in jobs.groupby(
        ["strategy", "workers", "repetition"], sort=False
    ):
        samples = monitor[
            (monitor["strategy"] == strategy)
            & (monitor["workers"] == workers)
            & (monitor["repetition"] == repetition)
        ]
        arguments = {
            "never_stranded": (samples,),
            "weighted_share": (run, weights),
            "tenant_cap": (run, scenario.tenant_cap),
            "priority_order": (run, priorities, workers),
        }
        for check in scenario.checks:
            verdict = CHECKS[check](*arguments[check])
            rows.append(
                {
                    "check": check,
                    "strategy": strategy,
                    "workers": workers,
                    "repetition": repetition,
                    "measured": verdict.measured,
                    "bound": verdict.bound,
                    "held": verdict.held,
                    "detail": verdict.detail,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "check",
            "strategy",
            "workers",
            "repetition",
            "measured",
            "bound",
            "held",
            "detail",
        ],
    )


def property_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per check, strategy and workers: worst measured value, and held in every repetition."""
    grouped = table.groupby(["check", "strategy", "workers"], sort=False)
    return grouped.agg(
        repetitions=("repetition", "size"),
        measured=("measured", "max"),
        bound=("bound", "first"),
        held=("held", lambda held: None if held.isna().all() else bool(held.dropna().all())),
        detail=("detail", "last"),
    ).reset_index()


def property_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [
        "property",
        "strategy",
        "workers",
        "reps",
        "measured (worst)",
        "bound",
        "held",
        "detail",
    ]
    rows = [
        [
            r["check"],
            r["strategy"],
            str(r["workers"]),
            str(r["repetitions"]),
            number(r["measured"]),
            number(r["bound"]),
            "n/a" if r["held"] is None or r["held"] != r["held"] else "yes" if r["held"] else "NO",
            r["detail"],
        ]
        for r in table.to_dict("records")
    ]
    return headers, rows


PROPERTIES_INTRO = (
    "From the recorded data (harness/analysis/properties.py); measured is the worst repetition."
)


def properties_section(summary: pd.DataFrame) -> Section:
    rows = Table.of(property_rows(summary), "Properties checked from the recorded data")
    return Section(
        "properties", "Properties checked", PROPERTIES_INTRO, tables=[rows], console=[rows]
    )
