"""Plots from analysis frames, as matplotlib figures (no pyplot, no global state, no
files: harness/report/plots.py encodes them)."""

from __future__ import annotations

import colorsys
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter, ScalarFormatter

from harness.analysis.waits import with_waits

# A hue per tenant class (matplotlib's tab10, in its order), a shade of it per tenant.
CLASS_HUES = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
_LIGHTNESS = (0.25, 0.78)  # the darkest and lightest shade of a class with many tenants


def class_colours(classes: list[str]) -> dict[str, str]:
    """A colour per tenant class, in the order given; past ten, hues spread evenly."""
    return {name: _hue(index, len(classes)) for index, name in enumerate(classes)}


def _hue(index: int, count: int) -> str:
    if count <= len(CLASS_HUES):
        return CLASS_HUES[index]
    red, green, blue = colorsys.hls_to_rgb(index / count, 0.5, 0.65)
    return to_hex((red, green, blue))


def tenant_colours(tenants: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """A colour per (class, tenant id): the class's hue, a shade per tenant from dark to
    light in the tenants' numeric order; no two tenants alike (tested up to 50)."""
    classes = list(dict.fromkeys(tenant_class for tenant_class, _ in tenants))
    hues = class_colours(classes)
    colours = {}
    for tenant_class in classes:
        mine = sorted(tenant for owner, tenant in tenants if owner == tenant_class)
        for rank, tenant in enumerate(mine):
            colours[(tenant_class, tenant)] = _shade(hues[tenant_class], rank, len(mine))
    return colours


def _shade(hue: str, rank: int, count: int) -> str:
    if count == 1:
        return hue
    red, green, blue = to_rgb(hue)
    h, _, s = colorsys.rgb_to_hls(red, green, blue)
    dark, light = _LIGHTNESS
    lightness = dark + (light - dark) * rank / (count - 1)
    return to_hex(colorsys.hls_to_rgb(h, lightness, s))


_CLOCKS = {
    "enqueue_s": "enqueued at (s since the first enqueue)",
    "start_s": "started at: when the wait ended (s since the first enqueue)",
}


def waits_over_time(frame: pd.DataFrame, clock: str) -> Figure:
    """p50 (solid) and p95 (dashed) wait per bucket of `clock`, one panel per tenant class
    on one time axis, one colour per strategy (harness/analysis/waits.py waits_over_run)."""
    classes = list(dict.fromkeys(frame["tenant_class"]))
    figure = Figure(figsize=(min(5.4 * len(classes), 16), 3.0))
    first: Axes | None = None
    for index, tenant_class in enumerate(classes):
        axis = figure.add_subplot(1, len(classes), index + 1, sharex=first, sharey=first)
        first = first or axis
        _percentile_lines(axis, frame[frame["tenant_class"] == tenant_class])
        axis.set_title(f"tenant class: {tenant_class}", fontsize="medium")
        axis.set_xlabel(_CLOCKS[clock], fontsize="small")
        if index == 0:
            axis.set_ylabel("wait (s, log scale)")
    figure.axes[0].legend(loc="best", fontsize="x-small")
    figure.subplots_adjust(wspace=0.15)
    return figure


_LINE_STYLES = ("-", "--", "-.", ":")


def backlog_draining(frame: pd.DataFrame) -> Figure:
    """Each tenant class's jobs still queued over the run, one panel per class on one time
    axis, one line per strategy and worker count (harness/analysis/waits.py
    backlog_over_run): its colour, and a line style of its own, so that two strategies
    that drain alike stay told apart where their lines lie on one another."""
    classes = list(dict.fromkeys(frame["tenant_class"]))
    figure = Figure(figsize=(min(5.4 * len(classes), 16), 3.0))
    first: Axes | None = None
    for index, tenant_class in enumerate(classes):
        axis = figure.add_subplot(1, len(classes), index + 1, sharex=first)
        first = first or axis
        rows = frame[frame["tenant_class"] == tenant_class]
        for line, ((strategy, workers), drawn) in enumerate(
            rows.groupby(["strategy", "workers"], sort=False)
        ):
            axis.plot(
                drawn["at_s"],
                drawn["queued"],
                _LINE_STYLES[line % len(_LINE_STYLES)],
                color=f"C{line}",
                lw=2.2 - 0.4 * (line % 3),
                label=f"{strategy}, {workers} workers",
            )
        axis.set_title(f"tenant class: {tenant_class}", fontsize="medium")
        axis.set_xlabel("s since the first enqueue", fontsize="small")
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
        if index == 0:
            axis.set_ylabel("jobs still queued")
    figure.axes[0].legend(loc="best", fontsize="x-small")
    figure.subplots_adjust(wspace=0.2)
    return figure


def claim_latency(frame: pd.DataFrame) -> Figure:
    """The claims' p50 (solid) and p95 (dashed) latency by when the job started, one
    colour per strategy (from harness/analysis/waits.py claims_over_time)."""
    figure = Figure(figsize=(11, 3.0))
    axis = figure.add_subplot(1, 1, 1)
    _percentile_lines(axis, frame)
    axis.set_xlabel("started at (s since the first enqueue)")
    axis.set_ylabel("claim latency (ms, log scale)")
    axis.legend(loc="best", fontsize="x-small")
    return figure


def _percentile_lines(axis: Axes, frame: pd.DataFrame) -> None:
    """One colour per strategy and worker count: p50 solid, p95 dashed, a marker each."""
    for index, ((strategy, workers), rows) in enumerate(
        frame.groupby(["strategy", "workers"], sort=False)
    ):
        colour = f"C{index}"
        label = f"{strategy}, {workers} workers"
        axis.plot(rows["bucket_s"], rows["p50"], "-o", color=colour, ms=3, label=f"{label}: p50")
        axis.plot(rows["bucket_s"], rows["p95"], "--^", color=colour, ms=3, label=f"{label}: p95")
    axis.set_yscale("log")
    axis.yaxis.set_major_formatter(_PlainLog(labelOnlyBase=False))
    axis.yaxis.set_minor_formatter(_PlainLog(labelOnlyBase=False, minor_thresholds=(1.2, 0.4)))
    axis.grid(True, which="both", alpha=0.3)


class _PlainLog(LogFormatter):
    """Log-scale tick labels as plain numbers (0.2, 4, 40), not 2x10^-1: on the ticks
    matplotlib would label, so a wide range is not crowded."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:g}" if super().__call__(x, pos) else ""


def wait_ecdf(jobs: pd.DataFrame) -> Figure:
    """ECDF of waits, one panel per tenant class, one line per strategy and worker count."""
    jobs = with_waits(jobs)
    classes = list(dict.fromkeys(jobs["tenant_class"]))
    figure = Figure(figsize=(5.5 * len(classes), 4))
    for index, tenant_class in enumerate(classes):
        axis = figure.add_subplot(1, len(classes), index + 1)
        of_class = jobs[jobs["tenant_class"] == tenant_class]
        for (strategy, workers), group in of_class.groupby(["strategy", "workers"], sort=False):
            _ecdf(axis, group["wait_s"], f"{strategy}, {workers} workers")
        _wait_axis(axis, f"tenant class: {tenant_class} (all repetitions)")
    return figure


def timeline(jobs: pd.DataFrame) -> Figure:
    """Which tenant class each worker served, over time: repetition 1 of each strategy;
    in a sweep, one worker count (the largest up to 8) so the rows stay readable."""
    counts = sorted(jobs["workers"].unique())
    shown = max((count for count in counts if count <= 8), default=counts[0])
    jobs = with_waits(jobs[(jobs["repetition"] == 1) & (jobs["workers"] == shown)])
    panels = list(jobs.groupby(["strategy", "workers"], sort=False))
    colours = class_colours(list(dict.fromkeys(jobs["tenant_class"])))
    figure = Figure(figsize=(11, 1.2 + 0.9 * sum(g["worker"].nunique() for _, g in panels)))
    for index, ((strategy, workers), group) in enumerate(panels):
        axis = figure.add_subplot(len(panels), 1, index + 1)
        for (_, tenant_class), bars in group.groupby(["worker", "tenant_class"]):
            spans = list(zip(bars["start_s"], bars["finish_s"] - bars["start_s"], strict=True))
            row = (bars["worker"].iloc[0] - 0.4, 0.8)
            axis.broken_barh(spans, row, color=colours[str(tenant_class)], label=tenant_class)
        axis.set_title(f"{strategy}, {workers} workers, repetition 1")
        axis.set_ylabel("worker")
        axis.set_yticks(sorted(group["worker"].unique()))
        axis.set_xlabel("seconds since the first job was enqueued")
        handles, labels = axis.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        axis.legend(unique.values(), unique.keys(), loc="upper right", fontsize="small")
    figure.subplots_adjust(hspace=0.6)
    return figure


def plans_chart(plans: pd.DataFrame) -> Figure:
    """Per variant, each strategy's dequeue time and buffers, on log scales."""
    captured = plans[plans["skipped"] == ""]
    variants = list(dict.fromkeys(captured["variant"]))
    strategies = list(dict.fromkeys(captured["strategy"]))
    figure = Figure(figsize=(12, 4.5))
    width = 0.8 / max(len(strategies), 1)
    for panel, (column, label) in enumerate(
        [("total_ms", "planning + execution (ms)"), ("shared_buffers", "shared buffers")]
    ):
        axis = figure.add_subplot(1, 2, panel + 1)
        for index, strategy in enumerate(strategies):
            mine = captured[captured["strategy"] == strategy].set_index("variant")
            heights = [mine[column].get(variant, float("nan")) for variant in variants]
            spots = [v + (index - (len(strategies) - 1) / 2) * width for v in range(len(variants))]
            axis.bar(spots, heights, width=width, label=strategy)
        axis.set_yscale("log")
        axis.set_xticks(range(len(variants)), variants)
        axis.set_ylabel(f"{label}, log scale")
        axis.set_title(f"one dequeue: {label}")
        axis.grid(True, axis="y", which="both", alpha=0.3)
    figure.axes[0].legend(fontsize="small")
    return figure


SHARE_TENANTS = 50  # tenant_share draws a band per tenant up to this many, else per class


def tenant_share(jobs: pd.DataFrame, bins: int = 40) -> Figure:
    """Each tenant's share of the jobs completed in each time slice: repetition 1.

    One band per tenant when there are at most SHARE_TENANTS (each class a hue, each
    tenant a shade of it, in numeric order), per tenant class otherwise.
    """
    jobs = with_waits(jobs[jobs["repetition"] == 1])
    classes = list(dict.fromkeys(jobs["tenant_class"]))
    pairs = sorted(
        set(zip(jobs["tenant_class"], jobs["tenant_id"].astype(int), strict=True)),
        key=lambda pair: (classes.index(pair[0]), pair[1]),
    )
    if len(pairs) <= SHARE_TENANTS:
        labels = [f"{tenant_class} {tenant}" for tenant_class, tenant in pairs]
        colours = dict(zip(labels, tenant_colours(pairs).values(), strict=True))
        jobs = jobs.assign(band=jobs["tenant_class"] + " " + jobs["tenant_id"].astype(str))
    else:
        labels, colours = classes, class_colours(classes)
        jobs = jobs.assign(band=jobs["tenant_class"])
    panels = list(jobs.groupby(["strategy", "workers"], sort=False))
    figure = Figure(figsize=(11, 2.8 * len(panels)))
    for index, ((strategy, workers), group) in enumerate(panels):
        axis = figure.add_subplot(len(panels), 1, index + 1)
        width = group["finish_s"].max() / bins
        slices = (group["finish_s"] // width).clip(upper=bins - 1)
        counts = group.groupby([slices, "band"]).size().unstack(fill_value=0)
        counts = counts.reindex(columns=[label for label in labels if label in counts.columns])
        shares = counts.div(counts.sum(axis=1), axis=0).reindex(range(bins), fill_value=0)
        axis.stackplot(
            [(i + 0.5) * width for i in shares.index],
            shares.T.to_numpy(),
            labels=list(shares.columns),
            colors=[colours[label] for label in shares.columns],
            step="mid",
        )
        axis.set_title(f"{strategy}, {workers} workers, repetition 1: who got the workers")
        axis.set_ylabel("share of completions")
        axis.set_xlabel("seconds since the first job was enqueued")
        axis.set_ylim(0, 1)
        axis.legend(
            loc="center left",
            bbox_to_anchor=(1.0, 0.5),
            fontsize="x-small",
            ncols=1 + len(shares.columns) // 18,
        )
    figure.subplots_adjust(hspace=0.6)
    return figure


def compare_ecdf(
    first: pd.DataFrame, second: pd.DataFrame, labels: tuple[str, str], warning: str | None = None
) -> Figure:
    """Waits of two runs, one panel per tenant class, one line per run and strategy;
    `warning` above the panels (runs of different scenarios)."""
    first, second = with_waits(first), with_waits(second)
    classes = list(dict.fromkeys([*first["tenant_class"], *second["tenant_class"]]))
    figure = Figure(figsize=(5.5 * len(classes), 4))
    if warning is not None:
        figure.suptitle(warning, color="darkred", wrap=True)
    for index, tenant_class in enumerate(classes):
        axis = figure.add_subplot(1, len(classes), index + 1)
        for jobs, label, style in ((first, labels[0], "-"), (second, labels[1], "--")):
            of_class = jobs[jobs["tenant_class"] == tenant_class]
            for strategy, group in of_class.groupby("strategy", sort=False):
                _ecdf(axis, group["wait_s"], f"{label}: {strategy}", style)
        _wait_axis(axis, f"tenant class: {tenant_class}")
    return figure


def _ecdf(axis: Axes, waits: pd.Series, label: str, style: str = "-") -> None:
    ordered = waits.clip(lower=1e-4).sort_values()
    share = [(rank + 1) / len(ordered) for rank in range(len(ordered))]
    axis.step(ordered, share, where="post", label=label, linestyle=style)


def _wait_axis(axis: Axes, title: str) -> None:
    axis.set_xscale("log")
    axis.set_xlabel("wait from enqueue to start (s, log scale)")
    axis.set_ylabel("share of jobs")
    axis.set_title(title)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(loc="lower right", fontsize="small")


def scaling(summary: pd.DataFrame) -> Figure:
    """A worker sweep: p50 and p95 wait per class, and throughput, against the worker
    count; one line per strategy (and class), medians over repetitions."""
    typical = summary.groupby(["strategy", "tenant_class", "workers"], sort=False).median(
        numeric_only=True
    )
    figure = Figure(figsize=(16, 4.2))
    panels = [("wait_p50_s", "p50 wait (s)"), ("wait_p95_s", "p95 wait (s)")]
    for index, (metric, label) in enumerate(panels):
        axis = figure.add_subplot(1, 3, index + 1)
        for (strategy, tenant_class), group in typical.groupby(level=[0, 1], sort=False):
            if tenant_class == "all":
                continue
            counts = group.index.get_level_values("workers")
            axis.plot(counts, group[metric], marker="o", label=f"{strategy}, {tenant_class}")
        _workers_axis(axis, label)
        axis.set_yscale("log")
    axis = figure.add_subplot(1, 3, 3)
    for strategy, group in typical.groupby(level=0, sort=False):
        first_class = group.index.get_level_values("tenant_class")[0]
        per_count = group.xs(first_class, level="tenant_class")
        counts = per_count.index.get_level_values("workers")
        axis.plot(counts, per_count["throughput_jobs_s"], marker="o", label=str(strategy))
    _workers_axis(axis, "throughput (jobs/s)")
    figure.subplots_adjust(wspace=0.3)
    return figure


def _workers_axis(axis: Axes, label: str) -> None:
    axis.set_xscale("log", base=2)
    axis.xaxis.set_major_formatter(ScalarFormatter())  # 16, not 2^4
    axis.set_xlabel("workers")
    axis.set_ylabel(label)
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize="small")


def bloat_over_time(buckets: pd.DataFrame, samples: pd.DataFrame, windows: pd.DataFrame) -> Figure:
    """A long transaction's effect, repetition 1 of each strategy: the workers' claim
    latency, dead row versions, and one sampled dequeue's buffers over time, the hold
    shaded. Inputs from harness/analysis/bloat.py: claim_buckets, samples_on_clock and
    windows_on_clock."""
    panels = list(windows[windows["repetition"] == 1].groupby(["strategy", "workers"], sort=False))
    figure = Figure(figsize=(16, 3.2 * len(panels)))
    for row, ((strategy, workers), window) in enumerate(panels):
        title = f"{strategy}, {workers} workers"
        axes = [figure.add_subplot(len(panels), 3, 3 * row + column) for column in (1, 2, 3)]
        _claim_latency(axes[0], _first_repetition(buckets, strategy, workers), title)
        sampled = _first_repetition(samples, strategy, workers)
        _dead_versions(axes[1], sampled, title)
        axes[2].plot(sampled["t_s"], sampled["dequeue_buffers"], label="shared buffers")
        axes[2].set_yscale("log")
        axes[2].set_ylabel("buffers (log)")
        axes[2].set_title(f"{title}: one dequeue (EXPLAIN)")
        hold = window.iloc[0]
        for axis in axes:
            axis.axvspan(hold["from_s"], hold["to_s"], color="0.85", label="transaction held")
            axis.set_xlabel("seconds since the first job was enqueued")
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(loc="upper left", fontsize="x-small")
    figure.subplots_adjust(hspace=0.7, wspace=0.3)
    return figure


_PHASE_SHADES = {"warmup": "0.93", "held": "0.8"}


def horizon_over_time(
    series: pd.DataFrame,
    windows: pd.DataFrame,
    fetches: pd.DataFrame | None,
    phases: list[tuple[str, float, float]],
    window_s: float,
    cuts: dict[tuple[Any, Any], float] | None = None,
) -> Figure:
    """A horizon, repetition 1 of each strategy: dead tuples, the tables' and indexes'
    size, the p99 wait per window and the explained fetch's buffers over time, the
    warm-up and held phases shaded. Inputs: horizon.csv, horizon-windows.csv and
    fetch-plans.csv (harness/analysis/horizon.py); `cuts`: per strategy and workers, the
    second its repetition 1 was cut at (run.json's `cut`), a dashed line."""
    first = series[series["repetition"] == 1]
    panels = list(first.groupby(["strategy", "workers"], sort=False))
    figure = Figure(figsize=(18, 3.2 * len(panels)))
    for row, ((strategy, workers), sampled) in enumerate(panels):
        title = f"{strategy}, {workers} workers"
        axes = [figure.add_subplot(len(panels), 4, 4 * row + column) for column in (1, 2, 3, 4)]
        axes[0].plot(sampled["t_s"], sampled["dead"], label="n_dead_tup")
        axes[0].plot(sampled["t_s"], sampled["live"], label="n_live_tup", alpha=0.6)
        axes[0].set_ylabel("tuples")
        axes[1].plot(sampled["t_s"], sampled["table_bytes"] / 2**20, label="tables")
        axes[1].plot(sampled["t_s"], sampled["index_bytes"] / 2**20, label="indexes")
        axes[1].set_ylabel("MiB")
        mine = _first_repetition(windows, strategy, workers)
        pooled = mine[mine["tenant_class"] == "all"]
        ends = [*pooled["from_s"], pooled["from_s"].iloc[-1] + window_s] if len(pooled) else []
        p99 = [*pooled["wait_p99_s"], *pooled["wait_p99_s"].iloc[-1:]]
        axes[2].step(ends, p99, where="post", label="p99 wait")
        axes[2].set_ylabel("seconds")
        cut_s = (cuts or {}).get((strategy, workers))
        if cut_s is not None and pooled.empty:
            axes[2].text(
                0.5,
                0.5,
                "no p99: its jobs are in no file",
                ha="center",
                transform=axes[2].transAxes,
            )
        if fetches is not None:
            explained = _first_repetition(fetches, strategy, workers)
            axes[3].plot(explained["at_s"], explained["shared_buffers"], ".", label="one fetch")
        axes[3].set_ylabel("shared buffers")
        for axis, name in zip(axes, ("dead tuples", "size", "p99 wait", "fetch"), strict=True):
            axis.set_title(f"{title}: {name}")
            for phase, start, end in phases:
                if phase in _PHASE_SHADES:
                    axis.axvspan(start, end, color=_PHASE_SHADES[phase], label=phase)
            if cut_s is not None:
                axis.axvline(cut_s, color="#a11", linestyle="--", label=f"cut at {cut_s:.4g} s")
            axis.set_xlabel("seconds since the start")
            axis.grid(True, alpha=0.3)
            axis.legend(loc="upper left", fontsize="x-small")
    figure.subplots_adjust(hspace=0.7, wspace=0.3)
    return figure


def _claim_latency(axis: Axes, claims: pd.DataFrame, title: str) -> None:
    for column, label in (("claim_p50_ms", "p50"), ("claim_p95_ms", "p95")):
        axis.step(claims["bucket_s"], claims[column], where="post", label=label)
    axis.set_yscale("log")
    axis.set_ylabel("claim latency (ms, log)")
    axis.set_title(f"{title}: the workers' claims")


def _dead_versions(axis: Axes, sampled: pd.DataFrame, title: str) -> None:
    for column, label in (
        ("jobs_dead_versions", "jobs: dead versions in the heap"),
        ("tenants_dead_versions", "queue_tenants: dead versions"),
        ("jobs_dead", "jobs: n_dead_tup (statistics)"),
    ):
        axis.plot(sampled["t_s"], sampled[column], label=label)
    axis.set_ylabel("row versions")
    axis.set_title(f"{title}: dead tuples")


def _first_repetition(frame: pd.DataFrame, strategy: object, workers: object) -> pd.DataFrame:
    chosen = (frame["strategy"] == strategy) & (frame["workers"] == workers)
    return frame[chosen & (frame["repetition"] == 1)]


def trend_chart(trends: pd.DataFrame) -> Figure:
    """Each trended figure over the runs, oldest first: the value, its range as an error
    bar, and the reference shaded where there is one (harness/analysis/history.py)."""
    names = list(dict.fromkeys(trends["figure"]))
    columns = 2 if len(names) > 1 else 1
    rows = -(-len(names) // columns)
    figure = Figure(figsize=(7 * columns, 3.2 * rows))
    for index, name in enumerate(names):
        axis = figure.add_subplot(rows, columns, index + 1)
        mine = trends[trends["figure"] == name].reset_index(drop=True)
        spots = range(len(mine))
        values = mine["value"].to_numpy(float)
        below = (values - mine["low"].to_numpy(float)).clip(min=0)
        above = (mine["high"].to_numpy(float) - values).clip(min=0)
        axis.errorbar(list(spots), values, yerr=[below, above], marker="o", capsize=3)
        if mine["reference_low"].notna().any():
            low = float(mine["reference_low"].dropna().iloc[-1])
            high = float(mine["reference_high"].dropna().iloc[-1])
            if low == high:
                axis.axhline(low, color="0.5", linestyle="--", label="reference")
            else:
                axis.axhspan(low, high, color="0.85", label="reference")
            axis.legend(loc="best", fontsize="x-small")
        axis.set_xticks(
            list(spots),
            [_run_label(row) for _, row in mine.iterrows()],
            rotation=30,
            ha="right",
            fontsize="x-small",
        )
        axis.set_ylabel(str(mine["unit"].iloc[0]))
        axis.set_title(name, fontsize="small", wrap=True)
        axis.grid(True, alpha=0.3)
    figure.subplots_adjust(hspace=0.9, wspace=0.25)
    return figure


def _run_label(row: pd.Series) -> str:
    """A run on the x axis: its id's date and time, and its commit where known."""
    commit = row["commit"] if isinstance(row["commit"], str) else ""
    return f"{str(row['run_id'])[:15]}\n{commit[:7]}".strip()
