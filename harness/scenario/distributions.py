"""Seeded draws that every process computes alike: job durations from (seed, job id).

A job's duration is a pure function of the scenario's seed, the job's id and its tenant
group's distribution. Workers compute it when they claim the job; the workload generator
and the simulator compute the same number for the id they expect the job to get. The
table stays the article's (no duration column), and a seed gives the same durations on
every run and every machine.

This module imports only the standard library: spawned worker processes load it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

MASK64 = (1 << 64) - 1
MAX_DURATION_MS = 600_000.0
DistributionKind = Literal["constant", "uniform", "exponential", "lognormal"]
_STANDARD_NORMAL = NormalDist()


def splitmix64(value: int) -> int:
    """A well-mixed 64-bit hash of an integer (Steele, Lea and Flood's SplitMix64 step)."""
    value = (value + 0x9E3779B97F4A7C15) & MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK64
    return value ^ (value >> 31)


def unit_draw(seed: int, stream: int, index: int) -> float:
    """A number in (0, 1), fixed by (seed, stream, index): never exactly 0 or 1."""
    mixed = splitmix64(_stream_key(seed, stream) ^ (index & MASK64))
    return ((mixed >> 11) + 0.5) / (1 << 53)


@lru_cache(maxsize=64)
def _stream_key(seed: int, stream: int) -> int:
    return splitmix64(splitmix64(seed & MASK64) ^ stream)


DURATION_STREAM = 1  # unit_draw's stream for job durations; arrivals use their own
FAILURE_STREAM = 2  # failing attempts: one stream per attempt number, from this one


def attempt_fails(seed: int, job_id: int, attempt: int, probability: float) -> bool:
    """Whether attempt `attempt` (from 1) of job `job_id` fails: fixed by the seed."""
    if probability <= 0:
        return False
    return unit_draw(seed, FAILURE_STREAM + (attempt << 8), job_id) < probability


@dataclass(frozen=True)
class Duration:
    """A job-duration distribution in milliseconds, sampled by inverse transform.

    constant: `a` ms. uniform: between `a` and `b`. exponential: mean `a`.
    lognormal: median `a`, sigma `b` (of the underlying normal).
    """

    kind: DistributionKind
    a: float
    b: float = 0.0

    def at(self, u: float) -> float:
        """The duration at quantile u in (0, 1), capped at MAX_DURATION_MS."""
        if self.kind == "constant":
            value = self.a
        elif self.kind == "uniform":
            value = self.a + (self.b - self.a) * u
        elif self.kind == "exponential":
            value = -self.a * math.log1p(-u)
        else:
            value = self.a * math.exp(self.b * _STANDARD_NORMAL.inv_cdf(u))
        return min(value, MAX_DURATION_MS)

    @property
    def mean_ms(self) -> float:
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "lognormal":
            return self.a * math.exp(self.b**2 / 2)
        return self.a


def job_duration_ms(seed: int, job_id: int, duration: Duration) -> float:
    """How long job `job_id` works: what a worker sleeps and the simulator schedules."""
    if duration.kind == "constant":
        return duration.a
    return round(duration.at(unit_draw(seed, DURATION_STREAM, job_id)), 3)


@dataclass(frozen=True)
class Failures:
    """How a tenant's jobs fail: each attempt with `probability`, dead-lettered after
    `max_attempts` failures, retried after `backoff_s` (doubling with each failure)."""

    probability: float
    max_attempts: int
    backoff_s: float
