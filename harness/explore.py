"""Loading a run folder for notebooks and your own analysis.

from harness.explore import open_run
run = open_run()         # results/latest, here or in the nearest folder above
run.jobs        # jobs.csv, timestamps parsed (UTC): one row per job
run.waits       # the same with wait_s, start_s and finish_s (seconds from t0)
run.summary     # per major, strategy, workers, repetition and class, as in summary.csv
run.plans       # one row per captured EXPLAIN execution, as in plans.csv
run.document    # run.json (harness/results/document.py): status, provenance, repetitions
run.scenario    # the scenario the run was made from
run.results     # results.json: the headline figures, one row each

Every row names the server it ran on (pg_version): a run may span several majors.

from harness.explore import open_runs
runs = open_runs("results/noisy-neighbour/*")   # every run folder the glob matches
runs.jobs       # every run's jobs.csv, concatenated, with a run_id column
runs.summary    # likewise summary.csv's rows (any derived CSV: runs.table("tenants.csv"))
runs.results    # every run's headline figures, one row per run and figure
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd
import yaml

from harness.analysis.history import figures_frame
from harness.analysis.majors import stack
from harness.analysis.plans import plan_runs
from harness.analysis.waits import summarize, with_waits
from harness.results.document import RunDocument, load_document
from harness.results.headline import Results
from harness.results.jobs import PG, load_jobs, read_versioned_csv
from harness.run.render import load_captures, on_server
from harness.scenario.model import Scenario

LATEST = Path("results") / "latest"


@dataclass(frozen=True)
class RunData:
    path: Path

    @cached_property
    def document(self) -> RunDocument:
        return load_document(self.path)

    @cached_property
    def scenario(self) -> Scenario:
        return Scenario.model_validate(yaml.safe_load((self.path / "scenario.yaml").read_text()))

    @cached_property
    def jobs(self) -> pd.DataFrame | None:
        if not (self.path / "jobs.csv").exists():
            return None
        return on_server(load_jobs(self.path), self.document)

    @property
    def waits(self) -> pd.DataFrame | None:
        return with_waits(self.jobs) if self.jobs is not None else None

    @cached_property
    def summary(self) -> pd.DataFrame | None:
        """Each major's summary, as the render derives it (a major is a run of its own)."""
        if self.jobs is None:
            return None
        majors = self.jobs.groupby(PG, sort=False)
        return stack([(str(v), summarize(jobs.drop(columns=PG))) for v, jobs in majors])

    @cached_property
    def plans(self) -> pd.DataFrame | None:
        captures = load_captures(self.path, self.document)
        versions = dict.fromkeys(capture.pg_version for capture in captures)
        return stack([(v, plan_runs([c for c in captures if c.pg_version == v])) for v in versions])

    @cached_property
    def results(self) -> pd.DataFrame:
        """results.json's figures, one row each (empty for a run not yet rendered)."""
        path = self.path / Results.NAME
        return figures_frame([Results.read(path)] if path.is_file() else [])

    @property
    def run_id(self) -> str:
        return self.document.run_id

    def table(self, name: str) -> pd.DataFrame | None:
        """A derived CSV of the run folder, with its run_id column (written by older
        harnesses without one: added)."""
        path = self.path / name
        if not path.is_file():
            return None
        frame = read_versioned_csv(path)  # pg_version as text: 17.10 is not 17.1
        if "run_id" not in frame.columns:
            frame.insert(0, "run_id", self.run_id)
        return frame


@dataclass(frozen=True)
class RunSet:
    """Many run folders read as one: each frame the runs' frames concatenated, every row
    with the run_id it came from."""

    runs: list[RunData]

    @property
    def jobs(self) -> pd.DataFrame:
        return self._concat(
            run.jobs.assign(run_id=run.run_id) if run.jobs is not None else None
            for run in self.runs
        )

    @property
    def summary(self) -> pd.DataFrame:
        return self.table("summary.csv")

    @property
    def results(self) -> pd.DataFrame:
        return self._concat(run.results for run in self.runs)

    def table(self, name: str) -> pd.DataFrame:
        """A derived CSV (summary.csv, tenants.csv, plans.csv, ...) of every run."""
        return self._concat(run.table(name) for run in self.runs)

    @staticmethod
    def _concat(frames: Iterable[pd.DataFrame | None]) -> pd.DataFrame:
        present = [frame for frame in frames if frame is not None and len(frame)]
        return pd.concat(present, ignore_index=True) if present else pd.DataFrame()


def open_run(path: str | Path | None = None) -> RunData:
    """A run folder, read lazily from its raw files; by default the newest run."""
    folder = Path(path).resolve() if path else latest_run(Path.cwd())
    if not (folder / "run.json").is_file():
        raise FileNotFoundError(f"{folder}: not a run folder (no run.json)")
    return RunData(folder)


def open_runs(pattern: str = "results/*/*", root: str | Path | None = None) -> RunSet:
    """Every run folder `pattern` matches (a glob relative to `root`, by default the
    current folder), oldest first; folders without a run.json are left out."""
    base = Path(root) if root is not None else Path.cwd()
    folders = sorted(
        {path.resolve() for path in base.glob(pattern) if (path / "run.json").is_file()},
        key=lambda path: path.name,
    )
    if not folders:
        raise FileNotFoundError(f"no run folder matches {pattern} in {base}")
    return RunSet([RunData(folder) for folder in folders])


def latest_run(start: Path) -> Path:
    """results/latest in `start` or the nearest folder above it that has one: Jupyter
    starts a notebook's kernel in the notebook's own folder (notebooks/), not where
    `harness run` wrote its results."""
    for folder in (start, *start.parents):
        if (folder / LATEST).exists():
            return (folder / LATEST).resolve()
    raise FileNotFoundError(
        f"no {LATEST} in {start} or any folder above it: run harness run first, or "
        "give the run folder (HARNESS_RUN=path)"
    )
