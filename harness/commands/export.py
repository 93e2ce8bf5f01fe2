"""`harness export`: results.json's figures for a CI benchmark tracker (harness/results/
export.py), on stdout or into a new file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import cast, get_args

from harness.errors import HarnessError
from harness.results.export import ExportFormat, exported
from harness.results.folder import write_once
from harness.results.headline import Results


def export_command(paths: list[Path], form: str, bigger: bool, output: Path | None) -> int:
    """The figures of every input in `form`; the count exported."""
    formats: tuple[ExportFormat, ...] = get_args(ExportFormat)
    if form not in formats:
        raise HarnessError(f"--format: '{form}' is none of {', '.join(formats)}")
    if output is not None and output.exists():
        raise HarnessError(f"{output}: exists; an export never replaces a file: give another")
    documents = [(str(path), Results.read(path)) for given in paths for path in _results(given)]
    data = exported(documents, cast(ExportFormat, form), bigger)
    text = json.dumps(data, indent=1) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_once(output, text.encode())  # never over an earlier export
    return len(data)


def _results(given: Path) -> list[Path]:
    """A results.json, a run folder's, or under a results folder each scenario's newest
    run's (run ids begin with their UTC start: the last in name order), by scenario."""
    if given.is_file():
        return [given]
    if (given / Results.NAME).is_file():
        return [given / Results.NAME]
    newest = []
    if given.is_dir():
        for scenario in sorted(path for path in given.iterdir() if path.is_dir()):
            runs = sorted(scenario.glob(f"*/{Results.NAME}"))
            if runs and not scenario.is_symlink():
                newest.append(runs[-1])
    if newest:
        return newest
    raise HarnessError(
        f"{given}: no results.json, nor a results folder of scenarios' run folders with one "
        "(harness run writes results/<scenario>/<run id>/results.json)"
    )
