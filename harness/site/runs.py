"""The run folders a site is built from: found, read with the harness's own readers
(run.json by `load_document`, results.json by `Results`, the derived CSVs by
`harness.explore`), and placed in the site at `runs/<scenario>/<run id>/`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from harness.errors import HarnessError
from harness.explore import RunData
from harness.results.document import RunDocument, queue_settings
from harness.results.headline import Results
from harness.results.jobs import RUN_ID

RUNS = "runs"  # the site's folder of run folders
REPORT = "report.html"


@dataclass(frozen=True)
class SiteRun:
    """One run folder as the site shows it."""

    data: RunData

    @property
    def document(self) -> RunDocument:
        return self.data.document

    @property
    def run_id(self) -> str:
        return self.document.run_id

    @property
    def scenario(self) -> str:
        return self.document.scenario.name

    @property
    def href(self) -> str:
        """Its folder in the site, relative to the site's root, with a trailing slash."""
        return f"{RUNS}/{self.scenario}/{self.run_id}/"

    @property
    def report(self) -> str | None:
        """Its report.html in the site, where the run wrote one."""
        return self.href + REPORT if (self.data.path / REPORT).is_file() else None

    @cached_property
    def results(self) -> Results | None:
        path = self.data.path / Results.NAME
        return Results.read(path) if path.is_file() else None

    @property
    def complete(self) -> bool:
        return self.document.status == "complete"

    @property
    def disturbed(self) -> bool:
        """Whether a fault or a held transaction ran beside its workers: its waits are
        the fault's, not the queue's alone."""
        return any(
            entry.faults or entry.library_faults or entry.long_transaction
            for entry in self.document.repetitions
        )

    @property
    def commit(self) -> str | None:
        commit = self.document.metadata.get("harness", {}).get("git_commit")
        return commit if isinstance(commit, str) and commit else None

    @property
    def dirty(self) -> bool:
        return self.document.metadata.get("harness", {}).get("git_dirty") is True

    @property
    def short_commit(self) -> str:
        if self.commit is None:
            return "-"
        return self.commit[:10] + ("+dirty" if self.dirty else "")

    @property
    def kind(self) -> str:
        return self.results.kind if self.results is not None else "run"

    def command(self) -> str:
        """The command line that made the run, as a user types it: `harness` for however
        the harness was started (its script, python -m harness); the DSN's password was
        taken out when it was recorded."""
        recorded = self.document.metadata.get("command")
        if not isinstance(recorded, list) or not recorded:
            return ""
        return shlex.join(["harness", *(str(arg) for arg in recorded[1:])])

    def reproduce(self) -> str:
        """The commands that run it again: the harness at its commit, then its command."""
        checkout = f"git checkout {self.commit}\n" if self.commit else ""
        return checkout + self.command()

    def csv_files(self) -> list[str]:
        """The run's CSV files, raw and derived, by name."""
        return sorted(path.name for path in self.data.path.glob("*.csv"))

    def table(self, name: str) -> pd.DataFrame | None:
        """A derived CSV of the run, each row with the run's id and site folder."""
        frame = self.data.table(name)
        if frame is None or not len(frame):
            return None
        return frame.assign(**{RUN_ID: self.run_id, "href": self.href})

    def settings(self) -> dict[str, tuple[str, str]]:
        """Each strategy's library and setting (default or tuned), from run.json."""
        return {
            name: (setting.library, setting.label)
            for name, setting in queue_settings(self.document).items()
        }


def collect(paths: list[Path]) -> list[SiteRun]:
    """Every run folder given or under a folder given, each once, oldest first. A path
    that is none and has none under it is refused in one line."""
    found: dict[str, SiteRun] = {}  # by run id: a copy of a run (an earlier site) once
    for given in paths:
        folders = run_folders(given)
        if not folders:
            raise HarnessError(
                f"{given}: no run folder (a folder with run.json, as harness run and "
                "harness explain write) is this path or under it"
            )
        for folder in folders:
            run = SiteRun(RunData(folder.resolve()))
            found.setdefault(run.run_id, run)  # run.json read now: an unreadable one is refused
    return sorted(found.values(), key=lambda run: (run.document.started_at, run.run_id))


def run_folders(given: Path) -> list[Path]:
    """`given` if it is a run folder, else the run folders under it (not through a
    symbolic link: results/latest points at one of them)."""
    if not given.exists():
        return []
    if (given / "run.json").is_file():
        return [given]
    if not given.is_dir():
        return []
    return [
        path.parent
        for path in sorted(given.rglob("run.json"))
        if path.is_file() and not _through_link(path.parent, given)
    ]


def _through_link(folder: Path, root: Path) -> bool:
    relative = folder.relative_to(root)
    return any(
        (root / Path(*relative.parts[: i + 1])).is_symlink() for i in range(len(relative.parts))
    )
