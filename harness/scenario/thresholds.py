"""Thresholds on a run's figures, as k6's are on its metrics: a scenario's `thresholds:`
and `harness run --threshold`, each a figure, a comparison and a bound.

    small.wait_p50_s{strategy=round_robin} < 0.5
    small.wait_p50_s{strategy=fifo,versus=round_robin} > 20        (a ratio)
    large.makespan_s{strategy=round_robin,versus=fifo,compare=difference} < 1
    throughput_jobs_s{strategy=fifo} > 100                         (every tenant)
    plan_shared_buffers{strategy=round_robin,variant=idle-989} <= 5000

A timed figure is a tenant class's (a tenant group's name, or `all`, the default) and a
strategy's (and of a worker count, where the scenario sweeps several); a plan figure is a
strategy's on an explain variant. The measured value is the median over repetitions (plan
executions), as results.json gives it. Parsing here is pure; whether the scenario has the
strategy, class, variant and count is the scenario model's check.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

TIMED_METRICS = (
    "wait_p50_s",
    "wait_p95_s",
    "wait_p99_s",
    "wait_max_s",
    "makespan_s",
    "claim_p50_ms",
    "throughput_jobs_s",
)
PLAN_METRICS = ("plan_total_ms", "plan_execution_ms", "plan_shared_buffers")
UNITS = {"plan_shared_buffers": "buffers", "throughput_jobs_s": "jobs/s"}
EVERY_TENANT = "all"  # the class that pools every tenant (harness/analysis/frames.py)
LABELS = ("strategy", "versus", "compare", "workers", "variant")
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_NAME = r"[a-z0-9][a-z0-9_-]{0,62}"
_EXPRESSION = re.compile(
    rf"^\s*(?:(?P<tenant_class>{_NAME})\.)?(?P<metric>[a-z0-9_]+)"
    r"\s*(?:\{(?P<labels>[^{}]*)\})?\s*(?P<op><=|>=|<|>)\s*(?P<bound>\S+)\s*$"
)
_SHAPE = "FIGURE{strategy=NAME,...} OP BOUND, e.g. small.wait_p50_s{strategy=fifo} < 0.5"


class Threshold(BaseModel):
    """One threshold, parsed: which figure, and the bound it must keep."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str  # as given, which every report quotes
    metric: str
    strategy: str
    tenant_class: str | None = None  # a timed figure's; None for a plan figure
    variant: str | None = None  # a plan figure's explain variant
    versus: str | None = None
    compare: Literal["ratio", "difference"] = "ratio"
    workers: int | None = None
    op: str
    bound: float

    @property
    def is_plan_figure(self) -> bool:
        return self.metric in PLAN_METRICS

    @property
    def unit(self) -> str:
        if self.versus is not None and self.compare == "ratio":
            return "x"
        return UNITS.get(self.metric, "ms" if self.metric.endswith("_ms") else "s")

    def holds(self, value: float) -> bool:
        """Whether a measured value keeps the bound (a value not measured never does)."""
        return not math.isnan(value) and OPERATORS[self.op](value, self.bound)


def parse_threshold(text: str) -> Threshold:
    """A threshold from its text; ValueError saying what is allowed otherwise."""
    found = _EXPRESSION.match(text)
    if found is None:
        raise ValueError(f"'{text}' is no threshold; give {_SHAPE} (OP: <, <=, >, >=)")
    metric = found["metric"]
    if metric not in TIMED_METRICS + PLAN_METRICS:
        raise ValueError(
            f"'{text}': no figure {metric}; a tenant class's: {', '.join(TIMED_METRICS)}; "
            f"a plan's: {', '.join(PLAN_METRICS)}"
        )
    labels = _labels(text, found["labels"] or "")
    plan = metric in PLAN_METRICS
    if plan and found["tenant_class"]:
        raise ValueError(f"'{text}': {metric} is a plan's, of no tenant class: leave out the class")
    if plan != ("variant" in labels):
        need = "needs its explain variant" if plan else "is a timed run's: no variant"
        raise ValueError(f"'{text}': {metric} {need} ({{variant=NAME}} is a plan figure's)")
    if "strategy" not in labels:
        raise ValueError(f"'{text}': say whose figure it is: {{strategy=NAME}}")
    if "compare" in labels and "versus" not in labels:
        raise ValueError(f"'{text}': compare goes with versus (versus=OTHER_STRATEGY)")
    if labels.get("compare", "ratio") not in ("ratio", "difference"):
        raise ValueError(f"'{text}': compare is ratio or difference")
    return Threshold(
        text=text.strip(),
        metric=metric,
        tenant_class=None if plan else (found["tenant_class"] or EVERY_TENANT),
        op=found["op"],
        bound=_bound(text, found["bound"]),
        strategy=labels["strategy"],
        variant=labels.get("variant"),
        versus=labels.get("versus"),
        compare=labels.get("compare", "ratio"),  # type: ignore[arg-type]
        workers=_workers(text, labels["workers"]) if "workers" in labels else None,
    )


def _labels(text: str, given: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for part in filter(None, (piece.strip() for piece in given.split(","))):
        name, equals, value = (side.strip() for side in part.partition("="))
        if not equals or name not in LABELS or not re.fullmatch(_NAME, value):
            raise ValueError(
                f"'{text}': '{part}' is no label; give NAME=VALUE, NAME one of "
                f"{', '.join(LABELS)}, VALUE lowercase letters, digits, _ and -"
            )
        if name in labels:
            raise ValueError(f"'{text}': {name} is given twice")
        labels[name] = value
    return labels


def _bound(text: str, given: str) -> float:
    try:
        bound = float(given)
    except ValueError:
        bound = math.nan
    if not math.isfinite(bound):
        raise ValueError(f"'{text}': the bound '{given}' is no finite number")
    return bound


def _workers(text: str, given: str) -> int:
    if not given.isdigit() or int(given) < 1:
        raise ValueError(f"'{text}': workers is a count of workers, 1 or more")
    return int(given)
