"""What a run's queue cost its workers, measured from its jobs table, for the simulator.

A worker's cycle, as the server's clock records it in jobs.csv:

  ... finished_at ──claim──▶ started_at ──duration + completion──▶ finished_at ──claim──▶ ...

- claim: from a worker's finished_at to its next started_at, while a job was queued for
  it (the next job it took was enqueued before it finished): the completing statement's
  return, the dequeue (and `served`) and the `start` statement up to its
  clock_timestamp(). What a claim costs the schedule; the client-side `claim_ms` (begin
  to commit, as the worker saw it) is kept beside it but not simulated, since its last
  round trip overlaps the next two figures.
- completion: finished_at - started_at minus the job's drawn duration_ms: the claim's
  commit returning, the sleep's overshoot and the `complete` statement up to its clock.
- poll: how often an idle worker looks again, its poll_interval_ms plus an empty
  dequeue. Estimated from the empty polls run.json counts over the workers' idle time,
  where there are enough of them; else the scenario's interval plus the median claim_ms.
- overhead by repetition: each repetition's mean claim + completion, kept to show how
  steady the machine was (on a shared machine it moves by tens of percent between
  back-to-back repetitions, and a prediction can be no closer than that).
- busy share: mean duration / (mean duration + mean claim + mean completion), the share
  of a busy worker's time spent on the work itself: how fast a backlog drains per worker,
  against a worker whose queue costs nothing.
- growth: a straight line through the median claim and completion against the worker
  count, over the strategy's worker counts that were not saturated (a busy share below
  SATURATED of the strategy's best: the drain no longer grows with the workers), never
  falling (a negative slope is noise: flat at the mean); used for worker counts the run
  did not measure.

Costs are kept as distributions (101 quantiles each), per strategy and worker count, and
the simulator draws from them. Pure: no database, no files; CalibrationDocument is the
format of calibration.json, a file derived from the run's raw files, on the
versioned-document base (harness/results/versioned.py).

Format history (CALIBRATION_FORMAT_VERSION):
  1  first version.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from harness.analysis.simulate import Costs
from harness.results.versioned import UnreadableDocument, Versioned

CALIBRATION_FORMAT_VERSION = 1
QUANTILES = 101  # every percentile, 0 to 100
ENOUGH_EMPTY_POLLS = 25  # per worker: below this, the edges of a repetition dominate the count
SATURATED = 0.9  # a busy share below this fraction of the strategy's best
PAIR = ["strategy", "workers"]
REPETITION = [*PAIR, "repetition"]


@dataclass(frozen=True)
class CostDistribution:
    """One cost's distribution in ms, as its quantiles at evenly spaced probabilities."""

    quantiles_ms: tuple[float, ...]
    count: int

    @classmethod
    def of(cls, values_ms: Iterable[float]) -> CostDistribution:
        values = np.asarray(list(values_ms), dtype=float)
        values = np.clip(values[~np.isnan(values)], 0.0, None)  # a stuck job has no finish
        if len(values) == 0:  # not measured (a library's workers report no claim_ms): free
            return cls((0.0,) * QUANTILES, 0)
        quantiles = np.quantile(values, np.linspace(0, 1, QUANTILES))
        return cls(tuple(round(float(q), 4) for q in quantiles), len(values))

    @property
    def median_ms(self) -> float:
        return float(np.interp(0.5, self._probabilities(), self.quantiles_ms))

    @property
    def mean_ms(self) -> float:
        """The mean of what draw_ms returns: the quantile function's average."""
        return float(np.trapezoid(self.quantiles_ms, self._probabilities()))

    def draw_ms(self, rng: random.Random) -> float:
        """Inverse transform: a uniform draw through the quantile function, linearly."""
        position = rng.random() * (len(self.quantiles_ms) - 1)
        below = int(position)
        if below + 1 >= len(self.quantiles_ms):
            return self.quantiles_ms[-1]
        low, high = self.quantiles_ms[below], self.quantiles_ms[below + 1]
        return low + (high - low) * (position - below)

    def scaled(self, factor: float) -> CostDistribution:
        return CostDistribution(tuple(q * factor for q in self.quantiles_ms), self.count)

    def _probabilities(self) -> np.ndarray:
        return np.linspace(0, 1, len(self.quantiles_ms))


@dataclass(frozen=True)
class PairCosts:
    """A strategy's costs at one worker count, over the run's repetitions of that pair."""

    strategy: str
    workers: int
    repetitions: int
    claim: CostDistribution  # server clock: finished_at to the worker's next started_at
    completion: CostDistribution  # finished_at - started_at - duration_ms
    client_claim: CostDistribution  # claim_ms, as the workers saw it (not simulated)
    poll_ms: float  # an idle worker's period between two dequeues
    poll_source: str  # "empty polls" or "interval + claim_ms"
    # Mean claim + completion of each repetition: how steady the machine was meanwhile.
    overhead_ms: tuple[float, ...] = ()
    busy_share: float = 1.0  # the work's share of a busy worker's time

    def costs(self, seed: int) -> Costs:
        return Costs(
            claim=lambda rng: self.claim.draw_ms(rng) / 1000,
            completion=lambda rng: self.completion.draw_ms(rng) / 1000,
            poll_s=self.poll_ms / 1000,
            seed=seed,
        )

    def scaled(self, workers: int, claim: float, completion: float) -> PairCosts:
        """These costs moved to another worker count, each median multiplied as given."""
        return PairCosts(
            self.strategy,
            workers,
            0,  # measured in no repetition: drawn from the growth line
            self.claim.scaled(claim),
            self.completion.scaled(completion),
            self.client_claim.scaled(claim),
            self.poll_ms,
            self.poll_source,
        )

    @property
    def overhead_spread(self) -> float:
        """The largest repetition's mean overhead over the smallest's (1: steady)."""
        positive = [value for value in self.overhead_ms if value > 0]
        return max(positive) / min(positive) if positive else 1.0


@dataclass(frozen=True)
class Line:
    """median_ms = at_zero_ms + per_worker_ms * workers, fitted over `workers`."""

    at_zero_ms: float
    per_worker_ms: float
    workers: tuple[int, ...]

    @classmethod
    def fit(cls, workers: Sequence[int], medians_ms: Sequence[float]) -> Line:
        counts = tuple(sorted(workers))
        slope, intercept = 0.0, float(np.mean(medians_ms))
        if len(set(workers)) >= 2:  # with one worker count nothing says how it grows
            slope, intercept = np.polyfit(np.asarray(workers, float), np.asarray(medians_ms), 1)
        if slope < 0:  # more workers never make a claim cheaper: that slope is noise
            slope, intercept = 0.0, float(np.mean(medians_ms))
        return cls(round(float(intercept), 4), round(float(slope), 6), counts)

    def at(self, workers: int) -> float:
        return max(self.at_zero_ms + self.per_worker_ms * workers, 0.0)


@dataclass(frozen=True)
class Growth:
    """How a strategy's claim and completion grow with the number of workers."""

    strategy: str
    claim: Line
    completion: Line


@dataclass(frozen=True)
class Calibration:
    """A run's measured costs: what `harness simulate --calibration` and ideal.csv use."""

    scenario: str
    poll_interval_ms: float
    pairs: tuple[PairCosts, ...]
    growth: tuple[Growth, ...]
    saturated: tuple[tuple[str, int], ...] = ()  # pairs left out of the growth lines
    policies: tuple[tuple[str, str], ...] = ()  # strategy -> its simulation policy

    def costs(self, strategy: str, policy: str | None, workers: int, seed: int) -> Costs:
        return self.pair(strategy, policy, workers).costs(seed)

    def pair(self, strategy: str, policy: str | None, workers: int) -> PairCosts:
        """The measured pair if there is one; else the calibrated strategy nearest in
        kind (see stand_in) moved to `workers` along its growth lines."""
        source = self.stand_in(strategy, policy)
        measured = {pair.workers: pair for pair in self.pairs if pair.strategy == source}
        if workers in measured:
            return measured[workers]
        nearest = measured[min(measured, key=lambda count: (abs(count - workers), count))]
        growth = next(line for line in self.growth if line.strategy == source)
        return nearest.scaled(
            workers,
            _ratio(growth.claim, workers, nearest.workers),
            _ratio(growth.completion, workers, nearest.workers),
        )

    def stand_in(self, strategy: str, policy: str | None) -> str:
        """The calibrated strategy whose costs a strategy takes: itself; else one of the
        same simulation policy; else one that also rotates over tenants (every policy
        but fifo); else the first calibrated."""
        calibrated = list(dict.fromkeys(pair.strategy for pair in self.pairs))
        if strategy in calibrated:
            return strategy
        policies = dict(self.policies)
        for same in (
            lambda other: policies.get(other) == policy,
            lambda other: (policies.get(other) == "fifo") == (policy == "fifo"),
        ):
            found = [other for other in calibrated if same(other)]
            if found:
                return found[0]
        return calibrated[0]

    def to_dict(self) -> dict[str, Any]:
        return CalibrationDocument.of(self).document()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "calibration.json") -> Calibration:
        return CalibrationDocument.from_data(dict(data), source).calibration(source)


class CalibrationDocument(Versioned):
    """calibration.json: a Calibration as JSON, its parts as the _*_dict functions write
    them."""

    NAME = "calibration.json"
    VERSION = CALIBRATION_FORMAT_VERSION

    scenario: str
    poll_interval_ms: float
    policies: dict[str, str] = Field(default_factory=dict)
    saturated: list[tuple[str, int]] = Field(default_factory=list)
    pairs: list[dict[str, Any]]
    growth: list[dict[str, Any]]

    @classmethod
    def of(cls, calibration: Calibration) -> CalibrationDocument:
        return cls(
            scenario=calibration.scenario,
            poll_interval_ms=calibration.poll_interval_ms,
            policies=dict(calibration.policies),
            saturated=list(calibration.saturated),
            pairs=[_pair_dict(pair) for pair in calibration.pairs],
            growth=[_growth_dict(growth) for growth in calibration.growth],
        )

    def calibration(self, source: str) -> Calibration:
        try:
            return Calibration(
                scenario=self.scenario,
                poll_interval_ms=self.poll_interval_ms,
                pairs=tuple(_pair_of(item) for item in self.pairs),
                growth=tuple(_growth_of(item) for item in self.growth),
                saturated=tuple(self.saturated),
                policies=tuple(self.policies.items()),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise UnreadableDocument(
                f"{source}: a pair or growth entry is malformed ({error!r}); not a "
                f"{self.NAME} this harness reads"
            ) from None


def _ratio(line: Line, workers: int, measured_at: int) -> float:
    base = line.at(measured_at)
    return line.at(workers) / base if base > 0 else 1.0


def fit_calibration(
    jobs: pd.DataFrame,
    scenario: str,
    poll_interval_ms: float,
    empty_polls: Mapping[tuple[str, int, int], int],
    policies: Mapping[str, str | None] | None = None,
) -> Calibration:
    """The costs of every (strategy, workers) pair of a jobs table (jobs.csv, timestamps
    parsed). `empty_polls`: run.json's count per (strategy, workers, repetition);
    `policies`: each strategy's simulation policy (a capped one's gaps are read apart)."""
    policies = policies or {}
    capped = {name: poll_interval_ms for name, policy in policies.items() if policy == "capped"}
    cycles = worker_cycles(jobs, capped)
    pairs = tuple(
        _pair_costs(group, poll_interval_ms, empty_polls)
        for _, group in cycles.groupby(PAIR, sort=False)
    )
    return Calibration(
        scenario=scenario,
        poll_interval_ms=poll_interval_ms,
        pairs=pairs,
        growth=_growth(pairs, saturated := _saturated(pairs)),
        saturated=tuple(sorted(saturated)),
        policies=tuple((name, policy) for name, policy in policies.items() if policy),
    )


def empty_polls_of(repetitions: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int, int], int]:
    """Each repetition's count of empty polls, from run.json's `repetitions` entries."""
    return {
        (str(entry["strategy"]), int(entry["workers"]), int(entry["repetition"])): int(
            entry.get("empty_polls", 0)
        )
        for entry in repetitions
    }


def worker_cycles(jobs: pd.DataFrame, capped: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per job, in each worker's order: completion_ms, and the gap to the worker's next
    start (gap_ms, NaN after its last job) with whether a job was queued for it then
    (queued: its next job was enqueued at or before this one's finish).

    Under a cap a queued job may not be free: the worker polls, or loses the race for the
    slot and dequeues again. For the strategies in `capped` (name -> poll interval), a gap
    counts as queued only if shorter than the poll interval: a longer one held a poll."""
    ordered = jobs.sort_values([*REPETITION, "worker", "started_at"], kind="stable")
    by_worker = ordered.groupby([*REPETITION, "worker"], sort=False)
    next_start = by_worker["started_at"].shift(-1)
    span = (ordered["finished_at"] - ordered["started_at"]).dt.total_seconds() * 1000
    cycles = ordered.assign(
        completion_ms=span - ordered["duration_ms"],
        gap_ms=(next_start - ordered["finished_at"]).dt.total_seconds() * 1000,
        queued=by_worker["enqueued_at"].shift(-1) <= ordered["finished_at"],
    )
    for strategy, poll_ms in (capped or {}).items():
        held = (cycles["strategy"] == strategy) & (cycles["gap_ms"] >= poll_ms)
        cycles.loc[held, "queued"] = False
    return cycles


def _pair_costs(
    cycles: pd.DataFrame,
    poll_interval_ms: float,
    empty_polls: Mapping[tuple[str, int, int], int],
) -> PairCosts:
    strategy, workers = str(cycles["strategy"].iat[0]), int(cycles["workers"].max())
    claims = cycles.loc[cycles["queued"], "gap_ms"]
    if claims.empty:  # never a queue behind a worker: the whole run was idle pickups
        claims = cycles["claim_ms"]
    client = CostDistribution.of(cycles["claim_ms"].dropna())
    claim = CostDistribution.of(claims)
    repetitions = [int(rep) for rep in cycles["repetition"].unique()]
    polls = sum(empty_polls.get((strategy, workers, rep), 0) for rep in repetitions)
    poll_ms, source = poll_interval_ms + client.median_ms, "interval + claim_ms"
    if polls >= ENOUGH_EMPTY_POLLS * workers * len(repetitions):
        poll_ms, source = _idle_ms(cycles, workers, claim.median_ms) / polls, "empty polls"
    completion = CostDistribution.of(cycles["completion_ms"])
    return PairCosts(
        strategy,
        workers,
        len(repetitions),
        claim,
        completion,
        client,
        round(max(poll_ms, poll_interval_ms), 4),
        source,
        tuple(_overhead_ms(cycles[cycles["repetition"] == rep]) for rep in repetitions),
        _busy_share(cycles["duration_ms"].mean(), claim.mean_ms, completion.mean_ms),
    )


def _busy_share(duration_ms: float, claim_ms: float, completion_ms: float) -> float:
    cycle = duration_ms + claim_ms + completion_ms
    return round(duration_ms / cycle, 4) if cycle > 0 else 1.0


def _saturated(pairs: Sequence[PairCosts]) -> set[tuple[str, int]]:
    """Pairs whose drain per worker fell below SATURATED of their strategy's best."""
    best: dict[str, float] = {}
    for pair in pairs:
        best[pair.strategy] = max(best.get(pair.strategy, 0.0), pair.busy_share)
    return {
        (pair.strategy, pair.workers)
        for pair in pairs
        if pair.busy_share < SATURATED * best[pair.strategy]
    }


def _overhead_ms(cycles: pd.DataFrame) -> float:
    claims = cycles.loc[cycles["queued"], "gap_ms"]
    claim = claims.mean() if len(claims) else cycles["claim_ms"].mean()
    return round(float(claim + cycles["completion_ms"].mean()), 4)


def _idle_ms(cycles: pd.DataFrame, workers: int, claim_ms: float) -> float:
    """The workers' time between jobs with nothing queued for them, from the first enqueue
    to the last finish of each repetition, less one claim per pickup."""
    total = 0.0
    for _, repetition in cycles.groupby("repetition"):
        t0, end = repetition["enqueued_at"].min(), repetition["finished_at"].max()
        idle_gaps = repetition.loc[~repetition["queued"], "gap_ms"].dropna()
        by_worker = repetition.groupby("worker")
        before = (by_worker["started_at"].min() - t0).dt.total_seconds() * 1000
        after = (end - by_worker["finished_at"].max()).dt.total_seconds() * 1000
        pickups = len(idle_gaps) + len(before)
        total += idle_gaps.sum() + before.sum() + after.sum() - pickups * claim_ms
        total += (workers - len(before)) * (end - t0).total_seconds() * 1000  # never worked
    return max(total, 0.0)


def _growth(pairs: Sequence[PairCosts], saturated: set[tuple[str, int]]) -> tuple[Growth, ...]:
    growth = []
    for strategy in dict.fromkeys(pair.strategy for pair in pairs):
        own = [pair for pair in pairs if pair.strategy == strategy]
        fitted = [pair for pair in own if (strategy, pair.workers) not in saturated] or own
        counts = [pair.workers for pair in fitted]
        growth.append(
            Growth(
                strategy,
                Line.fit(counts, [pair.claim.median_ms for pair in fitted]),
                Line.fit(counts, [pair.completion.median_ms for pair in fitted]),
            )
        )
    return tuple(growth)


def _distribution_dict(distribution: CostDistribution) -> dict[str, Any]:
    return {"count": distribution.count, "quantiles_ms": list(distribution.quantiles_ms)}


def _distribution_of(data: Mapping[str, Any]) -> CostDistribution:
    return CostDistribution(tuple(float(q) for q in data["quantiles_ms"]), int(data["count"]))


def _pair_dict(pair: PairCosts) -> dict[str, Any]:
    return {
        "strategy": pair.strategy,
        "workers": pair.workers,
        "repetitions": pair.repetitions,
        "poll_ms": pair.poll_ms,
        "poll_source": pair.poll_source,
        "overhead_ms_by_repetition": list(pair.overhead_ms),
        "busy_share": pair.busy_share,
        "claim": _distribution_dict(pair.claim),
        "completion": _distribution_dict(pair.completion),
        "client_claim": _distribution_dict(pair.client_claim),
    }


def _pair_of(data: Mapping[str, Any]) -> PairCosts:
    return PairCosts(
        strategy=data["strategy"],
        workers=int(data["workers"]),
        repetitions=int(data["repetitions"]),
        claim=_distribution_of(data["claim"]),
        completion=_distribution_of(data["completion"]),
        client_claim=_distribution_of(data["client_claim"]),
        poll_ms=float(data["poll_ms"]),
        poll_source=data["poll_source"],
        overhead_ms=tuple(float(value) for value in data.get("overhead_ms_by_repetition", [])),
        busy_share=float(data.get("busy_share", 1.0)),
    )


def _line_dict(line: Line) -> dict[str, Any]:
    return {
        "at_zero_ms": line.at_zero_ms,
        "per_worker_ms": line.per_worker_ms,
        "workers": list(line.workers),
    }


def _line_of(data: Mapping[str, Any]) -> Line:
    return Line(float(data["at_zero_ms"]), float(data["per_worker_ms"]), tuple(data["workers"]))


def _growth_dict(growth: Growth) -> dict[str, Any]:
    return {
        "strategy": growth.strategy,
        "claim": _line_dict(growth.claim),
        "completion": _line_dict(growth.completion),
    }


def _growth_of(data: Mapping[str, Any]) -> Growth:
    return Growth(data["strategy"], _line_of(data["claim"]), _line_of(data["completion"]))


TARGET = 0.05  # measured / predicted within 5 %
LONG_WAIT_S = 0.5  # a class's p50 wait is held to the target above this


def against_prediction(measured: pd.DataFrame, predicted: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, workers, class: the makespan and p50 wait measured (median over
    repetitions) and predicted, their ratio, and whether the target holds them (the
    makespan of every class; a p50 wait measured above LONG_WAIT_S) and they meet it."""
    keys = ["strategy", "workers", "tenant_class"]
    figures = ["makespan_s", "wait_p50_s"]
    typical = measured.groupby(keys, sort=False)[figures].median()
    guess = predicted.groupby(keys, sort=False)[figures].median()
    table = _stacked(typical, "measured").merge(_stacked(guess, "predicted"), on=[*keys, "figure"])
    table["ratio"] = table["measured"] / table["predicted"].where(table["predicted"] > 0)
    held = (table["figure"] == "makespan_s") | (table["measured"] > LONG_WAIT_S)
    table["target"] = held
    table["within"] = held & ((table["ratio"] - 1).abs() <= TARGET)
    return table


def _stacked(wide: pd.DataFrame, name: str) -> pd.DataFrame:
    stacked: pd.Series = wide.rename_axis(columns="figure").stack()  # type: ignore[assignment]
    return stacked.rename(name).reset_index()
