"""The run's progress on the terminal: a bar over repetitions and one over jobs."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from harness.runner import Repetition, RepetitionResult


class ProgressBars:
    """An Observer for runner.run_repetition, drawing with rich."""

    def __init__(self, console: Console, repetitions: int) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.overall: TaskID = self.progress.add_task("repetitions", total=repetitions)
        self.jobs: TaskID | None = None

    def __enter__(self) -> ProgressBars:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def repetition_started(self, repetition: Repetition, jobs: int) -> None:
        if self.jobs is not None:
            self.progress.remove_task(self.jobs)
        self.jobs = self.progress.add_task(f"  {repetition.label}: jobs done", total=jobs)

    def jobs_done(self, done: int) -> None:
        if self.jobs is not None:
            self.progress.update(self.jobs, completed=done)

    def repetition_finished(self, result: RepetitionResult) -> None:
        self.progress.advance(self.overall)
        self.progress.console.log(
            f"{result.repetition.label}: {len(result.jobs)} jobs, books balanced"
        )
