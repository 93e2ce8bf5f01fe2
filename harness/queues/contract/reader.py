"""A worker adapter's events while it works, read on a thread of their own: each `job`
into the task log, each `started` noted (the jobs it holds), each `requeued` counted,
anything else a protocol error; and its stop, bounded. The one reader of runs
(harness/queues/contract/queue.py) and of the conformance kit (harness/run/conformance.py)
alike.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from harness.queues.base import Signals, WorkerReport
from harness.queues.contract import jobs
from harness.queues.contract.process import STOP_BOUND_S, AdapterProcess
from harness.queues.contract.protocol import (
    AdapterFailed,
    JobDone,
    JobStarted,
    ProtocolError,
    Requeued,
    Stopped,
    command,
)


class WorkerEvents(threading.Thread):
    """Started once the worker adapter has been sent `start`; `error` is what ended it
    early, if anything did (its `error` event, a protocol error, its exit)."""

    def __init__(
        self,
        adapter: AdapterProcess,
        report: WorkerReport,
        signals: Signals | None = None,
        index: int = 0,
    ) -> None:
        super().__init__(daemon=True)
        self.adapter, self.report, self.signals, self.index = adapter, report, signals, index
        self.error: Exception | None = None
        self.holding: Counter[int] = Counter()  # started, not done or requeued since

    @classmethod
    def started(
        cls,
        adapter: AdapterProcess,
        report: WorkerReport,
        signals: Signals | None = None,
        index: int = 0,
    ) -> WorkerEvents:
        """The worker adapter sent `start`, and its events read from then on."""
        adapter.send(command("start"))
        events = cls(adapter, report, signals, index)
        events.start()
        return events

    def run(self) -> None:
        try:
            while not isinstance(event := self.adapter.next_event(), Stopped):
                self._take(event)
        except Exception as error:
            self.error = error

    def _take(self, event: object) -> None:
        if isinstance(event, JobStarted):
            self.report.starts.append((event.job, time.time(), self.adapter.process.pid))
            self.holding[event.job] += 1
        elif isinstance(event, JobDone):
            self._let_go(event.job)
            self.report.finishes.append(time.time())
            jobs.record_run(self.report, self.signals, self.index, jobs.task_run(event))
        elif isinstance(event, Requeued):
            self._let_go(event.job)
            self.report.lost_races += 1  # the task found its tenant at its cap
        else:
            raise ProtocolError(
                f"adapter {self.adapter.adapter.name}: protocol: stdout line "
                f"{self.adapter.lines}: '{event.event}' while working"  # type: ignore[attr-defined]
            )

    def _let_go(self, job: int) -> None:
        self.holding[job] -= 1
        if self.holding[job] <= 0:
            del self.holding[job]

    def held(self) -> list[int]:
        """The jobs it holds: started, not done or requeued since. Read once its
        process is gone and this reader has ended, it is what a kill interrupted."""
        return sorted(self.holding)

    def wait_for(self, count: int, bound_s: float) -> None:
        """Until `count` jobs are reported, the reader has ended, or `bound_s` has passed."""
        deadline = time.monotonic() + bound_s
        while len(self.report.task_runs) < count and self.is_alive():
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)

    def stop(self) -> None:
        """`stop` sent, its `stopped` awaited within STOP_BOUND_S; an error that ended it
        raised. AdapterFailed where it does not stop in time."""
        if self.error is not None:
            raise self.error
        self.adapter.send(command("stop"))
        self.join(timeout=STOP_BOUND_S)
        if self.error is not None:
            raise self.error
        if self.is_alive():
            said = self.adapter.said_last()
            raise AdapterFailed(
                f"adapter {self.adapter.adapter.name} did not stop within {STOP_BOUND_S:g} s "
                "of `stop`" + (f"; it said last: {said}" if said else "")
            )
