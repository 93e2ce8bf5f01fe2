from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from harness.analysis.reference import reference_table
from harness.analysis.waits import summarize, summary_section
from harness.report.sections import markdown
from harness.scenario.model import ReferenceFigure

T0 = datetime(2026, 9, 30, 12, 0, tzinfo=UTC)


def job(
    strategy: str,
    job_id: int,
    tenant_class: str,
    enqueue: float,
    start: float,
    finish: float,
    repetition: int = 1,
) -> dict[str, object]:
    return {
        "scenario": "s",
        "strategy": strategy,
        "workers": 2,
        "repetition": repetition,
        "job_id": job_id,
        "tenant_id": 1 if tenant_class == "large" else 2,
        "tenant_class": tenant_class,
        "enqueued_at": T0 + timedelta(seconds=enqueue),
        "started_at": T0 + timedelta(seconds=start),
        "finished_at": T0 + timedelta(seconds=finish),
        "worker": 0,
        "duration_ms": 0.0,
        "claim_ms": 1.0,
    }


@pytest.fixture
def jobs() -> pd.DataFrame:
    return pd.DataFrame(
        [
            job("fifo", 1, "large", 0, 0, 1),
            job("fifo", 2, "large", 0, 1, 2),
            job("fifo", 3, "small", 1, 2, 3),
            job("fifo", 4, "small", 1, 3, 4),
            job("rr", 1, "large", 0, 0, 1),
            job("rr", 2, "large", 0, 3, 4),
            job("rr", 3, "small", 1, 1, 2),
            job("rr", 4, "small", 1, 2, 3),
        ]
    )


def row(summary: pd.DataFrame, strategy: str, tenant_class: str) -> pd.Series:
    found = summary[(summary["strategy"] == strategy) & (summary["tenant_class"] == tenant_class)]
    assert len(found) == 1
    return found.iloc[0]


def test_waits_makespan_and_throughput_by_hand(jobs: pd.DataFrame) -> None:
    summary = summarize(jobs)
    fifo_small = row(summary, "fifo", "small")
    assert fifo_small["jobs"] == 2
    assert fifo_small["wait_p50_s"] == pytest.approx(1.5)  # waits 1 and 2
    assert fifo_small["wait_p95_s"] == pytest.approx(1.95)  # linear interpolation
    assert fifo_small["wait_max_s"] == pytest.approx(2.0)
    assert fifo_small["makespan_s"] == pytest.approx(4.0)
    assert fifo_small["throughput_jobs_s"] == pytest.approx(4 / 4)
    assert row(summary, "rr", "large")["makespan_s"] == pytest.approx(4.0)
    assert row(summary, "rr", "small")["wait_p50_s"] == pytest.approx(0.5)
    assert row(summary, "fifo", "all")["jobs"] == 4


def test_rows_read_in_scenario_order_with_all_last(jobs: pd.DataFrame) -> None:
    summary = summarize(jobs)
    assert list(zip(summary["strategy"], summary["tenant_class"], strict=True)) == [
        ("fifo", "large"),
        ("fifo", "small"),
        ("fifo", "all"),
        ("rr", "large"),
        ("rr", "small"),
        ("rr", "all"),
    ]


def test_reference_figures_ratio_and_difference(jobs: pd.DataFrame) -> None:
    more = pd.concat(
        [
            jobs,
            jobs.assign(
                repetition=2,
                started_at=jobs["started_at"],
                finished_at=jobs["finished_at"] + timedelta(seconds=1),
            ),
        ]
    )
    figures = [
        ReferenceFigure(
            label="ratio",
            metric="wait_p50_s",
            strategy="fifo",
            versus="rr",
            tenant_class="small",
            value=3,
        ),
        ReferenceFigure(
            label="diff",
            metric="makespan_s",
            strategy="rr",
            versus="fifo",
            compare="difference",
            tenant_class="large",
            value=(0.5, 0.7),
        ),
    ]
    table = reference_table(figures, summarize(more), None).set_index("figure")
    assert table.loc["ratio", "measured_low"] == pytest.approx(3.0)
    assert table.loc["ratio", "repetitions"] == 2
    assert table.loc["diff", "measured_low"] == pytest.approx(2.0)  # 4 - 2
    assert (table.loc["diff", "reference_low"], table.loc["diff", "reference_high"]) == (0.5, 0.7)


def test_the_waits_carry_a_warning_where_a_queue_ran_unlike_the_scenario(
    jobs: pd.DataFrame,
) -> None:
    warning = "pgboss polls every 0.5 s, not every 10 ms as the scenario asks"
    section = summary_section(summarize(jobs), [warning])
    assert f"**Warning:** {warning}" in markdown("run", [section])
    assert "Warning" not in markdown("run", [summary_section(summarize(jobs))])
