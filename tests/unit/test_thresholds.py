"""Thresholds: their text parsed, checked against the scenario, and judged on a run's
summary (hand-made)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.thresholds import failed_lines, threshold_section, threshold_table
from harness.errors import HarnessError
from harness.scenario.loader import load_scenario
from harness.scenario.thresholds import parse_threshold
from tests.conftest import SHORT_NOISY, builtin_traits


def test_a_threshold_names_a_class_figure_labels_and_a_bound() -> None:
    one = parse_threshold(" small.wait_p50_s{strategy=fifo} < 0.5 ")
    assert (one.text, one.tenant_class, one.metric, one.strategy, one.op, one.bound) == (
        "small.wait_p50_s{strategy=fifo} < 0.5",
        "small",
        "wait_p50_s",
        "fifo",
        "<",
        0.5,
    )
    ratio = parse_threshold("small.wait_p50_s{strategy=fifo, versus=round_robin} >= 20")
    assert (ratio.versus, ratio.compare, ratio.unit) == ("round_robin", "ratio", "x")
    pooled = parse_threshold("throughput_jobs_s{strategy=fifo,workers=4}>100")
    assert (pooled.tenant_class, pooled.workers, pooled.unit) == ("all", 4, "jobs/s")
    plan = parse_threshold("plan_shared_buffers{strategy=round_robin,variant=idle-989} <= 5e3")
    assert (plan.tenant_class, plan.variant, plan.bound, plan.unit) == (
        None,
        "idle-989",
        5000.0,
        "buffers",
    )
    assert one.holds(0.4) and not one.holds(0.5) and not one.holds(math.nan)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("small.wait_p50_s", "is no threshold; give FIGURE{strategy=NAME,...} OP BOUND"),
        ("small.wait_p50_s{strategy=fifo} = 1", "is no threshold"),
        ("small.wait_p51_s{strategy=fifo} < 1", "no figure wait_p51_s; a tenant class's: "),
        ("small.wait_p50_s < 1", "say whose figure it is: {strategy=NAME}"),
        ("small.wait_p50_s{strategy=fifo} < 1s", "the bound '1s' is no finite number"),
        ("small.wait_p50_s{strategy=fifo} < nan", "the bound 'nan' is no finite number"),
        ("small.wait_p50_s{strategy=fifo,stategy=x} < 1", "'stategy=x' is no label"),
        ("small.wait_p50_s{strategy=fifo,strategy=x} < 1", "strategy is given twice"),
        ("small.wait_p50_s{strategy=fifo,compare=ratio} < 1", "compare goes with versus"),
        ("small.wait_p50_s{strategy=a,versus=b,compare=sum} < 1", "compare is ratio or difference"),
        ("small.wait_p50_s{strategy=fifo,variant=x} < 1", "is a timed run's: no variant"),
        ("plan_total_ms{strategy=fifo} < 1", "needs its explain variant"),
        ("small.plan_total_ms{strategy=fifo,variant=x} < 1", "of no tenant class"),
        ("wait_p50_s{strategy=fifo,workers=0} < 1", "workers is a count of workers, 1 or more"),
    ],
)
def test_a_threshold_that_is_not_one_says_what_is_allowed(text: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_threshold(text)
    assert str(refused.value).startswith(f"'{text}'") and said in str(refused.value)


@pytest.mark.parametrize(
    ("threshold", "said"),
    [
        ("tiny.wait_p50_s{strategy=fifo} < 1", "tenant_class 'tiny' is not a tenant group"),
        ("small.wait_p50_s{strategy=capped} < 1", "strategy 'capped' is not among"),
        ("small.wait_p50_s{strategy=fifo,versus=capped} > 1", "strategy 'capped' is not among"),
        ("small.wait_p50_s{strategy=fifo,workers=3} < 1", "workers 3 is not among"),
        ("plan_total_ms{strategy=fifo,variant=x} < 1", "plan_total_ms needs plan captures"),
    ],
)
def test_a_threshold_on_a_figure_the_scenario_does_not_measure_is_refused(
    tmp_path: Path, threshold: str, said: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"{SHORT_NOISY}thresholds:\n  - '{threshold}'\n")
    with pytest.raises(HarnessError) as refused:
        load_scenario(path, builtin_traits())
    line = str(refused.value)
    where = f"{path}:{len(SHORT_NOISY.splitlines()) + 2}: thresholds[0]: '{threshold}': "
    assert line.startswith(where) and said in line, line


def summary() -> pd.DataFrame:
    """Two repetitions of fifo and round_robin, 2 workers: small and all classes."""
    rows = []
    for strategy, small, everyone in (("fifo", (4.0, 5.0), (2.0, 2.2)), ("rr", (0.1, 0.2), (2, 2))):
        for repetition in (1, 2):
            for tenant_class, waits in (("small", small), ("all", everyone)):
                rows.append(
                    {
                        "strategy": strategy,
                        "workers": 2,
                        "repetition": repetition,
                        "tenant_class": tenant_class,
                        "wait_p50_s": waits[repetition - 1],
                        "throughput_jobs_s": 100.0 * repetition,
                    }
                )
    return pd.DataFrame(rows)


def test_thresholds_are_judged_on_the_median_over_repetitions() -> None:
    texts = [
        "small.wait_p50_s{strategy=fifo} < 0.5",
        "small.wait_p50_s{strategy=fifo} < 10",
        "small.wait_p50_s{strategy=fifo,versus=rr} > 20",
        "throughput_jobs_s{strategy=rr} >= 150",
        "small.wait_p50_s{strategy=gone} < 1",
    ]
    table = threshold_table([parse_threshold(t) for t in texts], summary(), None)
    assert table["value"].tolist()[:4] == [4.5, 4.5, 32.5, 150.0]
    assert table["kept"].tolist() == [False, True, True, True, False]
    assert failed_lines(table) == [
        "small.wait_p50_s{strategy=fifo} < 0.5: measured 4.5 s (median of 2, 4-5)",
        "small.wait_p50_s{strategy=gone} < 1: not measured (no repetition has the figure)",
    ]
    section = threshold_section(table)
    assert section.headline == "2 of 5 thresholds failed: harness run exits 1."
    assert [row[1] for row in section.tables[0].rows] == [
        "FAILED",
        "FAILED",
        "kept",
        "kept",
        "kept",
    ]
    kept = threshold_section(table[table["kept"]])
    assert kept.headline == "Every threshold kept (3 of 3)."
