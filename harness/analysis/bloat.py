"""Pure analysis of a long transaction's effect: claim latency and dead tuples over time.

Inputs are the run folder's raw files: jobs.csv (claim_ms and started_at per job),
bloat.csv (the samples of harness/run/long_transaction.py) and run.json (each repetition's hold
window, database clock). Definitions:
  t0        = the repetition's first enqueued_at (as in harness/analysis/waits.py)
  a claim's time = the job's started_at, written inside its claim transaction
  phase     = before (claimed before the hold began), during (from began_at up to
              ended_at) or after (from ended_at on)
  wait      = started_at - enqueued_at, of the jobs claimed in the phase
  bucket    = floor((started_at - t0) / bucket_s) * bucket_s; p50/p95 are pandas'
              linear interpolation, over the jobs claimed in it
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.frames import REPETITION, repetition_rows, wait_seconds
from harness.analysis.held_fetches import fetch_summary
from harness.report.cells import span
from harness.report.sections import Section, Table
from harness.results.document import RunDocument

PHASES = ["before", "during", "after"]
WINDOW_COLUMNS = [*REPETITION, "began_at", "ended_at", "cut_short", "vacuumed"]


def hold_windows(document: RunDocument) -> pd.DataFrame:
    """Each repetition's hold from run.json, timestamps parsed (UTC)."""
    rows = [
        {key: getattr(entry, key) for key in REPETITION} | entry.long_transaction
        for entry in document.repetitions
        if entry.long_transaction
    ]
    windows = pd.DataFrame(rows, columns=WINDOW_COLUMNS)
    for column in ("began_at", "ended_at"):
        windows[column] = pd.to_datetime(windows[column], utc=True, format="ISO8601")
    return windows


def _t0(jobs: pd.DataFrame) -> pd.Series:
    return jobs.groupby(REPETITION)["enqueued_at"].min().rename("t0")


def seconds_since_t0(frame: pd.DataFrame, column: str, jobs: pd.DataFrame) -> pd.Series:
    """A timestamp column of any per-repetition frame as seconds from its repetition's t0."""
    t0 = frame.join(_t0(jobs), on=REPETITION)["t0"]
    return (frame[column] - t0).dt.total_seconds()


def with_phases(jobs: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """jobs with claim_s (started_at from t0) and the phase of the hold it was claimed in."""
    jobs = jobs.assign(claim_s=seconds_since_t0(jobs, "started_at", jobs))
    joined = jobs.merge(windows[[*REPETITION, "began_at", "ended_at"]], on=REPETITION, how="left")
    phase = np.select(
        [joined["started_at"] < joined["began_at"], joined["started_at"] < joined["ended_at"]],
        ["before", "during"],
        default="after",
    )
    phase = np.where(joined["began_at"].isna(), "", phase)  # a repetition without a hold
    return jobs.assign(phase=phase)


def claim_buckets(jobs: pd.DataFrame, bucket_s: float = 1.0) -> pd.DataFrame:
    """Claim latency over time: per repetition and bucket of claim time, jobs, p50, p95."""
    claimed = jobs.assign(claim_s=seconds_since_t0(jobs, "started_at", jobs))
    claimed["bucket_s"] = (claimed["claim_s"] // bucket_s) * bucket_s
    grouped = claimed.groupby([*REPETITION, "bucket_s"], sort=False)["claim_ms"]
    table = grouped.agg(
        jobs="size",
        claim_p50_ms="median",
        claim_p95_ms=lambda claim: claim.quantile(0.95),
    )
    return table.reset_index().sort_values([*REPETITION, "bucket_s"], kind="stable")


def samples_on_clock(samples: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """bloat.csv with at parsed and t_s, the sample's seconds from its repetition's t0."""
    samples = samples.assign(at=pd.to_datetime(samples["at"], utc=True, format="ISO8601"))
    return samples.assign(t_s=seconds_since_t0(samples, "at", jobs))


def windows_on_clock(windows: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """The holds with from_s and to_s, seconds from their repetition's t0."""
    return windows.assign(
        from_s=seconds_since_t0(windows, "began_at", jobs),
        to_s=seconds_since_t0(windows, "ended_at", jobs),
    )


def bloat_summary(
    jobs: pd.DataFrame,
    samples: pd.DataFrame,
    windows: pd.DataFrame,
    fetches: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per repetition: claim latency before, during and after the hold, and the bloat;
    with `fetches` (fetch-plans.csv), each phase's fetch buffers too."""
    phased = with_phases(jobs, windows)
    rows = []
    for window in windows.to_dict("records"):
        rows.append(
            {key: window[key] for key in REPETITION}
            | {"hold_s": (window["ended_at"] - window["began_at"]).total_seconds()}
            | _claims_by_phase(repetition_rows(phased, window))
            | _bloat_figures(repetition_rows(samples, window))
            | {"cut_short": window["cut_short"], "vacuumed": window["vacuumed"]}
        )
    table = pd.DataFrame(rows)
    if fetches is None or fetches.empty:
        return table
    return table.merge(fetch_summary(fetches), on=REPETITION, how="left")


def _claims_by_phase(jobs: pd.DataFrame) -> dict[str, float]:
    figures: dict[str, float] = {}
    for phase in PHASES:
        # untimed claims (a library whose fetch runs in its own process) are NaN: none
        claims = jobs.loc[jobs["phase"] == phase, "claim_ms"].dropna()
        figures[f"claim_p50_{phase}_ms"] = float(claims.median()) if len(claims) else np.nan
        figures[f"claim_p95_{phase}_ms"] = float(claims.quantile(0.95)) if len(claims) else np.nan
        waits = wait_seconds(jobs)[jobs["phase"] == phase].dropna()
        figures[f"wait_p50_{phase}_s"] = float(waits.median()) if len(waits) else np.nan
        figures[f"wait_p95_{phase}_s"] = float(waits.quantile(0.95)) if len(waits) else np.nan
    for quantile in ("p50", "p95"):
        figures[f"claim_{quantile}_during_vs_before"] = (
            figures[f"claim_{quantile}_during_ms"] / figures[f"claim_{quantile}_before_ms"]
        )
    return figures


def _bloat_figures(samples: pd.DataFrame) -> dict[str, float]:
    """Peaks and ends of the sampled series; sizes grown over the hold."""
    size = (samples["jobs_bytes"] + samples["jobs_index_bytes"])[samples["phase"] == "during"]
    grown = size.max() - size.min() if len(size) else np.nan  # sizes never shrink
    return {
        "jobs_dead_versions_peak": samples["jobs_dead_versions"].max(),
        "jobs_dead_versions_end": samples["jobs_dead_versions"].iloc[-1],
        "tenants_dead_versions_peak": samples["tenants_dead_versions"].max(),
        "jobs_n_dead_tup_peak": samples["jobs_dead"].max(),
        "jobs_kb_grown_during": grown / 1024,
        "holder_xmin_age_peak": samples["holder_xmin_age"].max(),
        "autovacuums": samples["jobs_autovacuums"].max() + samples["tenants_autovacuums"].max(),
        **_dequeue_buffers(samples),
    }


def _dequeue_buffers(samples: pd.DataFrame) -> dict[str, float]:
    """The sampled dequeue's buffers: median before and after the hold, peak during it."""
    buffers = samples.groupby("phase")["dequeue_buffers"]
    medians, peaks = buffers.median(), buffers.max()
    return {
        "dequeue_buffers_before": medians.get("before", np.nan),
        "dequeue_buffers_during_peak": peaks.get("during", np.nan),
        "dequeue_buffers_after": medians.get("after", np.nan),
    }


_BLOAT_COLUMNS = {
    "claim_p50_before_ms": "claim p50 before (ms)",
    "claim_p50_during_ms": "claim p50 during",
    "claim_p50_after_ms": "claim p50 after",
    "claim_p95_before_ms": "claim p95 before",
    "claim_p95_during_ms": "claim p95 during",
    "claim_p95_after_ms": "claim p95 after",
    "claim_p50_during_vs_before": "p50 during / before (x)",
    "wait_p95_before_s": "wait p95 before (s)",
    "wait_p95_during_s": "wait p95 during",
    "wait_p95_after_s": "wait p95 after",
    "dequeue_buffers_before": "dequeue buffers before",
    "dequeue_buffers_during_peak": "dequeue buffers during (peak)",
    "dequeue_buffers_after": "dequeue buffers after",
    "fetch_buffers_p50_before": "fetch buffers p50 before",
    "fetch_buffers_p50_during": "fetch buffers p50 during",
    "fetch_buffers_max_during": "fetch buffers max during",
    "fetch_buffers_p50_after": "fetch buffers p50 after",
    "jobs_dead_versions_peak": "dead versions, jobs (peak)",
    "tenants_dead_versions_peak": "dead versions, queue_tenants (peak)",
    "jobs_dead_versions_end": "dead versions, jobs (end)",
    "jobs_n_dead_tup_peak": "n_dead_tup, jobs (peak)",
    "jobs_kb_grown_during": "jobs + indexes grew during (KB)",
    "autovacuums": "autovacuums",
}


def bloat_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Per strategy and workers: each long-transaction figure's range over repetitions."""
    grouped = table.groupby(["strategy", "workers"], sort=False)
    columns = [column for column in _BLOAT_COLUMNS if column in table]  # fetches: if explained
    headers = ["strategy", "workers", "reps", *(_BLOAT_COLUMNS[c] for c in columns)]
    rows = [
        [
            str(strategy),
            str(workers),
            str(len(group)),
            *(span(group[column].min(), group[column].max()) for column in columns),
        ]
        for (strategy, workers), group in grouped
    ]
    return headers, rows


def bloat_sentences(table: pd.DataFrame) -> list[str]:
    """What the long transaction did, one sentence per strategy and worker count."""
    sentences = []
    for (strategy, workers), group in table.groupby(["strategy", "workers"], sort=False):
        f = {
            column: span(group[column].min(), group[column].max())
            for column in _BLOAT_COLUMNS
            if column in group
        }
        sentences.append(
            f"{strategy}, {workers} workers: the median claim took "
            f"{f['claim_p50_before_ms']} ms before the hold, {f['claim_p50_during_ms']} ms "
            f"during it ({f['claim_p50_during_vs_before']}x) and {f['claim_p50_after_ms']} ms "
            f"after it (p95: {f['claim_p95_before_ms']}, {f['claim_p95_during_ms']}, "
            f"{f['claim_p95_after_ms']} ms; the p95 wait: {f['wait_p95_before_s']}, "
            f"{f['wait_p95_during_s']}, {f['wait_p95_after_s']} s); one dequeue read "
            f"{f['dequeue_buffers_before']} buffers before, up to "
            f"{f['dequeue_buffers_during_peak']} during and {f['dequeue_buffers_after']} "
            f"after; dead row versions in jobs peaked at {f['jobs_dead_versions_peak']} "
            f"(queue_tenants: {f['tenants_dead_versions_peak']}) and stood at "
            f"{f['jobs_dead_versions_end']} at the end; autovacuum ran {f['autovacuums']} times."
            + _fetch_sentence(f)
        )
    return sentences


def _fetch_sentence(f: dict[str, str]) -> str:
    """The library's own fetches, where they were explained (fetch-plans.csv)."""
    if "fetch_buffers_p50_before" not in f:
        return ""
    return (
        f" Its own fetch read a median {f['fetch_buffers_p50_before']} buffers before the "
        f"hold, {f['fetch_buffers_p50_during']} during it (up to "
        f"{f['fetch_buffers_max_during']}) and {f['fetch_buffers_p50_after']} after."
    )


BLOAT_INTRO = (
    "A transaction held a repeatable-read snapshot (the xmin horizon) on its own connection "
    "while the queue churned. Claims are split by the job's started_at: before the hold "
    "began, during it, after it ended. Dead versions: dead row versions still in the heap "
    "(pgstattuple), which pruning removes once the horizon moves; n_dead_tup: the "
    "statistics' count, which only a vacuum lowers. Dequeue buffers: EXPLAIN (ANALYZE, "
    "BUFFERS) of the strategy's dequeue at each sample, rolled back (medians before and "
    "after, the peak during); a library has no one dequeue to explain: with "
    "long_transaction.explain_fetches, its fetch buffers are those auto_explain gave of "
    "each fetch its own workers made (fetch-plans.csv). Raw samples: bloat.csv; per "
    "repetition: bloat-summary.csv."
)


def bloat_section(table: pd.DataFrame) -> Section:
    rows = Table.of(
        bloat_rows(table),
        "Long transaction: claim latency and bloat before, during and after the hold",
    )
    return Section(
        "bloat",
        "Long transaction and bloat",
        BLOAT_INTRO,
        bullets=bloat_sentences(table),
        tables=[rows],
        console=[rows],
    )
