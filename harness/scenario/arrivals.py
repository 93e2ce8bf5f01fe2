"""The jobs that arrive during a repetition, held as arrays: one row per job in the order
of their ids, and the batches as runs of rows with one offset.

A Poisson stream is one batch per arrival: at the 5,000,000-job cap an object per batch,
each with its lists, took over 2 GB before any SQL ran; the arrays take 8 bytes a column
per job. A batch becomes an object only when it is enqueued.

An enqueuer's process is handed its share of the arrivals, so this module imports only
numpy and the standard library.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Batch:
    """Jobs enqueued together in one statement, `at_s` seconds after the run's start."""

    at_s: float
    tenant_ids: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)  # per job: its tenant's weight
    priorities: list[int] = field(default_factory=list)  # per job

    @property
    def size(self) -> int:
        return len(self.tenant_ids)

    def params(self, shared: dict[str, Any]) -> dict[str, Any]:
        """The enqueue statement's parameters: the run's own and the batch's arrays."""
        return {
            **shared,
            "tenant_ids": self.tenant_ids,
            "weights": self.weights,
            "priorities": self.priorities,
        }


@dataclass(frozen=True, eq=False)
class Arrivals:
    """Batches by offset; batch k is the jobs of rows bounds[k] to bounds[k + 1]."""

    at_s: Floats  # per batch, ascending
    bounds: Ints  # one more than the batches: from 0 to the number of jobs
    tenant_ids: Ints  # per job
    weights: Ints  # per job: its tenant's weight
    priorities: Ints  # per job

    @classmethod
    def of_jobs(cls, at_s: Floats, tenant_ids: Ints, weights: Ints, priorities: Ints) -> Arrivals:
        """Jobs in the order they were drawn, one batch per distinct offset: by offset, and
        at one offset in the order drawn (the sort is stable)."""
        if np.any(at_s[1:] < at_s[:-1]):  # one group alone, or groups in time order: sorted
            order = np.argsort(at_s, kind="stable")
            at_s, tenant_ids = at_s[order], tenant_ids[order]
            weights, priorities = weights[order], priorities[order]
        starts = np.flatnonzero(at_s[1:] != at_s[:-1]) + 1
        bounds = np.concatenate(([0], starts, [len(at_s)]) if len(at_s) else ([0],))
        return cls(at_s[bounds[:-1]], bounds.astype(np.int64), tenant_ids, weights, priorities)

    @classmethod
    def of_batches(
        cls,
        at_s: list[float],
        sizes: list[int],
        tenant_ids: list[int],
        weights: list[int],
        priorities: list[int],
    ) -> Arrivals:
        """Arrivals sent as lists (a fleet's assignment), refused unless they fit together:
        offsets ascending, one size per offset, one tenant, weight and priority per job."""
        jobs = sum(sizes)
        if len(sizes) != len(at_s) or any(b < a for a, b in itertools.pairwise(at_s)):
            raise ValueError("arrivals: one size per offset, the offsets ascending")
        if not len(tenant_ids) == len(weights) == len(priorities) == jobs:
            raise ValueError(f"arrivals: {jobs} jobs, one tenant, weight and priority each")
        bounds = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
        return cls(
            np.asarray(at_s, dtype=np.float64),
            bounds.astype(np.int64),
            np.asarray(tenant_ids, dtype=np.int64),
            np.asarray(weights, dtype=np.int64),
            np.asarray(priorities, dtype=np.int64),
        )

    def __eq__(self, other: object) -> bool:
        """The same batches: what a fleet's assignment must bring back as it was sent."""
        if not isinstance(other, Arrivals):
            return NotImplemented
        columns = ("at_s", "bounds", "tenant_ids", "weights", "priorities")
        return all(np.array_equal(getattr(self, c), getattr(other, c)) for c in columns)

    __hash__ = None  # type: ignore[assignment]  # mutable arrays: equal, never hashed

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, index: int) -> Batch:
        rows = slice(int(self.bounds[index]), int(self.bounds[index + 1]))
        return Batch(
            float(self.at_s[index]),
            self.tenant_ids[rows].tolist(),
            self.weights[rows].tolist(),
            self.priorities[rows].tolist(),
        )

    def __iter__(self) -> Iterator[Batch]:
        return (self[index] for index in range(len(self)))

    @property
    def jobs(self) -> int:
        return len(self.tenant_ids)

    @property
    def sizes(self) -> Ints:
        return np.diff(self.bounds)

    def job_at_s(self) -> Floats:
        """Every job's offset, in row order."""
        return np.repeat(self.at_s, self.sizes)

    def dealt(self, count: int) -> list[Arrivals]:
        """The batches dealt round-robin to `count` enqueuers: the i-th gets batches i,
        i + count, ..."""
        if count == 1:
            return [self]
        batch_of_job = np.repeat(np.arange(len(self)), self.sizes)
        return [self._every(first, count, batch_of_job % count == first) for first in range(count)]

    def _every(self, first: int, step: int, rows: npt.NDArray[np.bool_]) -> Arrivals:
        sizes = self.sizes[first::step]
        return Arrivals(
            at_s=self.at_s[first::step].copy(),
            bounds=np.concatenate(([0], np.cumsum(sizes))).astype(np.int64),
            tenant_ids=self.tenant_ids[rows],
            weights=self.weights[rows],
            priorities=self.priorities[rows],
        )
