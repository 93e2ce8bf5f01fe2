"""What the SQL strategies' processes are handed: picklable. A spec names its strategy and
the SHA-256 of the strategy's merged SQL: a fleet member is sent those, never the SQL,
and rebuilds the spec from its own install (harness/queues/sql/queue.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.queues.base import Site
from harness.queues.sql.claim import ClaimSql
from harness.scenario.arrivals import Arrivals
from harness.scenario.distributions import Duration, Failures


@dataclass(frozen=True)
class RecoverySpec:
    """What a worker needs when the scenario uses faults (the statements are this
    install's harness/queues/sql/faults.sql)."""

    lease_s: float | None  # None: no lease, a killed worker's job stays running
    failures: dict[int, Failures]  # tenant -> how its jobs fail
    reconnect_give_up_s: float  # a lost session tried again for this long, then the run fails


@dataclass(frozen=True)
class WorkerSpec:
    site: Site
    strategy: str
    sql_sha256: str  # of the strategy's merged SQL: what a fleet member checks its own by
    claim: ClaimSql
    poll_interval_s: float
    seed: int  # with the job's id, draws the sleep that simulates its work
    durations: dict[int, Duration]  # tenant id -> its jobs' duration distribution
    params: dict[str, Any] = field(default_factory=dict)  # the scenario's, for every statement
    recovery: RecoverySpec | None = None  # the fault features: claim log, lease, retries
    # Its sessions' name, given by the run (harness/server/connections.py
    # worker_session_name): what faults.backend_kills terminates; a fleet member's too.
    application_name: str | None = None


@dataclass(frozen=True)
class EnqueuerSpec:
    site: Site
    strategy: str
    sql_sha256: str
    enqueue: str
    arrivals: Arrivals  # its batches, by offset: arrays, each batch made when it is due
    params: dict[str, Any] = field(default_factory=dict)  # the scenario's, for every batch
