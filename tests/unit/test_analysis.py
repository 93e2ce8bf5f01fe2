from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from harness.analysis.reference import reference_table
from harness.analysis.throughput import throughput_rows, throughput_table
from harness.analysis.waits import summarize, summary_rows, summary_section
from harness.report.sections import markdown
from harness.results.document import HARNESS, QueueSetting
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


def _library_jobs() -> pd.DataFrame:
    """Four strategies listed with a library's tuned mapping before its default, and a
    harness strategy between two libraries."""
    names = ["lib_a_tuned", "fifo", "lib_b", "lib_a"]
    return pd.DataFrame([job(name, n, "large", 0, n, n + 1) for name in names for n in (1, 2)])


SETTINGS = {
    "fifo": QueueSetting(HARNESS),
    "lib_a": QueueSetting("a"),
    "lib_a_tuned": QueueSetting("a", {"batch_size": 10, "processes": 2}),
    "lib_b": QueueSetting("b"),
}


def test_the_waits_put_a_library_default_and_tuned_side_by_side_the_settings_named() -> None:
    """Grouped by library in the order libraries first appear, each default before its
    tuned mapping, a `setting` column, and the tuned settings named under the table."""
    headers, rows = summary_rows(summarize(_library_jobs()), SETTINGS)
    assert headers[:2] == ["strategy", "setting"]
    assert [row[:2] for row in rows] == [
        ["lib_a", "default"],
        ["lib_a_tuned", "tuned"],
        ["fifo", "default"],
        ["lib_b", "default"],
    ]
    section = summary_section(summarize(_library_jobs()), settings=SETTINGS)
    assert section.bullets == ["`lib_a_tuned` (a, tuned): batch_size=10, processes=2"]
    assert section.console_notes == section.bullets


def test_without_a_tuned_mapping_the_waits_keep_their_columns_and_order(
    jobs: pd.DataFrame,
) -> None:
    assert summary_rows(summarize(jobs), {}) == summary_rows(summarize(jobs))
    assert "setting" not in summary_rows(summarize(jobs))[0]


def test_a_drained_backlog_rate_runs_from_the_first_claim_to_the_last_completion() -> None:
    """Two jobs queued at 0, the first claimed at 10 s (a slow start-up, which does not
    count), the last done at 12 s: 2 jobs in 2 s; the claims' latency is the workers'."""
    frame = pd.DataFrame([job("lib_a", 1, "one", 0, 10, 11), job("lib_a", 2, "one", 0, 11, 12)])
    frame.loc[1, "claim_ms"] = 3.0
    table = throughput_table(frame).iloc[0]
    assert table["drain_s"] == pytest.approx(2.0)
    assert table["jobs_s"] == pytest.approx(1.0)
    assert table["claim_p50_ms"] == pytest.approx(2.0)
    headers, rows = throughput_rows(throughput_table(_library_jobs()), SETTINGS)
    assert headers[:3] == ["library", "strategy", "setting"]
    assert [row[:3] for row in rows] == [
        ["a", "lib_a", "default"],
        ["a", "lib_a_tuned", "tuned"],
        [HARNESS, "fifo", "default"],
        ["b", "lib_b", "default"],
    ]
