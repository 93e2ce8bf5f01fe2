"""run.json: the typed run document, its format version, and the one way to write and
read it.

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

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

RUN_FORMAT_VERSION = 2
READS = (1, 2)
# In a queue's provenance: where it could not be set up as the scenario asks (a library's
# minimum poll interval), each said in a phrase that follows the queue's name.
UNLIKE_THE_SCENARIO = "unlike_the_scenario"

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


class PlanEntry(_Part):
    """One plan capture: its backlog's shape, or why it was skipped."""

    variant: str
    strategy: str
    backlog: dict[str, int]
    skipped: str | None = None
    repetitions: int = 0


class RunDocument(_Part):
    format_version: int = RUN_FORMAT_VERSION
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

    def dumps(self) -> str:
        data = self.model_dump(mode="json", by_alias=True)
        for entry in data["repetitions"]:  # features absent from a repetition stay absent
            for feature in ("faults", "long_transaction", "fleet"):
                if entry[feature] is None:
                    del entry[feature]
        return json.dumps(data, indent=2) + "\n"


def load_document(run: Path) -> RunDocument:
    """run.json of a run folder, migrated to the current version; ValueError if it is
    not one this harness reads."""
    path = run / "run.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: cannot read ({error})") from error
    version = data.get("format_version") if isinstance(data, dict) else None
    if version not in READS:
        raise ValueError(f"{path}: format_version {version}, this harness reads {READS}")
    try:
        return RunDocument.model_validate({**data, "format_version": RUN_FORMAT_VERSION})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{path}: {where}: {first['msg']}") from error


def unlike_the_scenario(document: RunDocument) -> list[str]:
    """Every queue's departures from the scenario, as one sentence each."""
    return [
        f"{name} {phrase}: compare its figures with that in mind"
        for name, entry in document.queues.items()
        for phrase in entry.get(UNLIKE_THE_SCENARIO, [])
    ]
