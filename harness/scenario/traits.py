"""What a queue can take, as the scenario loader checks it before any server starts.

Every kind of queue (a built-in SQL strategy, a library adapter) says here which scenario
features it cannot run, and why; `None` means it can. The loader refuses a scenario that
asks a queue for one of them, naming the file, the line and the strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Setting = Literal["default", "tuned", "recovery"]


@dataclass(frozen=True)
class Declared:
    """What a library's mapping declares of itself, by which a scenario's `libraries`
    picks it: its adapter, and its settings (its library's defaults, its maintainers'
    `tuned`, or a recovery mapping's)."""

    adapter: str
    setting: Setting


@dataclass(frozen=True)
class QueueTraits:
    faults: str | None = None  # crashes, leases, retries, a server restart
    worker_kills: str | None = None  # its worker processes killed (faults.worker_kills)
    backend_kills: str | None = None  # its workers' sessions terminated (faults.backend_kills)
    server_crash: str | None = None  # the server crashed under it (faults.server_crash)
    # the server's connections held by the harness (faults.connection_exhaustion)
    connection_exhaustion: str | None = None
    backlog: str | None = None  # a pre-loaded backlog before the clock starts
    explain: str | None = None  # EXPLAIN captures of its dequeue
    long_transaction: str | None = None  # a transaction held beside the churning queue
    # a library's mapping: what it declares (a scenario's `libraries` picks by it); None
    # for the harness's own strategies
    declared: Declared | None = None

    def refusals(self) -> dict[str, str]:
        """The features it cannot take, each with its reason."""
        found = {name: why for name, why in self.__dict__.items() if name != "declared"}
        return {name: why for name, why in found.items() if why is not None}


ANY = QueueTraits()  # a queue that takes every feature
