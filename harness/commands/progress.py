"""The run's progress on the terminal: a bar over the steps (repetitions and plan
captures) and one over the current step (jobs done, or executions captured). Where the
console is no terminal (a log file, CI), rich draws no bar: a long run's horizon line is
written as a plain line once a minute instead, and each plan capture's start as a line,
so that its log is never silent for the length of a step."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from harness.run.captures import CaptureRequest
from harness.run.repetition import Repetition, RepetitionResult

PLAIN_EVERY_S = 60.0  # a horizon's plain line, where the console is no terminal


class ProgressBars:
    """An Observer for runner.run_repetition, drawing with rich."""

    def __init__(self, console: Console, steps: int) -> None:
        self.progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.overall: TaskID = self.progress.add_task("steps", total=steps)
        self.current: TaskID | None = None
        self._plain_at: float | None = None  # when a horizon line was last written plain

    def __enter__(self) -> ProgressBars:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def _start(self, label: str, total: int) -> None:
        if self.current is not None:
            self.progress.remove_task(self.current)
        self.current = self.progress.add_task(label, total=total)

    def repetition_started(self, repetition: Repetition, jobs: int) -> None:
        self._start(f"  {repetition.label}: jobs done", jobs)
        self._plain_at = None  # each repetition's first horizon line is written

    def jobs_done(self, done: int) -> None:
        if self.current is not None:
            self.progress.update(self.current, completed=done)

    def horizon_progress(self, line: str) -> None:
        if self.current is not None:
            self.progress.update(self.current, description=f"  {line}")
        if self.progress.console.is_terminal:
            return
        now = time.monotonic()
        if self._plain_at is None or now - self._plain_at >= PLAIN_EVERY_S:
            self._plain_at = now
            self.progress.console.log(f"  {line}", markup=False)

    def capture_started(self, request: CaptureRequest, executions: int) -> None:
        self.progress.advance(self.overall)
        label = f"EXPLAIN {request.strategy} on {request.variant}"
        self._start(f"  {label}", executions)
        if not self.progress.console.is_terminal:  # a log: each capture said as it starts
            self.progress.console.log(label, markup=False)

    def capture_step(self) -> None:
        if self.current is not None:
            self.progress.advance(self.current)

    def repetition_finished(self, result: RepetitionResult) -> None:
        self.progress.advance(self.overall)
        self.progress.console.log(
            f"{result.repetition.label}: {len(result.jobs)} jobs, books {result.books}"
            + _fault_note(result),
            markup=False,
        )


def _fault_note(result: RepetitionResult) -> str:
    """Stuck jobs and missed crashes said on the console too: a completed run with them is
    no silent success."""
    faults = result.faults
    if not faults:
        return ""
    fired, planned = len(faults["crashes"]), faults["crashes_planned"]
    missed = (
        f", {planned - fired} of {planned} planned crashes never fired" if fired < planned else ""
    )
    return (
        f" (lost {faults['lost']}, duplicates {faults['duplicates']}, stuck {faults['stuck']}, "
        f"dead-lettered {faults['dead_lettered']}, reconnects {faults['reconnects']}{missed})"
    )
