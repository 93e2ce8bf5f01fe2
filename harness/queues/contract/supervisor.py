"""A library's worker process as a process supervisor keeps it (faults.worker_kills).

The worker adapter is started, and at each planned moment killed with SIGKILL to its
whole process group, as an out-of-memory killer or a lost host would end it: nothing it
started survives, nothing is told. Then, as a supervisor would, it is started again
`restart_after_s` later (with the same configuration: its library sees the same worker
come back), or left dead (`restart: false`). Its events go on into the same task log:
what the library did with the jobs the killed process held is the library's recovery,
which the books then count (harness/run/books.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.queues.base import Signals, WorkerReport
from harness.queues.contract.process import STOP_BOUND_S, AdapterProcess
from harness.queues.contract.protocol import AdapterFailed, ProtocolError
from harness.queues.contract.reader import WorkerEvents
from harness.scenario.model import WorkerKill

POLL_S = 0.05


@dataclass(frozen=True)
class Due:
    at_s: float  # from the clock's start
    kill: WorkerKill


def schedule(kills: tuple[WorkerKill, ...], until_s: float) -> list[Due]:
    """Every moment a kill comes before `until_s`, in order."""
    due = []
    for kill in kills:
        at, step = kill.at_s, kill.every_s
        while at < until_s:
            due.append(Due(round(at, 6), kill))
            if step is None:
                break
            at += step
    return sorted(due, key=lambda d: d.at_s)


def supervise(
    index: int,
    signals: Signals,
    report: WorkerReport,
    start: Callable[[], AdapterProcess],
    due: list[Due],
    restart_exited_s: float | None = None,
) -> None:
    """The worker adapter from `start()` (ready when it returns) through the repetition:
    killed and started again as `due` says, until the stop. An adapter that fails on its
    own fails the program, as without kills; unless `restart_exited_s` (faults that cut
    its sessions: faults.backend_kills), where its exit or failure, or a start that fails,
    is counted in `report.exits` and it is started again that long after, as a supervisor
    would. A protocol error still fails the program: that is the adapter's, not the
    fault's."""
    first = start()
    keeper = _Keeper(index, signals, report, start, restart_exited_s)
    keeper.adapter = first
    try:
        signals.ready[index] = 1
        signals.start.wait()
        keeper.began = time.monotonic()
        keeper.events = WorkerEvents.started(first, report, signals, index)
        while not signals.stop.wait(POLL_S):
            if keeper.adapter is None and keeper.down is not None:
                keeper.retry()
            elif keeper.events is not None and not keeper.events.is_alive() and not keeper.exited():
                break  # it failed on its own: events.stop() raises why
            if not due or keeper.elapsed() < due[0].at_s:
                continue
            if keeper.adapter is None:
                due.pop(0)  # left dead by an earlier kill, or down after an exit
                continue
            if due[0].kill.holding and not keeper.holds_a_job():
                continue  # the kill waits for a moment the worker holds a job
            keeper.kill(due.pop(0).kill)
        keeper.stop()
    finally:
        if keeper.adapter is not None:
            keeper.adapter.close()


class _Keeper:
    """The one worker adapter a supervisor keeps: running (`adapter`, `events`), or down,
    to be started again at `down` (s from the start), or left dead."""

    def __init__(
        self,
        index: int,
        signals: Signals,
        report: WorkerReport,
        start: Callable[[], AdapterProcess],
        restart_exited_s: float | None,
    ) -> None:
        self.index, self.signals, self.report, self.start = index, signals, report, start
        self.restart_exited_s = restart_exited_s
        self.adapter: AdapterProcess | None = None
        self.events: WorkerEvents | None = None
        self.began = 0.0
        self.down: float | None = None  # when to start it again, if it is down

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def kill(self, kill: WorkerKill) -> None:
        assert self.adapter is not None and self.events is not None
        moment, pid = time.time(), self.adapter.process.pid
        self.adapter.kill()
        self.report.kills.append(round(self.elapsed(), 3))
        self.events.join(timeout=STOP_BOUND_S)  # its reader ends with the process
        self.report.kills_holding.append((moment, self.events.held(), pid))
        self.adapter.close(bound_s=0)
        self.adapter, self.events = None, None
        if kill.restart:
            self.down = self.elapsed() + kill.restart_after_s

    def holds_a_job(self) -> bool:
        """A job it said it started and has not finished, by its events read so far."""
        return self.events is not None and bool(self.events.held())

    def exited(self) -> bool:
        """Its reader ended before the stop: counted and put down for a restart, if the
        faults allow it (True); else False, and events.stop() raises why."""
        assert self.adapter is not None and self.events is not None
        error = self.events.error
        if self.restart_exited_s is None or isinstance(error, ProtocolError):
            return False
        self._down(str(error) if error is not None else "it said `stopped` unasked")
        return True

    def stop(self) -> None:
        """`stop`, its `stopped` awaited; under faults, a failure to stop (a library worker
        that reaches for its terminated session on the way out) is one more exit."""
        if self.events is None:
            return
        try:
            self.events.stop()
        except AdapterFailed as error:  # a ProtocolError is no AdapterFailed: it is raised
            if self.restart_exited_s is None:
                raise
            self.report.exits.append((round(self.elapsed(), 3), one_line(f"at its stop: {error}")))

    def retry(self) -> None:
        """Started again once its moment has come; a start that fails is one more exit."""
        assert self.down is not None
        if self.elapsed() < self.down:
            return
        try:
            self._started()
        except AdapterFailed as error:  # AdapterExited too; a ProtocolError is raised
            if self.restart_exited_s is None:
                raise
            self._down(f"at its start: {error}")

    def _down(self, why: str) -> None:
        assert self.restart_exited_s is not None
        self.report.exits.append((round(self.elapsed(), 3), one_line(why)))
        if self.adapter is not None:
            self.adapter.close(bound_s=0)
        self.adapter, self.events = None, None
        self.down = self.elapsed() + self.restart_exited_s

    def _started(self) -> None:
        self.down = None
        self.adapter = self.start()
        self.events = WorkerEvents.started(self.adapter, self.report, self.signals, self.index)
        self.report.restarts += 1  # one that failed to start is an exit, not a restart


def one_line(why: str) -> str:
    """An exit's reason on one line (a library's error may span several), at most 300
    characters."""
    return " ".join(why.split())[:300]
