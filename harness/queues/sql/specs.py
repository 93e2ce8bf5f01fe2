"""What the SQL strategies' processes are handed: picklable, so that the same spec runs in
a local process or on another host."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.queues.base import Site
from harness.queues.sql.claim import ClaimSql
from harness.scenario.arrivals import Arrivals
from harness.scenario.distributions import Duration, Failures


@dataclass(frozen=True)
class RecoverySpec:
    """What a worker needs when the scenario uses faults (harness/queues/sql/faults.sql)."""

    sql: dict[str, str]  # faults.sql blocks by name
    lease_s: float | None  # None: no lease, a killed worker's job stays running
    failures: dict[int, Failures]  # tenant -> how its jobs fail


@dataclass(frozen=True)
class WorkerSpec:
    site: Site
    claim: ClaimSql
    poll_interval_s: float
    seed: int  # with the job's id, draws the sleep that simulates its work
    durations: dict[int, Duration]  # tenant id -> its jobs' duration distribution
    params: dict[str, Any] = field(default_factory=dict)  # the scenario's, for every statement
    recovery: RecoverySpec | None = None  # the fault features: claim log, lease, retries


@dataclass(frozen=True)
class EnqueuerSpec:
    site: Site
    enqueue: str
    arrivals: Arrivals  # its batches, by offset: arrays, each batch made when it is due
    params: dict[str, Any] = field(default_factory=dict)  # the scenario's, for every batch
