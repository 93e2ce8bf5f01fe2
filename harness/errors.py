"""Errors the CLI turns into one line and an exit code, never a traceback."""

import difflib
from collections.abc import Iterable
from pathlib import Path


class HarnessError(Exception):
    """Bad input or an unusable environment: nothing was measured. Exit code 2."""

    exit_code = 2


class ProviderUnavailable(HarnessError):
    """The chosen PostgreSQL provider cannot give us a server."""


class RunFailed(Exception):
    """A run started but cannot be trusted (the books do not balance, a worker died).

    Exit code 1: what was measured is kept in the run folder, marked failed.
    """

    exit_code = 1


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C so every server and worker is stopped."""


class ReportInterrupted(BaseException):
    """Ctrl-C or SIGTERM while a finished run's report was written. Its measurements are
    whole and kept (run.json says complete); `harness report` writes the derived files."""

    def __init__(self, folder: Path) -> None:
        super().__init__(f"interrupted while writing the report of {folder}")
        self.folder = folder


def unknown_name(name: str, known: Iterable[str], what: str) -> str:
    """What to say of a name that is none of `known`: the one it was likely meant to be,
    or, with none close, every one (`what` names them: 'available', 'shipped')."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.8)
    if close:
        return f"did you mean {close[0]}?"
    return f"{what}: {', '.join(names)}"
