"""The drift statistics on synthetic series of known shape: Theil-Sen's slope, the
bootstrap interval of a change, and the verdict over whole frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis.headline import _horizon_figures
from harness.analysis.horizon import (
    _median,
    _p99,
    bootstrap_change,
    drift_rows,
    drift_sentences,
    horizon_drift,
    horizon_windows,
    size_growth,
    theil_sen,
)
from harness.results.document import RepetitionEntry, RunDocument, ScenarioRef
from harness.run.render import _cuts
from harness.scenario.model import Horizon

HORIZON = Horizon.model_validate(
    {
        "duration_s": 3600,
        "warmup_s": 300,
        "held": {"from_s": 2700, "for_s": 300},
        "sample_s": 10,
        "window_s": 300,
    }
)
HOURS = np.arange(0, 3600, 10) / 3600


def test_theil_sen_finds_a_zero_a_positive_and_a_step_slope() -> None:
    noise = np.random.default_rng(1).normal(0, 1, len(HOURS))
    assert theil_sen(HOURS, 100 + noise) == pytest.approx(0, abs=1.0)
    assert theil_sen(HOURS, 100 + 50 * HOURS + noise) == pytest.approx(50, abs=1.5)
    # a step of 30 halfway: no steady slope, but the pairs across it lean it up
    step = 100 + 30 * (HOURS >= 0.5) + noise
    assert 0 < theil_sen(HOURS, step) < 60


def test_theil_sen_shrugs_off_outliers_that_bend_least_squares() -> None:
    y = 10 * HOURS
    y[-10:] += 1000  # a burst at the end
    assert theil_sen(HOURS, y) == pytest.approx(10, abs=0.5)
    assert np.polyfit(HOURS, y, 1)[0] > 50


def test_theil_sen_has_no_slope_without_two_distinct_moments() -> None:
    assert np.isnan(theil_sen(np.array([1.0, 1.0]), np.array([2.0, 3.0])))


def test_the_bootstrap_interval_holds_zero_without_change_and_not_with_one() -> None:
    rng = np.random.default_rng(7)
    same = rng.normal(10, 1, 200), rng.normal(10, 1, 200)
    change, low, high = bootstrap_change(*same, _median, np.random.default_rng(1))
    assert low < 0 < high and low <= change <= high
    moved = rng.normal(10, 1, 200), rng.normal(12, 1, 200)
    change, low, high = bootstrap_change(*moved, _median, np.random.default_rng(1))
    assert 1.5 < low < change < high < 2.5


def test_the_bootstrap_is_seeded() -> None:
    data = np.arange(100.0), np.arange(100.0) * 1.1
    first = bootstrap_change(*data, _p99, np.random.default_rng([3, 1]))
    assert bootstrap_change(*data, _p99, np.random.default_rng([3, 1])) == first
    assert np.isnan(bootstrap_change([], [1.0], _median, np.random.default_rng(0))[0])


def _jobs(p99_growth: float, step: bool = False) -> pd.DataFrame:
    """A job a second for the hour; its wait 10 ms, and every 20th job's (its tail: the
    p99 is among them) growing by `p99_growth` s an hour, or stepping up in the held
    phase and staying."""
    t = np.arange(3600.0)
    tail = (np.arange(3600) % 20) == 0
    extra = p99_growth * t / 3600 if not step else 0.5 * (t >= 2700)
    wait = 0.01 + np.where(tail, 0.05 + extra, 0)
    t0 = pd.Timestamp("2026-12-05", tz="UTC")
    enqueued = t0 + pd.to_timedelta(t, unit="s")
    return pd.DataFrame(
        {
            "strategy": "q",
            "workers": 2,
            "repetition": 1,
            "tenant_class": np.where(tail, "big", "small"),
            "enqueued_at": enqueued,
            "started_at": enqueued + pd.to_timedelta(wait, unit="s"),
        }
    )


def _series(
    size_per_h: float,
    dead: np.ndarray | None = None,
    kept_bytes: float = 0,
    live: np.ndarray | None = None,
) -> pd.DataFrame:
    """Samples of an hour; `kept_bytes`: the size grows by rows that stay live, one row
    per this many bytes (0: the live rows stay 50 while the size grows, or are `live`)."""
    t = np.arange(0, 3600.0, 10)
    grown = size_per_h * t / 3600
    if live is None:
        live = 50 + (grown / kept_bytes if kept_bytes else 0)
    return pd.DataFrame(
        {
            "strategy": "q",
            "workers": 2,
            "repetition": 1,
            "t_s": t,
            "phase": [HORIZON.phase_at(s) for s in t],
            "dead": dead if dead is not None else np.full(len(t), 100.0),
            "live": live,
            "table_bytes": 1_000_000 + grown,
            "index_bytes": 0,
            "oldest_xmin_age": 5,
            "autovacuums": 0,
            "wal_bytes": t * 1000,
        }
    )


def _verdict(jobs: pd.DataFrame, series: pd.DataFrame) -> pd.Series:
    return horizon_drift(jobs, series, None, HORIZON, seed=1).iloc[0]


def test_a_flat_queue_is_stable() -> None:
    row = _verdict(_jobs(0), _series(0))
    assert row["verdict"] == "stable", row["why"]
    assert row["size_slope_bytes_per_h"] == 0 and row["p99_change"] == pytest.approx(0, abs=1e-9)


def test_a_queue_whose_size_grows_is_growing() -> None:
    row = _verdict(_jobs(0), _series(200_000))
    assert row["verdict"] == "growing" and "size grows" in row["why"]
    assert row["size_slope_bytes_per_h"] == pytest.approx(200_000)
    assert row["size_slope_share_per_h"] == pytest.approx(200_000 / row["size_last"], rel=0.1)


def test_a_queue_whose_tail_grows_is_growing() -> None:
    row = _verdict(_jobs(2.0), _series(0))
    assert row["verdict"] == "growing" and "p99 rose" in row["why"]
    assert row["p99_change_low"] > 0
    assert row["p99_slope_s_per_h"] == pytest.approx(2.0 * 0.99, rel=0.2)


def test_the_drift_table_says_what_grew() -> None:
    """The report's and the docs' drift table: `growing (size)`, `growing (p99)`, or
    both, per repetition; a stable one as it is."""
    drift = pd.concat(
        [
            horizon_drift(jobs, series, None, HORIZON, seed=1).assign(repetition=repetition)
            for repetition, (jobs, series) in enumerate(
                [(_jobs(0), _series(200_000)), (_jobs(2.0), _series(0)), (_jobs(0), _series(0))],
                start=1,
            )
        ],
        ignore_index=True,
    )
    headers, rows = drift_rows(drift)
    (row,) = rows
    assert row[headers.index("verdict")] == "growing (size: dead space), growing (p99), stable"
    assert row[headers.index("reps")] == "3"


def test_a_size_that_grows_with_its_live_rows_is_rows_kept_not_dead_space() -> None:
    """A library that keeps every finished job (procrastinate's jobs, pgqueuer's log)
    grows as its live rows do: growing, but "rows kept"; the same growth with the live
    rows flat is "dead space"."""
    # a job a second, the size 200,000 bytes an hour in rows of 50: 4,000 rows, 1.1 a job
    kept = _verdict(_jobs(0), _series(200_000, kept_bytes=50))
    assert kept["verdict"] == "growing" and kept["why"].endswith(": rows kept")
    assert kept["jobs_per_h"] == pytest.approx(3600, rel=0.01)
    assert kept["live_rows_per_job"] == pytest.approx(4000 / 3600, rel=0.05)
    bloat = _verdict(_jobs(0), _series(200_000))
    assert bloat["verdict"] == "growing" and bloat["why"].endswith(": dead space")
    assert bloat["live_rows_per_job"] == 0
    assert size_growth({"size_slope_share_per_h": 1.0}) is None  # an older drift row
    assert size_growth({"live_rows_per_job": float("nan")}) is None  # no job ran


def test_a_handful_in_flight_that_grows_is_dead_space_not_rows_kept() -> None:
    """db-scheduler deletes each execution as it completes: 8 rows in flight at the
    steady phase's start, 18 at its end, while its indexes' dead space grows. The live
    rows' slope is over 100 % of their median an hour, but a hundredth of a row a job:
    dead space."""
    t = np.arange(0, 3600.0, 10)
    handful = 8 + 10 * t / 3600
    row = _verdict(_jobs(0), _series(200_000, live=handful))
    assert row["live_slope_share_per_h"] > row["size_slope_share_per_h"]  # the old misreading
    assert row["live_rows_per_job"] == pytest.approx(10 / 3600, rel=0.1)
    assert row["verdict"] == "growing" and row["why"].endswith(": dead space"), row["why"]


def test_a_step_in_the_held_phase_that_stays_is_recovering() -> None:
    """Flat through the steady phase, then dead tuples and the tail step up in the held
    phase and are still up at the end: not growing, not back yet."""
    t = np.arange(0, 3600.0, 10)
    row = _verdict(_jobs(0, step=True), _series(0, np.where(t >= 2700, 5000.0, 100.0)))
    assert row["verdict"] == "recovering", row["why"]
    assert row["dead_held_peak"] == 5000 and row["dead_end"] == 5000


def test_the_windows_count_every_job_once_per_class_and_in_all() -> None:
    windows = horizon_windows(_jobs(0), HORIZON)
    pooled = windows[windows["tenant_class"] == "all"]
    assert pooled["jobs"].sum() == 3600 and len(pooled) == 12
    assert (pooled["jobs_per_s"] == 1).all()
    assert list(pooled["phase"]) == ["warmup"] + ["steady"] * 8 + ["held"] + ["recovery"] * 2


def _cut(series: pd.DataFrame, cut_s: float) -> pd.Series:
    """The repetition cut at cut_s, with no jobs (as an interrupted run leaves it)."""
    kept = series[series["t_s"] <= cut_s]
    return horizon_drift(None, kept, None, HORIZON, seed=1, cuts={("q", 2, 1): cut_s}).iloc[0]


def test_a_cut_repetition_drifts_over_its_steady_windows_before_the_cut() -> None:
    """Cut at 1,250 s of a steady phase from 300 s: its whole 300 s windows before the cut
    are three, so first is [300, 600) and last [900, 1200); size grows 200 KB an hour;
    no end, no p99."""
    row = _cut(_series(200_000), 1250)
    assert row["cut_s"] == 1250 and row["verdict"] == "growing"
    assert row["why"].startswith("cut at 1,250 s, drift over the steady phase to 1,200 s")
    assert "no end, no p99" in row["why"]
    sizes = _series(200_000).set_index("t_s")["table_bytes"]
    assert row["size_first"] == sizes.loc[300:590].median()
    assert row["size_last"] == sizes.loc[900:1190].median()
    assert row["size_slope_bytes_per_h"] == pytest.approx(200_000)
    assert np.isnan(row["p99_change"]) and np.isnan(row["dead_end"])


def test_a_cut_before_two_steady_windows_has_no_drift_and_says_why() -> None:
    row = _cut(_series(0), 800)
    assert row["verdict"] == "cut"
    assert row["why"] == (
        "cut at 800 s: 1 whole window of the steady phase (from 300 s) before it, drift needs 2"
    )


def test_a_cut_repetition_is_no_headline_figure() -> None:
    whole = horizon_drift(_jobs(0), _series(0), None, HORIZON, seed=1)
    cut = horizon_drift(None, _series(0).assign(repetition=2), None, HORIZON, 1, {("q", 2, 2): 900})
    figures = _horizon_figures("s", pd.concat([whole, cut]))
    dead_peak = next(f for f in figures if f is not None and "dead tuples, peak" in f.name)
    assert dead_peak.samples == 1


def test_a_repetition_sampled_but_never_finished_is_cut_at_its_latest_sample() -> None:
    """Repetition 1 finished (run.json has it), repetition 2 sampled to 490 s and no more:
    what a run killed outright leaves, its run.json naming no cut."""
    document = RunDocument(
        run_id="r",
        started_at="2026-12-05T00:00:00+00:00",
        scenario=ScenarioRef(name="s", path="s.yaml", sha256="0", seed=1),
        repetitions=[
            RepetitionEntry(
                strategy="q",
                workers=2,
                repetition=1,
                jobs=3600,
                empty_polls=0,
                lost_races=0,
                books="balanced",
                started_at="2026-12-05T00:00:00+00:00",
                finished_at="2026-12-05T01:00:00+00:00",
            )
        ],
    )
    series = pd.concat([_series(0), _series(0).assign(repetition=2).iloc[:50]])
    assert _cuts(document, series) == {("q", 2, 2): 490.0}


def test_the_sampler_books_its_gaps() -> None:
    """Every sample_s a sample: no gap. Two minutes with none (a stalled sampler) is
    one interval over two sample_s, 130 s long, and the report's bullet says so."""
    whole = _verdict(_jobs(0), _series(0))
    assert (whole["samples"], whole["sample_gap_max_s"], whole["sample_gaps"]) == (360, 10, 0)
    series = _series(0)
    holed = series[(series["t_s"] <= 1000) | (series["t_s"] >= 1130)]
    row = horizon_drift(_jobs(0), holed, None, HORIZON, seed=1)
    assert (row.iloc[0]["sample_gaps"], row.iloc[0]["sample_gap_max_s"]) == (1, 130)
    (said,) = drift_sentences(row)
    assert said.endswith("the longest 130 s; the series has holes there."), said
    (clean,) = drift_sentences(horizon_drift(_jobs(0), series, None, HORIZON, seed=1))
    assert "missed" not in clean
    headers, (cells,) = drift_rows(row)
    assert cells[headers.index("samples (longest gap, s)")] == "348 (130)"
