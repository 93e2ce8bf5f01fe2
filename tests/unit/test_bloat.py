"""The long transaction's analysis on hand-made data: phases, buckets, the summary."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from harness.analysis.bloat import (
    _claims_by_phase,
    bloat_rows,
    bloat_sentences,
    bloat_summary,
    claim_buckets,
    hold_windows,
    samples_on_clock,
    windows_on_clock,
    with_phases,
)
from harness.results.document import RepetitionEntry, RunDocument, ScenarioRef
from harness.run.long_transaction import SAMPLE_COLUMNS

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KEYS = {"strategy": "fifo", "workers": 2, "repetition": 1}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def jobs(claims: list[tuple[float, float]]) -> pd.DataFrame:
    """(started_at seconds from t0, claim_ms) per job; the first job is enqueued at t0."""
    return pd.DataFrame(
        [
            {**KEYS, "job_id": i, "enqueued_at": at(0 if i == 0 else start), "claim_ms": ms}
            | {"started_at": at(start)}
            for i, (start, ms) in enumerate(claims)
        ]
    )


def document(began: float, ended: float) -> RunDocument:
    hold = {"began_at": at(began).isoformat(), "ended_at": at(ended).isoformat()}
    entry = {
        **KEYS,
        "jobs": 1,
        "empty_polls": 0,
        "lost_races": 0,
        "books": "balanced",
        "started_at": "",
        "finished_at": "",
    }
    return RunDocument(
        run_id="r1",
        started_at="",
        scenario=ScenarioRef(name="x", path="x.yaml", sha256="", seed=1),
        repetitions=[
            RepetitionEntry(
                **entry, long_transaction=hold | {"cut_short": False, "vacuumed": False}
            ),
            RepetitionEntry(**{**entry, "strategy": "round_robin"}),  # no hold: left out
        ],
    )


def sample(
    seconds: float, phase: str, dead_versions: int, size: int, buffers: int = 0
) -> dict[str, object]:
    values = dict.fromkeys(SAMPLE_COLUMNS, 0) | {
        "dequeue_buffers": buffers,
        "at": at(seconds).isoformat(),
        "phase": phase,
        "jobs_dead_versions": dead_versions,
        "jobs_bytes": size,
        "jobs_dead": dead_versions * 2,
    }
    return KEYS | values


def test_hold_windows_reads_run_json_and_skips_repetitions_without_a_hold() -> None:
    windows = hold_windows(document(2, 5))
    assert list(windows["strategy"]) == ["fifo"]
    assert windows["began_at"].iloc[0] == at(2)
    assert windows["ended_at"].iloc[0] == at(5)


def test_a_claim_belongs_to_the_phase_its_started_at_falls_in() -> None:
    claimed = jobs([(1.0, 1), (1.999, 1), (2.0, 1), (4.999, 1), (5.0, 1), (9, 1)])
    phased = with_phases(claimed, hold_windows(document(2, 5)))
    assert list(phased["phase"]) == ["before", "before", "during", "during", "after", "after"]
    assert list(phased["claim_s"]) == pytest.approx([1.0, 1.999, 2.0, 4.999, 5.0, 9.0])


def test_claim_buckets_count_and_interpolate_per_bucket() -> None:
    claimed = jobs([(0.1, 1), (0.2, 2), (0.3, 3), (0.4, 4), (0.5, 5), (1.2, 10), (2.9, 7)])
    table = claim_buckets(claimed, bucket_s=1.0)
    assert list(table["bucket_s"]) == [0.0, 1.0, 2.0]
    assert list(table["jobs"]) == [5, 1, 1]
    assert list(table["claim_p50_ms"]) == [3, 10, 7]
    assert table["claim_p95_ms"].iloc[0] == pytest.approx(4.8)  # 4 + 0.8 x (5 - 4)


def test_buckets_are_counted_from_the_first_enqueue() -> None:
    claimed = jobs([(0.0, 1), (0.7, 1), (1.4, 1)])
    assert list(claim_buckets(claimed, bucket_s=0.5)["bucket_s"]) == [0.0, 0.5, 1.0]


def test_samples_and_windows_share_the_jobs_clock() -> None:
    claimed = jobs([(0.0, 1), (3.0, 1)])
    samples = samples_on_clock(pd.DataFrame([sample(-0.5, "before", 0, 8192)]), claimed)
    windows = windows_on_clock(hold_windows(document(2, 5)), claimed)
    assert list(samples["t_s"]) == [-0.5]
    assert (windows["from_s"].iloc[0], windows["to_s"].iloc[0]) == (2.0, 5.0)


def test_the_summary_compares_phases_and_reads_the_peaks() -> None:
    claimed = jobs([(0.5, 2), (1.0, 4), (2.5, 10), (3.0, 20), (6.0, 3)])
    samples = pd.DataFrame(
        [
            sample(1, "before", 5, 8192, buffers=4),
            sample(2, "during", 10, 8192, buffers=30),
            sample(4, "during", 900, 3 * 8192, buffers=90),
            sample(6, "after", 40, 4 * 8192, buffers=5),
        ]
    )
    row = bloat_summary(claimed, samples, hold_windows(document(2, 5))).iloc[0]
    assert (row["claim_p50_before_ms"], row["claim_p50_during_ms"]) == (3, 15)
    assert row["claim_p50_after_ms"] == 3
    assert row["claim_p50_during_vs_before"] == 5
    assert row["claim_p95_during_ms"] == pytest.approx(19.5)
    assert row["jobs_dead_versions_peak"] == 900
    assert row["jobs_dead_versions_end"] == 40
    assert row["jobs_n_dead_tup_peak"] == 1800
    assert row["jobs_kb_grown_during"] == 16  # two pages over the hold
    assert row["hold_s"] == 3
    # jobs() enqueues each job as it starts, but the first at t0: only its wait is 0.5 s
    assert (row["wait_p50_before_s"], row["wait_p50_during_s"]) == (0.25, 0)
    assert (row["dequeue_buffers_before"], row["dequeue_buffers_during_peak"]) == (4, 90)
    assert row["dequeue_buffers_after"] == 5


def test_the_report_states_each_figure_as_a_range_over_repetitions() -> None:
    claimed = jobs([(0.5, 2), (1.0, 4), (2.5, 10), (3.0, 20), (6.0, 3)])
    samples = pd.DataFrame(
        [sample(1, "before", 5, 8192, buffers=4), sample(2, "during", 10, 8192, buffers=30)]
    )
    row = bloat_summary(claimed, samples, hold_windows(document(2, 5)))
    two = pd.concat([row, row.assign(repetition=2, claim_p50_before_ms=6.0)])
    headers, rows = bloat_rows(two)
    cells = dict(zip(headers, rows[0], strict=True))
    assert (cells["reps"], cells["claim p50 before (ms)"], cells["claim p50 during"]) == (
        "2",
        "3-6",
        "15",
    )
    (sentence,) = bloat_sentences(two)
    assert sentence.startswith(
        "fifo, 2 workers: the median claim took 3-6 ms before the hold, 15 ms during it"
    )
    assert "one dequeue read 4 buffers before, up to 30 during" in sentence


def test_untimed_claims_give_no_figure_and_no_warning() -> None:
    """An adapter's library fetches in its own process: its jobs' claim_ms are NaN. Their
    median was numpy's "Mean of empty slice" on stderr in every long run's render; now
    the claim figures are NaN, quietly, and the waits are still there."""
    untimed = jobs([(1.0, float("nan")), (2.0, float("nan"))]).assign(phase="before")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures = _claims_by_phase(untimed)
    assert pd.isna(figures["claim_p50_before_ms"]) and pd.isna(figures["claim_p95_during_ms"])
    assert figures["wait_p50_before_s"] == pytest.approx(0.5)  # waits of 1 s and 0 s
