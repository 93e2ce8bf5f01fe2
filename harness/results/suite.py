"""suite.json: what a suite's folder records, results/<suite>/<UTC time>-<short id>/.

A suite (scenarios/real-queues-faults.yaml) runs its scenarios one after the other, each
into a run folder of its own; its folder says which runs it made, in which state each
ended, and holds the tables read across them (fault-matrix.csv, summary.md,
report.html), made from those runs' files alone.

Format history (SUITE_FORMAT_VERSION):
- 1: first version.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.results.document import Status
from harness.results.versioned import Versioned

SUITE_FORMAT_VERSION = 1
SUITE_FILES = {
    "suite.json": "the suite's document (this format)",
    "suite.yaml": "the suite's file exactly as read; its sha256 is in suite.json",
    "fault-matrix.csv": "one row per repetition of every case: the outcomes of its jobs",
    "summary.md": "the library-by-fault table, the worker kills and every row, in Markdown",
    "report.html": "the same, as one page, with where each run's own report is",
}


class SuiteRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fault: str  # the case's column in the suite's table
    scenario: str  # the case's scenario name
    path: str  # its file, as the suite named it
    run_id: str | None = None  # None: the case never started
    folder: str | None = None  # relative to the results folder
    status: Status | None = None


class SuiteDocument(Versioned):
    NAME = "suite.json"
    VERSION = SUITE_FORMAT_VERSION

    suite_id: str
    name: str
    path: str
    sha256: str
    status: Status = "running"
    error: str | None = None
    started_at: str
    finished_at: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)  # the machine, as run.json's
    runs: list[SuiteRun] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)
