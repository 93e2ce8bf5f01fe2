"""run.json: the typed run document and its format history, on the versioned-document
base (harness/results/versioned.py: version, write-once, reading with migration).

A run's document is written when the run folder is made (status `running`), again when
the run ends (`complete`, `failed` or `interrupted`), and by every render (the `files`
it wrote). Readers read every format version below; a document of an older version is
migrated on reading, and written back in the current one by the next render.

Format history (RUN_FORMAT_VERSION):
  1  first version.
  2  `queues`: per strategy, the kind of queue that ran and its provenance (the SQL
     files of a built-in strategy; a library's version and effective settings); per
     repetition, `fleet`: where a fleet's members ran their workers (jobs.csv gained a
     `host` column). Version 1 documents read with `queues` empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.results.contract import NAME_PATTERN
from harness.results.versioned import Migrations, Versioned

RUN_FORMAT_VERSION = 2
# In a queue's provenance: where it could not be set up as the scenario asks (a library's
# minimum poll interval), each said in a phrase that follows the queue's name.
UNLIKE_THE_SCENARIO = "unlike_the_scenario"
# In a library queue's provenance: the library's name, and on a `_tuned` mapping the
# settings its maintainers recommend that it runs with (name -> value), absent on a
# library's default mapping (docs/real-queues.md says where each comes from).
LIBRARY = "library"
TUNED = "tuned"
HARNESS = "harness"  # the library of the built-in SQL strategies, in tables grouped by one

Status = Literal["running", "complete", "failed", "interrupted"]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScenarioRef(_Part):
    name: str
    path: str
    sha256: str
    seed: int  # durations, sizes and arrivals are drawn from it
    copy_: str = Field(default="scenario.yaml", alias="copy")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class RepetitionEntry(_Part):
    """One repetition as it ran: its books and what its features recorded."""

    strategy: str
    workers: int
    repetition: int
    jobs: int
    empty_polls: int
    lost_races: int
    books: str  # balanced, or 'stuck: N'
    started_at: str
    finished_at: str
    faults: dict[str, Any] | None = None  # harness/run/faults.py FaultDriver.summary
    long_transaction: dict[str, Any] | None = None  # harness/run/long_transaction.py
    fleet: list[dict[str, Any]] | None = None  # each member: host, pid, slots (--fleet)


# A capture's files are explain/<variant>/<strategy>.*: its names are the contract's, never
# a path (`harness report` opens what run.json names).
FileName = Annotated[str, Field(pattern=NAME_PATTERN)]


class PlanEntry(_Part):
    """One plan capture: its backlog's shape, or why it was skipped."""

    variant: FileName
    strategy: FileName
    backlog: dict[str, int]
    skipped: str | None = None
    repetitions: int = 0


def _queues_unrecorded(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "queues": {}}


class RunDocument(Versioned):
    NAME = "run.json"
    VERSION = RUN_FORMAT_VERSION
    MIGRATIONS: ClassVar[Migrations] = {1: _queues_unrecorded}

    run_id: str
    status: Status = "running"
    error: str | None = None
    started_at: str
    finished_at: str | None = None
    scenario: ScenarioRef
    options: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)  # harness/server/provenance.py
    repetitions: list[RepetitionEntry] = Field(default_factory=list)
    plans: list[PlanEntry] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)  # what each render wrote
    simulation: dict[str, str | None] = Field(default_factory=dict)  # strategy -> policy
    queues: dict[str, dict[str, Any]] = Field(default_factory=dict)  # strategy -> provenance

    def document(self) -> dict[str, Any]:
        data = super().document()
        for entry in data["repetitions"]:  # features absent from a repetition stay absent
            for feature in ("faults", "long_transaction", "fleet"):
                if entry[feature] is None:
                    del entry[feature]
        return data


def load_document(run: Path) -> RunDocument:
    """run.json of a run folder, migrated to the current version; UnreadableDocument (one
    line naming the file) if it is not one this harness reads."""
    return RunDocument.read(run / "run.json")


def unlike_the_scenario(document: RunDocument) -> list[str]:
    """Every queue's departures from the scenario, as one sentence each."""
    return [
        f"{name} {phrase}: compare its figures with that in mind"
        for name, entry in document.queues.items()
        for phrase in entry.get(UNLIKE_THE_SCENARIO, [])
    ]


@dataclass(frozen=True)
class QueueSetting:
    """Which library a strategy runs, and whether at its default mapping or tuned (with
    the settings named): what tables that put a library's default and tuned mappings side
    by side read."""

    library: str
    tuned: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return "tuned" if self.tuned else "default"

    @property
    def named(self) -> str:
        """The tuned settings, `name=value` each."""
        return ", ".join(f"{name}={value}" for name, value in self.tuned.items())


def queue_settings(document: RunDocument) -> dict[str, QueueSetting]:
    """Each strategy's library (the harness's own for a SQL strategy) and tuned settings."""
    return {
        name: QueueSetting(str(entry.get(LIBRARY) or HARNESS), dict(entry.get(TUNED) or {}))
        for name, entry in document.queues.items()
    }
