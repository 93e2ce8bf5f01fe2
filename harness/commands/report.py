"""`harness report`: a run folder's derived files rebuilt from its raw ones."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.commands.outcome import show_outcome, show_suite
from harness.errors import HarnessError
from harness.results.folder import RunFolder
from harness.run.render import Rendered, render_run
from harness.run.suite import render_suite


def report_command(run: Path, console: Console, *, plots: bool = True) -> Rendered | None:
    """Rebuild every derived file of a run folder from its raw files (but the figures,
    without `plots`); or a suite folder's tables from its runs' folders."""
    if (run / "suite.json").is_file():
        try:
            show_suite(render_suite(run), console)
        except (ValueError, KeyError, OSError) as error:
            raise HarnessError(f"{run}: cannot render: {error}") from error
        return None
    if not (run / "run.json").is_file():
        raise HarnessError(f"{run}: not a run folder (no run.json) nor a suite's (no suite.json)")
    try:
        rendered = render_run(RunFolder(path=run, run_id=run.name), plots=plots)
    except (ValueError, KeyError, OSError) as error:
        raise HarnessError(f"{run}: cannot render: {error}") from error
    show_outcome(rendered, console)
    return rendered
