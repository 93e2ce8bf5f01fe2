"""One module per CLI verb: each parses nothing and orchestrates one thing."""

from __future__ import annotations

import importlib
from pathlib import Path

# What the commands draw and render with, imported by a command only when it draws.
_DRAWING = ("harness.run.render", "harness.analysis.figures", "harness.report.plots")


def every_command_module() -> list[str]:
    """Each verb's module and the modules they draw with: all a command may import."""
    verbs = sorted(path.stem for path in Path(__file__).parent.glob("[!_]*.py"))
    return ["harness.cli", *_DRAWING, *(f"{__name__}.{verb}" for verb in verbs)]


def load_every_command() -> None:
    """Import all a command may import: `make venv` does, to have each module compiled
    to bytecode once (the rest of the environment is compiled as a process first
    imports it), and the test suite's fork server, to import it once for every fork."""
    for module in every_command_module():
        importlib.import_module(module)
