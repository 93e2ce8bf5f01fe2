"""Pure analysis of a long steady run (`horizon`, docs/long-horizon.md): the queue over time,
and whether it drifts.

Inputs are jobs.csv, horizon.csv (the sampler's series), fetch-plans.csv (the fetch
explained at the horizon's moments) and the scenario's horizon. Definitions:
  t_s       = a sample's seconds from the clock's start (the holder's clock); a job's
              start in seconds from its repetition's first enqueue (about the same
              moment: the first arrival is a Poisson gap after the start)
  window    = floor(t_s / window_s); its phase is the phase at its middle
  size      = the queue's tables and indexes together (table_bytes + index_bytes)
  first, last = the steady phase's first and last window: [warmup_s, + window_s) and
              [held.from_s - window_s, held.from_s); fetch buffers' are the steady
              phase's first and last explained moment (explain_every_s apart)
  change    = last - first of the window's statistic: the median of the samples in it
              (dead tuples, size, fetch buffers), the 99th percentile of the waits of
              the jobs started in it (p99); its interval: the 2.5th and 97.5th
              percentiles of the change over BOOTSTRAP_DRAWS resamples of each window
              (numpy's default_rng, seeded by the scenario's seed and the repetition)
  slope     = Theil-Sen: the median of the slopes between every two points, per hour;
              size's over the steady phase's samples, p99's over its windows
  verdict   = growing: over the steady phase the size grows by GROWTH_PER_H of its
              median an hour or more, or the p99's change is above zero over its whole
              interval and at least P99_GROWTH of the first window's;
              recovering: not growing, but at the run's end (the recovery's last
              window) dead tuples or p99 stand above the steady phase's last window by
              more than RECOVERY_MARGIN: the held phase's mark is not gone yet;
              stable: neither
  cut       = a repetition the run's end cut short, at its latest sample (sampled but
              not in run.json's `repetitions`: its `cut`, or a run killed outright):
              first and last are the steady phase's first and last whole window
              before the cut, its end is not measured and its jobs are in no file (no
              p99); with fewer than 2 whole windows, the verdict is `cut`
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.bloat import seconds_since_t0
from harness.analysis.frames import ALL_TENANTS, REPETITION, repetition_rows, wait_seconds
from harness.report.cells import number, span
from harness.report.sections import Section, Table
from harness.scenario.model import Horizon

BOOTSTRAP_DRAWS = 1000
GROWTH_PER_H = 0.10  # size growth an hour, as a share of the steady phase's median size
P99_GROWTH = 0.20  # a p99 change, as a share of the first window's p99
RECOVERY_MARGIN = 0.20  # the end above the steady phase's last window by this share
# A size that grows is "rows kept" where the live rows grow by this many rows or more per
# job run (a library that keeps each finished job, or its log: a row or more a job),
# "dead space" where they do not (a queue whose rows come and go while its files grow:
# a handful in flight, 8 one minute and 18 the next, is no row kept). Counted in rows a
# job, not as a share of the live rows' median: a share of a handful is any size.
KEPT_ROWS_PER_JOB = 0.5
FIGURES = ("dead", "size", "p99", "fetch_buffers")
Statistic = Callable[[np.ndarray], np.ndarray]


def theil_sen(x: np.ndarray | pd.Series, y: np.ndarray | pd.Series) -> float:
    """The median of the slopes between every two points of distinct x (nan if none)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    first, second = np.triu_indices(len(x), k=1)
    run = x[second] - x[first]
    distinct = run != 0
    if not distinct.any():
        return float("nan")
    return float(np.median((y[second] - y[first])[distinct] / run[distinct]))


def _median(draws: np.ndarray) -> np.ndarray:
    return np.median(draws, axis=-1)


def _p99(draws: np.ndarray) -> np.ndarray:
    return np.quantile(draws, 0.99, axis=-1)


def bootstrap_change(
    first: np.ndarray | list[float],
    last: np.ndarray | list[float],
    statistic: Statistic,
    rng: np.random.Generator,
) -> tuple[float, float, float]:
    """(change, low, high): statistic(last) - statistic(first), and the 95 % interval of
    that change over BOOTSTRAP_DRAWS resamples of each window; nans where one is empty."""
    before, after = _numbers(first), _numbers(last)
    if not len(before) or not len(after):
        return float("nan"), float("nan"), float("nan")
    change = float(statistic(after) - statistic(before))
    draws = statistic(_resampled(after, rng)) - statistic(_resampled(before, rng))
    low, high = np.quantile(draws, [0.025, 0.975])
    return change, float(low), float(high)


def _numbers(values: np.ndarray | list[float]) -> np.ndarray:
    found = np.asarray(values, float)
    return found[~np.isnan(found)]


def _resampled(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return values[rng.integers(0, len(values), size=(BOOTSTRAP_DRAWS, len(values)))]


WINDOW_COLUMNS = [
    *REPETITION,
    "window",
    "tenant_class",
    "from_s",
    "phase",
    "jobs",
    "jobs_per_s",
    "wait_p50_s",
    "wait_p95_s",
    "wait_p99_s",
]


def horizon_windows(jobs: pd.DataFrame | None, horizon: Horizon) -> pd.DataFrame:
    """Per repetition, window and tenant class (and all): jobs started, jobs/s, wait
    p50, p95 and p99, the window's phase; no rows without jobs (a run cut short in its
    first repetition)."""
    started = _started(jobs)
    if started.empty:
        return pd.DataFrame(columns=WINDOW_COLUMNS)
    started["window"] = (started["start_s"] // horizon.window_s).astype(int)
    pooled = pd.concat([started, started.assign(tenant_class=ALL_TENANTS)])
    grouped = pooled.groupby([*REPETITION, "window", "tenant_class"], sort=True)["wait_s"]
    table = grouped.agg(
        jobs="size",
        wait_p50_s="median",
        wait_p95_s=lambda waits: waits.quantile(0.95),
        wait_p99_s=lambda waits: waits.quantile(0.99),
    ).reset_index()
    table.insert(4, "from_s", table["window"] * horizon.window_s)
    middle = table["from_s"] + horizon.window_s / 2
    table.insert(5, "phase", [horizon.phase_at(t) for t in middle])
    table.insert(7, "jobs_per_s", table["jobs"] / horizon.window_s)
    return table


def _started(jobs: pd.DataFrame | None) -> pd.DataFrame:
    """jobs with start_s (seconds from the repetition's first enqueue) and wait_s."""
    if jobs is None or jobs.empty:
        return pd.DataFrame(columns=[*REPETITION, "tenant_class", "start_s", "wait_s"])
    return jobs.assign(
        start_s=seconds_since_t0(jobs, "started_at", jobs), wait_s=wait_seconds(jobs)
    )


Cuts = dict[tuple[Any, ...], float]  # a repetition's keys -> its latest sample's seconds


def horizon_drift(
    jobs: pd.DataFrame | None,
    series: pd.DataFrame,
    fetches: pd.DataFrame | None,
    horizon: Horizon,
    seed: int,
    cuts: Cuts | None = None,
) -> pd.DataFrame:
    """Per repetition: each figure's first and last steady window, its change and
    interval, the slopes, the held phase's peak, the end, and the verdict. `cuts`: the
    repetition a run's end cut short (run.json's `cut`), whose drift is over the steady
    phase's whole windows before the cut, where there are two or more."""
    windows = horizon_windows(jobs, horizon)
    started = _started(jobs)
    rows = []
    for keys, samples in series.groupby(REPETITION, sort=False):
        repetition: dict[Hashable, Any] = dict(zip(REPETITION, keys, strict=True))
        rng = np.random.default_rng([seed, int(str(repetition["repetition"]))])
        mine = _Repetition(
            horizon,
            samples.assign(size=samples["table_bytes"] + samples["index_bytes"]),
            repetition_rows(started, repetition),
            repetition_rows(windows, repetition),
            repetition_rows(fetches, repetition) if fetches is not None else None,
            (cuts or {}).get(tuple(keys)),
        )
        rows.append(repetition | mine.figures(rng))
    return pd.DataFrame(rows)


class _Repetition:
    """One repetition's frames, and its drift figures."""

    def __init__(
        self,
        horizon: Horizon,
        samples: pd.DataFrame,
        jobs: pd.DataFrame,
        windows: pd.DataFrame,
        fetches: pd.DataFrame | None,
        cut_s: float | None = None,
    ) -> None:
        self.horizon, self.samples, self.jobs = horizon, samples, jobs
        self.windows = windows[windows["tenant_class"] == ALL_TENANTS]
        self.fetches, self.cut_s = fetches, cut_s
        start, end = next((a, b) for name, a, b in horizon.phases if name == "steady")
        self.whole = int((end - start) // horizon.window_s)  # the steady phase's windows
        if cut_s is not None and cut_s < end:
            # cut in or before the steady phase: its whole windows before the cut
            self.whole = max(0, int((cut_s - start) // horizon.window_s))
            end = start + self.whole * horizon.window_s
        self.steady = (start, end)
        self.first = (start, start + horizon.window_s)
        self.last = (end - horizon.window_s, end)
        self.end = (horizon.duration_s - horizon.window_s, horizon.duration_s)
        if cut_s is not None and cut_s < horizon.duration_s:
            self.end = (horizon.duration_s, horizon.duration_s)  # never reached: no end

    def figures(self, rng: np.random.Generator) -> dict[str, Any]:
        found: dict[str, Any] = {"cut_s": self.cut_s if self.cut_s is not None else float("nan")}
        for figure, values, statistic in (
            ("dead", self._sampled("dead"), _median),
            ("size", self._sampled("size"), _median),
            ("p99", self._waits, _p99),
        ):
            found |= _change(figure, values(self.first), values(self.last), statistic, rng)
        found |= _change("fetch_buffers", *self._fetch_moments(), _median, rng)
        found |= self._slopes() | self._peaks()
        if self.cut_s is None:
            return found | _verdict(found)
        cut = f"cut at {number(self.cut_s)} s"
        if self.whole < 2:
            start = number(self.steady[0])
            return found | {
                "verdict": "cut",
                "why": f"{cut}: {self.whole} whole window of the steady phase (from {start} s) "
                "before it, drift needs 2",
            }
        found |= _verdict(found)
        steady = f"the steady phase to {number(self.steady[1])} s"
        jobs = ", no p99 (its jobs are in no file)" if self.jobs.empty else ""
        return found | {"why": f"{cut}, drift over {steady}, no end{jobs}: {found['why']}"}

    def _sampled(self, column: str) -> Callable[[tuple[float, float]], np.ndarray]:
        def within(window: tuple[float, float]) -> np.ndarray:
            t = self.samples["t_s"]
            return self.samples.loc[(t >= window[0]) & (t < window[1]), column].to_numpy(float)

        return within

    def _waits(self, window: tuple[float, float]) -> np.ndarray:
        start = self.jobs["start_s"]
        return self.jobs.loc[(start >= window[0]) & (start < window[1]), "wait_s"].to_numpy(float)

    def _fetch_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """The buffers of the fetches explained at the steady phase's first and last
        moment (a moment: the fetches of one explain_every_s step)."""
        empty = np.array([], float)
        if self.fetches is None or self.fetches.empty:
            return empty, empty
        at = self.fetches["at_s"]
        steady = self.fetches[(at >= self.steady[0]) & (at < self.steady[1])]
        if steady.empty:
            return empty, empty
        moment = (steady["at_s"] // self.horizon.explain_every_s).astype(int)
        buffers = steady["shared_buffers"]
        return (
            buffers[moment == moment.min()].to_numpy(float),
            buffers[moment == moment.max()].to_numpy(float),
        )

    def _slopes(self) -> dict[str, float]:
        t = self.samples["t_s"]
        steady = self.samples[(t >= self.steady[0]) & (t < self.steady[1])]
        middle = self.windows["from_s"] + self.horizon.window_s / 2
        whole = (self.windows["from_s"] >= self.steady[0]) & (
            self.windows["from_s"] + self.horizon.window_s <= self.steady[1]
        )
        size_slope = theil_sen(steady["t_s"] / 3600, steady["size"])
        median_size = float(steady["size"].median()) if len(steady) else float("nan")
        live_slope = theil_sen(steady["t_s"] / 3600, steady["live"])
        median_live = float(steady["live"].median()) if len(steady) else float("nan")
        hours = (self.steady[1] - self.steady[0]) / 3600
        jobs_per_h = len(self._waits(self.steady)) / hours if hours > 0 else 0.0
        return {
            "size_slope_bytes_per_h": size_slope,
            "size_slope_share_per_h": size_slope / median_size if median_size else float("nan"),
            "live_slope_share_per_h": live_slope / median_live if median_live else 0.0,
            "live_slope_per_h": live_slope,
            "jobs_per_h": jobs_per_h,
            "live_rows_per_job": live_slope / jobs_per_h if jobs_per_h else float("nan"),
            "p99_slope_s_per_h": theil_sen(
                middle[whole] / 3600, self.windows.loc[whole, "wait_p99_s"]
            ),
        }

    def _peaks(self) -> dict[str, float]:
        """The run's dead tuples (peak, median), the held phase's peaks, the end's."""
        samples, phase = self.samples, self.samples["phase"]
        held = self.windows[self.windows["phase"] == "held"]
        end_dead = self._sampled("dead")(self.end)
        end_waits = self._waits(self.end)
        return {
            "dead_peak": _max(samples["dead"]),
            "dead_median": float(samples["dead"].median()),
            "dead_held_peak": _max(samples.loc[phase == "held", "dead"]),
            "dead_end": float(np.median(end_dead)) if len(end_dead) else float("nan"),
            "p99_held_peak": _max(held["wait_p99_s"]),
            "p99_end": float(np.quantile(end_waits, 0.99)) if len(end_waits) else float("nan"),
            "oldest_xmin_age_peak": _max(samples["oldest_xmin_age"]),
            "autovacuums": _max(samples["autovacuums"]) - _min(samples["autovacuums"]),
            "wal_mb": (_max(samples["wal_bytes"]) - _min(samples["wal_bytes"])) / 2**20,
        } | self._gaps()

    def _gaps(self) -> dict[str, float]:
        """The sampler's books: its samples, the longest interval between two, and how
        many intervals were over two sample_s (samples missed: a stalled sampler, or a
        machine too busy to keep its clock)."""
        gaps = np.diff(np.sort(self.samples["t_s"].to_numpy(float)))
        return {
            "samples": float(len(self.samples)),
            "sample_gap_max_s": float(gaps.max()) if len(gaps) else float("nan"),
            "sample_gaps": float((gaps > 2 * self.horizon.sample_s).sum()),
        }


def _max(values: pd.Series) -> float:
    return float(values.max()) if len(values) else float("nan")


def _min(values: pd.Series) -> float:
    return float(values.min()) if len(values) else float("nan")


def _change(
    figure: str,
    first: np.ndarray,
    last: np.ndarray,
    statistic: Statistic,
    rng: np.random.Generator,
) -> dict[str, float]:
    change, low, high = bootstrap_change(first, last, statistic, rng)
    return {
        f"{figure}_first": float(statistic(first)) if len(first) else float("nan"),
        f"{figure}_last": float(statistic(last)) if len(last) else float("nan"),
        f"{figure}_change": change,
        f"{figure}_change_low": low,
        f"{figure}_change_high": high,
    }


def grown(f: Any) -> list[str]:
    """The figures whose growth makes a repetition `growing`: size, p99 (`f`: its row of
    horizon-drift.csv, or its figures)."""
    return [
        name
        for name, grows in (
            ("size", f["size_slope_share_per_h"] >= GROWTH_PER_H),
            ("p99", f["p99_change_low"] > 0 and f["p99_change"] >= P99_GROWTH * f["p99_first"]),
        )
        if grows
    ]


def size_growth(f: Any) -> str | None:
    """What a growing size is made of: "rows kept" where the live rows grow by
    KEPT_ROWS_PER_JOB or more a job run, else "dead space"; None where no job ran in the
    steady phase, or for a row of an older horizon-drift.csv, which has no rows a job."""
    per_job = f.get("live_rows_per_job") if hasattr(f, "get") else None
    if per_job is None or pd.isna(per_job):
        return None
    return "rows kept" if per_job >= KEPT_ROWS_PER_JOB else "dead space"


def _verdict(f: dict[str, Any]) -> dict[str, str]:
    """growing, recovering or stable, and why, from one repetition's figures."""
    growing = []
    if "size" in grown(f):
        kind = size_growth(f)
        live = (
            f", its live rows {_signed(f['live_slope_per_h'])} an hour, "
            f"{number(f['live_rows_per_job'])} a job run"
        )
        said = {"rows kept": f"{live}: rows kept", "dead space": f"{live}: dead space"}
        growing.append(
            f"size grows {f['size_slope_share_per_h']:.0%} of its median an hour "
            f"({number(f['size_slope_bytes_per_h'] / 1024)} KB/h){said.get(str(kind), '')}"
        )
    if "p99" in grown(f):
        growing.append(
            f"p99 rose {number(f['p99_first'])} -> {number(f['p99_last'])} s "
            f"(+{number(f['p99_change_low'])} to +{number(f['p99_change_high'])} s)"
        )
    if growing:
        return {"verdict": "growing", "why": "; ".join(growing)}
    behind = [
        f"{name} at the end {number(f[end])} against {number(f[last])} at the steady end"
        for name, end, last in (
            ("dead tuples", "dead_end", "dead_last"),
            ("p99", "p99_end", "p99_last"),
        )
        if f[end] > (1 + RECOVERY_MARGIN) * f[last]
    ]
    if behind:
        return {"verdict": "recovering", "why": "; ".join(behind)}
    return {"verdict": "stable", "why": "no growth over the steady phase, back by the end"}


def _changes(group: pd.DataFrame, figure: str) -> str:
    """Each repetition's first -> last, change [95 % interval]; repetitions by '; '."""
    return "; ".join(
        f"{number(row[f'{figure}_first'])} -> {number(row[f'{figure}_last'])}, "
        f"{_signed(row[f'{figure}_change'])} [{_signed(row[f'{figure}_change_low'])}, "
        f"{_signed(row[f'{figure}_change_high'])}]"
        for _, row in group.iterrows()
    )


def _signed(value: float) -> str:
    text = number(value)
    return text if text == "-" or value < 0 else f"+{text}"


def _range(group: pd.DataFrame, column: str) -> str:
    return span(group[column].min(), group[column].max())


def _sampled(group: pd.DataFrame) -> str:
    """The sampler's samples and its longest gap, each a range over the repetitions;
    "-" for an older horizon-drift.csv, which has neither."""
    if "samples" not in group or "sample_gap_max_s" not in group:
        return "-"
    return f"{_range(group, 'samples')} ({_range(group, 'sample_gap_max_s')})"


DRIFT_KEYS = ["strategy", "workers"]
DRIFT_FIGURES = [
    "reps",
    "samples (longest gap, s)",
    "dead tuples peak",
    "dead tuples median",
    "size slope (KB/h)",
    "p99 wait (s): first -> last, change [95 %]",
    "fetch buffers first -> last",
    "verdict",
]


def drift_rows(drift: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Per strategy and workers (DRIFT_KEYS): each figure's range over repetitions and
    the verdicts (DRIFT_FIGURES)."""
    headers = [*DRIFT_KEYS, *DRIFT_FIGURES]
    rows = []
    for (strategy, workers), group in drift.groupby(["strategy", "workers"], sort=False):
        kb = group["size_slope_bytes_per_h"] / 1024
        rows.append(
            [
                str(strategy),
                str(workers),
                str(len(group)),
                _sampled(group),
                _range(group, "dead_peak"),
                _range(group, "dead_median"),
                span(kb.min(), kb.max()),
                _changes(group, "p99"),
                f"{_range(group, 'fetch_buffers_first')} -> {_range(group, 'fetch_buffers_last')}",
                ", ".join(dict.fromkeys(_verdicts(group))),
            ]
        )
    return headers, rows


def _verdicts(group: pd.DataFrame) -> list[str]:
    """Each repetition's verdict, what grew after a growing one's (`growing (size)`),
    `(cut)` after a cut one's."""
    said = []
    for _, row in group.iterrows():
        verdict = str(row["verdict"])
        if verdict == "growing":
            kind = size_growth(row)
            what = [f"size: {kind}" if name == "size" and kind else name for name in grown(row)]
            verdict += f" ({', '.join(what)})"
        if "cut_s" in row and pd.notna(row["cut_s"]) and row["verdict"] != "cut":
            verdict += " (cut)"
        said.append(verdict)
    return said


def drift_sentences(drift: pd.DataFrame) -> list[str]:
    """Each repetition's verdict and why; where the sampler missed (an interval over two
    sample_s), how often and its longest gap."""
    said = []
    for row in drift.to_dict("records"):
        missed = float(row.get("sample_gaps", 0.0))
        gaps = (
            f". The sampler missed: {number(missed)} intervals over two sample_s, the longest "
            f"{number(float(row['sample_gap_max_s']))} s; the series has holes there."
            if missed > 0
            else ""
        )
        said.append(
            f"{row['strategy']}, {row['workers']} workers, repetition {row['repetition']}: "
            f"{row['verdict']} ({row['why']}){gaps}"
        )
    return said


HORIZON_INTRO = (
    "A long steady run: the tenant groups' streams through warm-up, a steady phase, a "
    "held phase (analytics-like readers holding repeatable-read snapshots) and recovery; "
    "the queue's own tables and indexes sampled every sample_s, the fetch explained "
    "every explain_every_s. Drift compares the steady phase's first window with its last "
    "(the change and its 95 % bootstrap interval, seeded) and gives Theil-Sen slopes per "
    "hour. Verdict: growing (the size grows 10 % of its median an hour or more, or the "
    "p99's change is above zero over its interval and 20 % or more of the first window's; "
    "a growing size is 'rows kept' where the live rows grow by half a row or more for each "
    "job run, 'dead space' where they do not), recovering (not growing, but dead tuples or p99 at "
    "the end stand over 20 % above the steady phase's last window), stable (neither). "
    "Series: horizon.csv, "
    "horizon-relations.csv, horizon-waits.csv; per window: horizon-windows.csv; per "
    "repetition: horizon-drift.csv."
)


def horizon_section(drift: pd.DataFrame) -> Section:
    table = Table.of(drift_rows(drift), "Horizon: drift over the steady phase, and the verdict")
    return Section(
        "horizon",
        "Horizon: drift over a long steady run",
        HORIZON_INTRO,
        bullets=drift_sentences(drift),
        tables=[table],
        console=[table],
    )
