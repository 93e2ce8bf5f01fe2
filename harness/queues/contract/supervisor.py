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
) -> None:
    """The worker adapter from `start()` (ready when it returns) through the repetition:
    killed and started again as `due` says, until the stop. An adapter that fails on its
    own fails the program, as without kills."""
    first = start()
    adapter: AdapterProcess | None = first
    try:
        signals.ready[index] = 1
        signals.start.wait()
        began = time.monotonic()
        events: WorkerEvents | None = WorkerEvents.started(first, report, signals, index)
        while not signals.stop.wait(POLL_S):
            if events is not None and not events.is_alive():
                break  # it failed on its own: events.stop() raises why
            if not due or time.monotonic() - began < due[0].at_s:
                continue
            kill = due.pop(0).kill
            if adapter is None:
                continue  # left dead by an earlier kill
            adapter.kill()
            report.kills.append(round(time.monotonic() - began, 3))
            assert events is not None
            events.join(timeout=STOP_BOUND_S)  # its reader ends with the process
            adapter.close(bound_s=0)
            adapter, events = None, None
            if not kill.restart or signals.stop.wait(kill.restart_after_s):
                continue
            adapter = start()
            report.restarts += 1
            events = WorkerEvents.started(adapter, report, signals, index)
        if events is not None:
            events.stop()
    finally:
        if adapter is not None:
            adapter.close()
