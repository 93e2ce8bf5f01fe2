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
  3  several PostgreSQL majors in one run (--pg-version 15,16,17,18): `majors`, those
     asked for, and `servers`, one entry per server the run ran on, with its
     `pg_version`, `provider` and `postgres` (which `metadata` held before); each
     repetition and plan capture names its `pg_version` (jobs.csv, monitor.csv and
     bloat.csv gained a `pg_version` column); a run of several majors keeps its
     captures under explain/pg<major>/. Version 2 documents read with their one server
     taken out of `metadata`.
  4  `queues`: each strategy's provenance is one typed record, the same keys for every
     queue (QueueProvenance: its kind, library, language, mapping, versions, settings,
     tuned settings with their sources, departures from the scenario, and an adapter's
     name, digest, protocol and the shipped adapter it replaces). Version 3 entries are
     read into it: a library's `version` (and `sql_version`) into `versions`, its
     `driver` or `connector` into `settings`, a SQL strategy's `files` and `claim` into
     `settings`.
  5  jobs.csv's first column is the run's `run_id`, as every derived table's is, so that
     the jobs of several runs concatenated still say whose they are. The document is as
     version 4's; a folder of version 4 has jobs.csv without the column.
  6  `cut`: the repetition an interrupt (or a failure) cut short, whose samples the run
     folder keeps (bloat.csv, fetch-plans.csv and horizon*.csv are appended to as they
     are sampled): its keys, its server's version, the latest sample's seconds from its
     clock's start (the cut) and the rows kept per file. Its jobs are in no file (its
     books were never checked). Version 5 documents read with `cut` null.
     Within version 6 too: a repetition's optional `idle` (a scenario's idle window),
     absent before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessError
from harness.results.contract import NAME_PATTERN
from harness.results.versioned import Migrations, Versioned

RUN_FORMAT_VERSION = 6
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


# A server's version, major.minor as PostgreSQL 10 and later number it: "17.10".
PgVersion = Annotated[str, Field(pattern=r"^[0-9]{1,3}\.[0-9]{1,4}$")]


class QueueProvenance(_Part):
    """What run.json records of the queue a strategy names, the same keys for every
    queue: a SQL strategy of the harness's (its files and claim in `settings`) or a
    library's adapter (docs/adapters.md)."""

    kind: Literal["sql", "adapter"]
    library: str  # the harness's own for a SQL strategy
    language: str
    mapping: str | None = None  # the mapping of tenants onto its library's knobs
    versions: dict[str, str] = Field(default_factory=dict)  # library, driver, runtime
    settings: dict[str, Any] = Field(default_factory=dict)  # as it actually set them
    # At its maintainers' settings: each setting's value, and where they recommend it;
    # empty at the library's defaults.
    tuned: dict[str, Any] = Field(default_factory=dict)
    tuned_sources: dict[str, str] = Field(default_factory=dict)
    # Where it could not be set up as the scenario asks (a library's minimum poll
    # interval), each a phrase that follows the queue's name.
    unlike_the_scenario: list[str] = Field(default_factory=list)
    adapter: str | None = None
    adapter_sha256: str | None = None
    protocol: int | None = None
    replaces: str | None = None  # the shipped adapter's folder an --adapters-dir one replaced
    # Its library's promise for a job whose worker died holding it (the manifest's
    # `recovery`: then, after_s, says, source), read beside a worker kill's outcome.
    recovery: dict[str, Any] | None = None


_LIBRARY_DESCRIPTIONS = ("driver", "connector")


def _typed_provenance(entry: dict[str, Any]) -> dict[str, Any]:
    """A version 3 entry (an untyped dict whose keys differed by library) as format 4's."""
    if entry.get("kind") == "sql":
        sql = {key: entry[key] for key in ("files", "claim") if key in entry}
        return {"kind": "sql", "library": HARNESS, "language": "SQL", "settings": sql}
    library = str(entry.get("library") or entry.get("adapter") or "unknown")
    versions = dict(entry.get("versions") or {})
    versions |= {library: str(entry["version"])} if "version" in entry else {}
    versions |= {"sql": str(entry["sql_version"])} if "sql_version" in entry else {}
    settings: dict[str, Any] = dict(entry.get("settings") or {})
    settings |= {key: entry[key] for key in _LIBRARY_DESCRIPTIONS if key in entry}
    kept = ("mapping", "unlike_the_scenario", "adapter", "adapter_sha256", "protocol")
    return {
        "kind": "adapter",
        "library": library,
        "language": str(entry.get("language") or "Python"),
        "versions": versions,
        "settings": settings,
        "tuned": dict(entry.get("tuned") or {}),
        **{key: entry[key] for key in kept if key in entry},
    }


def _typed_queues(data: dict[str, Any]) -> dict[str, Any]:
    queues = data.get("queues") or {}
    return {**data, "queues": {name: _typed_provenance(e) for name, e in queues.items()}}


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
    # faults.worker_kills and backend_kills, counted job by job: harness/run/faults.py
    library_faults: dict[str, Any] | None = None
    long_transaction: dict[str, Any] | None = None  # harness/run/long_transaction.py
    idle: dict[str, Any] | None = None  # the scenario's idle window: harness/run/idle.py
    fleet: list[dict[str, Any]] | None = None  # each member: host, pid, slots (--fleet)
    pg_version: PgVersion | None = None  # the server it ran on (format 3)


class CutEntry(_Part):
    """The repetition a run's end cut short, and what its samples' files kept of it."""

    strategy: str
    workers: int
    repetition: int
    pg_version: PgVersion | None = None
    last_sample_s: float | None = None  # the latest sample, from the clock's start
    rows: dict[str, int] = Field(default_factory=dict)  # per file, the rows kept


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
    pg_version: PgVersion | None = None  # the server it ran on (format 3)


class ServerEntry(_Part):
    """A server the run ran on, recorded as it started (harness/server/provenance.py)."""

    pg_version: PgVersion  # the server's own version
    provider: dict[str, Any] = Field(default_factory=dict)  # kind and its details
    postgres: dict[str, Any] = Field(default_factory=dict)  # version, settings

    @property
    def major(self) -> int:
        return int(self.pg_version.split(".")[0])


def pg_version(server_version_num: int) -> str:
    """17.10 from 170010: a server's version as PostgreSQL 10 and later number it."""
    return f"{server_version_num // 10000}.{server_version_num % 10000}"


def _queues_unrecorded(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "queues": {}}


def _one_server(data: dict[str, Any]) -> dict[str, Any]:
    """A version 2 run ran on one server, recorded in `metadata`."""
    metadata = dict(data.get("metadata") or {})
    postgres, provider = metadata.pop("postgres", None), metadata.pop("provider", None)
    number = (postgres or {}).get("server_version_num")
    if not isinstance(number, int):
        return {**data, "metadata": metadata, "majors": [], "servers": []}
    server = {"pg_version": pg_version(number), "provider": provider or {}, "postgres": postgres}
    version = server["pg_version"]
    return {
        **data,
        "metadata": metadata,
        "majors": [number // 10000],
        "servers": [server],
        "repetitions": [{**entry, "pg_version": version} for entry in data["repetitions"]],
        "plans": [{**entry, "pg_version": version} for entry in data.get("plans", [])],
    }


def _as_it_was(data: dict[str, Any]) -> dict[str, Any]:
    """Version 5 changed jobs.csv, not the document; version 6 added `cut`, null unless
    a repetition was cut short."""
    return data


class RunDocument(Versioned):
    NAME = "run.json"
    VERSION = RUN_FORMAT_VERSION
    MIGRATIONS: ClassVar[Migrations] = {
        1: _queues_unrecorded,
        2: _one_server,
        3: _typed_queues,
        4: _as_it_was,
        5: _as_it_was,
    }

    run_id: str
    status: Status = "running"
    error: str | None = None
    started_at: str
    finished_at: str | None = None
    scenario: ScenarioRef
    options: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)  # harness/server/provenance.py
    majors: list[int] = Field(default_factory=list)  # the PostgreSQL majors asked for
    servers: list[ServerEntry] = Field(default_factory=list)  # as each started
    repetitions: list[RepetitionEntry] = Field(default_factory=list)
    plans: list[PlanEntry] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)  # what each render wrote
    simulation: dict[str, str | None] = Field(default_factory=dict)  # strategy -> policy
    queues: dict[str, QueueProvenance] = Field(default_factory=dict)  # strategy -> its record
    cut: CutEntry | None = None  # the repetition cut short, if one was (format 6)

    def document(self) -> dict[str, Any]:
        data = super().document()
        for entry in data["repetitions"]:  # features absent from a repetition stay absent
            for feature in ("faults", "library_faults", "long_transaction", "fleet"):
                if entry[feature] is None:
                    del entry[feature]
        return data

    @property
    def pg_versions(self) -> list[str]:
        """The servers' versions, in the order the run ran on them."""
        return list(dict.fromkeys(server.pg_version for server in self.servers))

    def capture_stem(self, entry: PlanEntry) -> str:
        """Where a capture's files are, without their suffix: explain/<variant>/<strategy>,
        under explain/pg<major>/ in a run of several majors."""
        version = entry.pg_version
        major = f"pg{version.split('.')[0]}/" if version and len(self.majors) > 1 else ""
        return f"explain/{major}{entry.variant}/{entry.strategy}"

    def provenance(self) -> dict[str, Any]:
        """`metadata` with the server's `postgres` and `provider`, as a run of one server
        recorded them before format 3 (what harness compare compares); {} without any."""
        if not self.metadata:
            return {}
        if len(self.servers) != 1:
            return dict(self.metadata)
        server = self.servers[0]
        return {**self.metadata, "postgres": server.postgres, "provider": server.provider}


def refuse_several_majors(run: Path, what: str) -> None:
    """`what` (a comparison, a calibration) takes a run on one PostgreSQL major: one line
    for a run on several, whose report compares its majors already."""
    if not (run / "run.json").is_file():
        return
    versions = load_document(run).pg_versions
    if len(versions) > 1:
        raise HarnessError(
            f"{run}: a run on several PostgreSQL majors ({', '.join(versions)}); {what} "
            "takes a run on one (its report puts its majors side by side)"
        )


def load_document(run: Path) -> RunDocument:
    """run.json of a run folder, migrated to the current version; UnreadableDocument (one
    line naming the file) if it is not one this harness reads."""
    return RunDocument.read(run / "run.json")


def unlike_the_scenario(document: RunDocument) -> list[str]:
    """Every queue's departures from the scenario, as one sentence each."""
    return [
        f"{name} {phrase}: compare its figures with that in mind"
        for name, entry in document.queues.items()
        for phrase in entry.unlike_the_scenario
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
        name: QueueSetting(entry.library, dict(entry.tuned))
        for name, entry in document.queues.items()
    }
