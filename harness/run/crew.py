"""The processes of one repetition: the queue's programs, each in a process of its own.

Slots: the workers first, then spare slots for the replacements of killed workers, then
the enqueuers; every process writes only its own slot of the shared signals. The crew
starts them all, waits until every one is connected, and on `go()` sets the start
signal; `stop()` sets the stop signal and collects each process's report. Whatever
happens, leaving the crew's context ends every process it started.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.util
import os
import platform
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from harness.errors import RunFailed
from harness.queues.base import Program, Signals, WorkerReport
from harness.server.run_user import handed, take


def _context() -> Any:
    """Processes from a fork server where there is one (Linux, macOS): it is started once
    per harness, imports the workers' modules once, and forks each process from there in
    milliseconds; a spawned process imports them anew, a second or more of a repetition's
    start on a small machine. Elsewhere (Windows), spawned processes."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["harness.queues.sql.worker"])
    # Run at exit after multiprocessing's own finalizers (which still talk to the resource
    # tracker): the lowest priority goes last.
    multiprocessing.util.Finalize(None, _stop_helper_processes, exitpriority=-100)
    return context


def _stop_helper_processes() -> None:
    """The fork server and the resource tracker, stopped and waited for as the harness
    exits. Each would leave by itself when it sees the harness gone, but on a loaded
    machine that can be a while after the harness has exited, and a harness that has
    exited must have left no process behind. Their `_stop` is multiprocessing's own
    (private, in every version since 3.8); where it is missing they leave as before."""
    from multiprocessing import forkserver, resource_tracker

    for helper in (forkserver._forkserver, resource_tracker._resource_tracker):
        stop = getattr(helper, "_stop", None)
        if stop is not None:
            with contextlib.suppress(OSError, ChildProcessError):
                stop()


def _program(main: Callable[..., None], run_user: str, *args: Any) -> None:
    """A program in its process, which knows the run's user as the harness settled it
    (a fork server started earlier has not seen it): its own programs run as that one."""
    take(run_user)
    main(*args)


_PROCESSES = _context()  # where every process of a crew, and what they share, comes from
READY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60
POLL_S = 0.02


def make_signals(processes: int) -> Signals:
    return Signals(
        ready=_PROCESSES.Array("b", processes, lock=False),
        done=_PROCESSES.Array("q", processes, lock=False),
        holding=_PROCESSES.Array("q", processes, lock=False),
        start=_PROCESSES.Event(),
        stop=_PROCESSES.Event(),
        reports=_PROCESSES.Queue(),
    )


@dataclass
class Crew:
    workers: list[Program]
    enqueuers: list[Program] = field(default_factory=list)
    spares: int = 0  # slots for replacements of killed workers
    signals: Signals = field(init=False)
    processes: dict[int, Any] = field(init=False, default_factory=dict)  # slot -> process
    current: dict[int, int] = field(init=False, default_factory=dict)  # worker -> its slot
    killed: set[int] = field(init=False, default_factory=set)  # slots killed on purpose
    spare: int = field(init=False, default=0)  # the next free slot for a replacement

    def __post_init__(self) -> None:
        self.signals = make_signals(len(self.workers) + self.spares + len(self.enqueuers))
        for slot, program in enumerate(self.workers):
            self._add(slot, program, f"harness-worker-{slot}")
        first = len(self.workers) + self.spares
        for index, program in enumerate(self.enqueuers):
            self._add(first + index, program, f"harness-enqueuer-{index}")
        self.current = {worker: worker for worker in range(len(self.workers))}
        self.spare = len(self.workers)

    def _add(self, slot: int, program: Program, name: str) -> Any:
        process = _PROCESSES.Process(
            target=_program,
            args=(program.main, handed(), slot, program.spec, self.signals),
            daemon=True,
            name=program.name or name,
        )
        self.processes[slot] = process
        return process

    def __enter__(self) -> Crew:
        try:
            for process in self.processes.values():
                start_uninterrupted(process)
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)  # no __exit__ follows a failed __enter__
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        set_uninterrupted(self.signals.stop)
        set_uninterrupted(self.signals.start)  # a process still waiting for it sees stop
        _end_processes(list(self.processes.values()))

    def go(self) -> None:
        """The clock starts: enqueuers begin their schedules, workers claim."""
        set_uninterrupted(self.signals.start)

    def done(self) -> int:
        return sum(self.signals.done)

    def stop(self) -> list[WorkerReport]:
        set_uninterrupted(self.signals.stop)
        return self._collect_reports()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while sum(self.signals.ready) < len(self.processes):
            self.fail_if_one_died()
            if time.monotonic() > deadline:
                raise RunFailed(f"workers not connected after {READY_TIMEOUT_S} s")
            time.sleep(0.01)

    def fail_if_one_died(self) -> None:
        dead = [
            process
            for slot, process in self.processes.items()
            if process.exitcode is not None and slot not in self.killed
        ]
        if not dead:
            return
        try:
            report: WorkerReport = self.signals.reports.get(timeout=1)
            reason = report.error or "stopped early"
        except queue.Empty:
            reason = f"exit code {dead[0].exitcode}"
        raise RunFailed(f"{dead[0].name} failed: {reason.strip().splitlines()[-1]}")

    def _collect_reports(self) -> list[WorkerReport]:
        reports = []
        for _ in [slot for slot in self.processes if slot not in self.killed]:
            try:
                reports.append(self.signals.reports.get(timeout=STOP_TIMEOUT_S))
            except queue.Empty as error:
                raise RunFailed(f"a worker did not stop within {STOP_TIMEOUT_S} s") from error
        failed = [report for report in reports if report.error]
        if failed:
            reason = (failed[0].error or "").strip().splitlines()[-1]
            raise RunFailed(f"process {failed[0].worker} failed: {reason}")
        return reports

    # --- what the fault driver asks of the crew -------------------------------------

    def kill_mid_job(self, worker: int) -> tuple[int, int] | None:
        """SIGKILL the worker if it is working on a job: (its slot, the job), else None."""
        slot = self.current[worker]
        process = self.processes[slot]
        job = int(self.signals.holding[slot])
        if job == 0 or process.exitcode is not None:
            return None
        os.kill(process.pid, signal.SIGKILL)
        self.killed.add(slot)
        process.join(timeout=5)
        return slot, job

    def replace(self, worker: int) -> None:
        """A supervisor's move: a new worker process in the next spare slot."""
        program = self.workers[worker]
        start_uninterrupted(self._add(self.spare, program, f"harness-worker-{self.spare}"))
        self.current[worker], self.spare = self.spare, self.spare + 1

    def holding(self) -> int:
        """How many workers are working on a claimed job right now."""
        return sum(1 for job in self.signals.holding if job)

    def hosts(self) -> dict[int, tuple[str, int]]:
        """Where every worker slot ran: (host, fleet member); here, member 0."""
        here = (platform.node(), 0)
        return {slot: here for slot in range(len(self.workers) + self.spares)}

    def members(self) -> list[dict[str, Any]] | None:
        """Where a fleet's members ran their share (run.json); None: all ran here."""
        return None

    def drain(self, total: int, timeout_s: float) -> list[WorkerReport]:
        """Workers claim from the queue as it stands until `total` jobs are done."""
        self.go()
        start = time.monotonic()
        while (done := self.done()) < total:
            self.fail_if_one_died()
            if time.monotonic() - start > timeout_s:
                raise RunFailed(f"only {done} of {total} jobs done after {timeout_s:g} s")
            time.sleep(POLL_S)
        return self.stop()


Workers = Callable[[int], list[Program]]  # a queue's programs for that many workers


class Placement(Protocol):
    """Where a repetition's programs run: all here (LOCAL), or spread over a fleet of
    hosts (harness/run/fleet.py); either way the repetition drives what it gets back
    the same way. `workers(n)` makes the programs of n workers: one process each for the
    SQL strategies, one process running n for a library's own loop."""

    def crew(self, workers: Workers, count: int, enqueuers: list[Program], spares: int) -> Crew: ...


class _Here:
    def crew(self, workers: Workers, count: int, enqueuers: list[Program], spares: int) -> Crew:
        return Crew(workers(count), enqueuers, spares)


LOCAL: Placement = _Here()


def start_uninterrupted(process: Any) -> None:
    """`process.start()`, uninterrupted. Interrupted inside the start, after the new
    process was handed its program but before its pid came back, the crew would not know
    the process to end it: it would run on past the harness's exit, fail on the harness's
    freed semaphores and print a traceback."""
    uninterrupted(process.start)


def set_uninterrupted(event: Any) -> None:
    """`event.set()` of a multiprocessing Event, uninterrupted. Its notify_all waits for
    each sleeper to wake; a Ctrl-C inside it leaves the Condition's counts half-updated,
    and the next set (the crew's exit sets `start` again) then fails on multiprocessing's
    own assertion, a traceback (make test-under-load hit it in `go`)."""
    uninterrupted(event.set)


def uninterrupted(action: Callable[[], None]) -> None:
    """`action()` with Ctrl-C and SIGTERM held back until it returns, then delivered: the
    interrupt arrives a few milliseconds later, at a moment the harness's cleanup can
    handle. (Signal handlers are the main thread's only; elsewhere it just runs.)"""
    if threading.current_thread() is not threading.main_thread():
        action()
        return
    arrived: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, _: arrived.append(signum)) for sig in held}
    try:
        action()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if arrived:
        signal.raise_signal(arrived[0])


def _end_processes(processes: list[Any]) -> None:
    for process in processes:
        if process.pid is None:
            continue  # never started: a start before it failed, and that error matters
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
