"""A suite run: its scenarios one after the other, each into a run folder of its own, and
the suite's folder beside them with the tables read across those runs (the
library-by-fault matrix of harness/analysis/fault_matrix.py). Whatever happens, suite.json
ends with the suite's status, the runs it made, and the matrix of those that finished.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import yaml

from harness.analysis.fault_matrix import Case, fault_matrix, matrix_sections, unaccounted
from harness.errors import RunFailed, Terminated
from harness.report.html import plain_html
from harness.report.sections import Section, markdown
from harness.results.document import RunDocument
from harness.results.folder import RunFolder
from harness.results.suite import SuiteDocument, SuiteRun
from harness.results.versioned import UnreadableDocument
from harness.scenario.loader import LoadedScenario, LoadedSuite
from harness.scenario.model import Scenario
from harness.scenario.workload import count_jobs
from harness.server.dsn import scrub
from harness.server.provenance import collect_local

if TYPE_CHECKING:  # its module draws the figures: matplotlib, loaded when they are
    from harness.run.render import Rendered


@dataclass(frozen=True)
class SuiteOutcome:
    folder: RunFolder
    document: SuiteDocument
    sections: list[Section]

    @property
    def report(self) -> Path:
        return self.folder.path / "report.html"


def run_suite(
    loaded: LoadedSuite, root: Path, run_one: Callable[[LoadedScenario], Rendered]
) -> SuiteOutcome:
    """Each case by `run_one` (a whole `harness run` of its scenario), in the suite's
    order; the suite's folder written as each ends, and its tables at the end, or at the
    failure or interrupt that ends it early (raised again once they are written)."""
    folder = RunFolder.create(root, loaded.suite.name)
    folder.write("suite.yaml", loaded.text)
    document = SuiteDocument(
        suite_id=folder.run_id,
        name=loaded.suite.name,
        path=loaded.path,
        sha256=loaded.sha256,
        started_at=_utc_now(),
        metadata=collect_local(),
        runs=[
            SuiteRun(fault=case.fault, scenario=scenario.scenario.name, path=case.scenario)
            for case, scenario in zip(loaded.suite.suite, loaded.cases, strict=True)
        ],
    )
    _write_document(folder, document)
    cases: list[Case] = []
    try:
        for index, scenario in enumerate(loaded.cases):
            try:
                outcome = run_one(scenario)
            except BaseException:
                document.runs[index] = _started_and_cut(document.runs[index], root)
                raise
            document.runs[index] = _ran(document.runs[index], outcome, root)
            cases.append(_case(document.runs[index].fault, scenario, outcome))
            _write_document(folder, document)
    except BaseException as error:
        interrupted = isinstance(error, KeyboardInterrupt | Terminated)
        document.status = "interrupted" if interrupted else "failed"
        document.error = scrub(str(error) or type(error).__name__)
        document.finished_at = _utc_now()
        with contextlib.suppress(Exception):  # what was measured is kept; the error goes on
            _write_tables(folder, document, cases)
        raise
    document.finished_at = _utc_now()
    sections = _write_tables(folder, document, cases)
    return SuiteOutcome(folder, document, sections)


def render_suite(path: Path) -> SuiteOutcome:
    """A suite folder's tables made again from its runs' folders (`harness report`): the
    runs it names that finished, read from their run.json and derived tables, their
    jobs enqueued from the scenario each kept."""
    folder = RunFolder(path=path, run_id=path.name)
    document = SuiteDocument.read(path / SuiteDocument.NAME)
    root = path.parent.parent  # results/<suite>/<id>: the runs are results/<scenario>/<id>
    cases = [
        _read_case(run.fault, root / run.folder)
        for run in document.runs
        if run.folder is not None and run.status == "complete"
    ]
    return SuiteOutcome(folder, document, _write_tables(folder, document, cases))


def _read_case(fault: str, run: Path) -> Case:
    tables = {
        name: pd.read_csv(run / name) if (run / name).is_file() else None
        for name in ("library-faults.csv", "bloat-summary.csv", "recovery-waits.csv")
    }
    scenario = Scenario.model_validate(yaml.safe_load((run / "scenario.yaml").read_text()))
    return Case(
        fault=fault,
        document=RunDocument.read(run / RunDocument.NAME),
        enqueued=count_jobs(scenario),
        library_faults=tables["library-faults.csv"],
        bloat=tables["bloat-summary.csv"],
        recovery_waits=tables["recovery-waits.csv"],
    )


def _case(fault: str, scenario: LoadedScenario, outcome: Rendered) -> Case:
    return Case(
        fault=fault,
        document=outcome.document,
        enqueued=count_jobs(scenario.scenario),
        library_faults=outcome.tables.library_faults,
        bloat=outcome.tables.bloat,
        recovery_waits=outcome.tables.recovery_waits,
    )


def _ran(run: SuiteRun, outcome: Rendered, root: Path) -> SuiteRun:
    return run.model_copy(
        update={
            "run_id": outcome.document.run_id,
            "folder": str(outcome.folder.path.relative_to(root)),
            "status": outcome.document.status,
        }
    )


def _started_and_cut(run: SuiteRun, root: Path) -> SuiteRun:
    """The run a failure or interrupt cut short, found by results/latest (pointed at each
    run as its folder is made), if it was made, with the status its run.json ended in."""
    latest = root / "latest"
    with contextlib.suppress(OSError, UnreadableDocument):
        target = (root / latest.readlink()).resolve()
        if target.parent.name == run.scenario:
            status = RunDocument.read(target / RunDocument.NAME).status
            return run.model_copy(
                update={
                    "run_id": target.name,
                    "folder": str(target.relative_to(root.resolve())),
                    "status": status,
                }
            )
    return run


def _write_tables(folder: RunFolder, document: SuiteDocument, cases: list[Case]) -> list[Section]:
    """fault-matrix.csv, summary.md and report.html from the finished cases; then the
    document, final. A job the matrix cannot place in one outcome fails the suite: the
    harness lost track of it (each run's own books should have said so first)."""
    sections: list[Section] = []
    lost: list[str] = []
    if cases:
        matrix = fault_matrix(cases)
        lost = unaccounted(matrix)
        document.files["fault_matrix"] = _write(folder, "fault-matrix.csv", _csv(matrix))
        runs = [(run.fault, run.scenario, run.folder or "(not run)") for run in document.runs]
        sections = matrix_sections(matrix, runs)
        title = f"{document.name}: {_status_words(document)}"
        document.files["summary"] = _write(folder, "summary.md", markdown(title, sections))
        intro = (
            f"Suite {document.suite_id} of {document.path} (sha256 {document.sha256[:12]}), "
            f"{document.started_at} to {document.finished_at}."
        )
        page = plain_html(title, intro, sections, [])
        document.files["report"] = _write(folder, "report.html", page)
    if lost and document.status == "running":
        document.status = "failed"
        document.error = "the suite's books do not balance: " + "; ".join(lost)
    if document.status == "running":
        document.status = "complete"
    _write_document(folder, document)
    if lost:
        raise RunFailed(f"{folder.path}: the suite's books do not balance: {'; '.join(lost)}")
    return sections


def _status_words(document: SuiteDocument) -> str:
    done = sum(run.status == "complete" for run in document.runs)
    return f"{done} of {len(document.runs)} scenarios run" + (
        "" if document.status in ("running", "complete") else f" ({document.status})"
    )


def _csv(frame: pd.DataFrame) -> str:
    return str(frame.to_csv(index=False))


def _write(folder: RunFolder, name: str, text: str) -> str:
    return folder.write(name, text, replace=True).name


def _write_document(folder: RunFolder, document: SuiteDocument) -> None:
    folder.write("suite.json", document.dumps(), replace=True)


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
