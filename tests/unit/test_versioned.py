"""The five JSON formats on one base (harness/results/versioned.py): each written once
unless its writer replaces it, each read back through its migrations, each refused in
one line naming the file when it cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.calibration import CalibrationDocument
from harness.check.baseline import Baseline
from harness.check.verdict import CheckSettings, Probe
from harness.experiments.isolation import IsolationDocument
from harness.experiments.overhead import OverheadDocument
from harness.results.document import (
    RUN_FORMAT_VERSION,
    RunDocument,
    ScenarioRef,
    load_document,
)
from harness.results.versioned import UnreadableDocument, Versioned
from tests.conftest import ROOT

FIXTURE_RUN = ROOT / "tests" / "fixtures" / "runs-v1" / "legacy-mix"
COMMITTED_BASELINES = sorted((ROOT / "baselines").glob("dequeue-pg*.json"))


def documents() -> list[Versioned]:
    """One small document of each format."""
    probe = Probe("fifo", "skewed", 10, "Index Scan", "Index Scan", 0, [], [0.1], [0.1])
    return [
        RunDocument(
            run_id="r1",
            started_at="2026-12-01T00:00:00+00:00",
            scenario=ScenarioRef(name="demo", path="demo.yaml", sha256="0" * 64, seed=1),
        ),
        Baseline(
            pg_version="17.10",
            probes_file="probes.yaml",
            probes_sha256="0" * 64,
            settings=CheckSettings(),
            metadata={},
            probes=[probe],
        ),
        CalibrationDocument(scenario="demo", poll_interval_ms=10, pairs=[], growth=[]),
        OverheadDocument(
            settings={}, pgbench={}, measurements=[], summary=[], goals=[], metadata={}
        ),
        IsolationDocument(run_id="r1", started_at="t", settings={}, metadata={}),
    ]


FORMATS = pytest.mark.parametrize("document", documents(), ids=lambda d: type(d).__name__)


@FORMATS
def test_a_document_is_written_once_unless_its_writer_replaces_it(
    document: Versioned, tmp_path: Path
) -> None:
    path = tmp_path / document.NAME
    document.write(path)
    with pytest.raises(FileExistsError, match="never overwritten"):
        document.write(path)
    assert type(document).read(path) == document
    assert json.loads(path.read_text())["format_version"] == document.VERSION
    document.write(path, replace=True)
    assert [p.name for p in tmp_path.iterdir()] == [document.NAME]  # no temporary left


@FORMATS
@pytest.mark.parametrize(
    ("content", "refusal"),
    [
        (b"{\xff}", "not UTF-8 (byte 1)"),
        (b"{not json", "not JSON (Expecting property name enclosed in double quotes, line 1)"),
        (b"[1, 2]", "not a {name}: a JSON object with its format_version"),
        (b'{"format_version": 99}', "{name} format_version 99; this harness reads"),
        (b'{"format_version": true}', "{name} format_version True; this harness reads"),
    ],
)
def test_what_a_format_cannot_read_is_one_line_naming_the_file(
    document: Versioned, tmp_path: Path, content: bytes, refusal: str
) -> None:
    path = tmp_path / document.NAME
    path.write_bytes(content)
    with pytest.raises(UnreadableDocument) as caught:
        type(document).read(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: " + refusal.format(name=document.NAME))
    assert "\n" not in message and caught.value.exit_code == 2


@FORMATS
def test_a_field_a_format_does_not_have_is_refused_naming_it(
    document: Versioned, tmp_path: Path
) -> None:
    path = tmp_path / document.NAME
    path.write_text(json.dumps({**document.document(), "colour": "red"}))
    with pytest.raises(UnreadableDocument, match=f"{path}: colour: Extra inputs"):
        type(document).read(path)


def test_a_run_json_of_version_1_is_migrated_on_reading() -> None:
    """The fixture runs were written by the harness of format 1, before `queues`."""
    assert json.loads((FIXTURE_RUN / "run.json").read_text())["format_version"] == 1
    document = load_document(FIXTURE_RUN)
    assert (document.format_version, document.queues) == (RUN_FORMAT_VERSION, {})


def test_an_isolation_json_of_version_1_is_migrated_on_reading(tmp_path: Path) -> None:
    """Version 1 was written once, at the end, without `error` and `started_at`."""
    path = tmp_path / "isolation.json"
    version_1 = {
        "format_version": 1,
        "run_id": "20261201T000000Z-abcdef",
        "status": "complete",
        "finished_at": "2026-12-01T00:00:01+00:00",
        "settings": {"jobs": 10},
        "results": [{"pool": "psycopg", "mode": "set", "jobs": 10}],
        "set_local_leaked": False,
        "metadata": {},
        "files": {"jobs": "jobs.csv", "table": "isolation.md"},
    }
    path.write_text(json.dumps(version_1))
    document = IsolationDocument.read(path)
    assert (document.format_version, document.error, document.started_at) == (2, None, None)
    assert document.results == version_1["results"]


@pytest.mark.parametrize("path", COMMITTED_BASELINES, ids=lambda path: path.name)
def test_the_committed_baselines_read_and_write_back_the_same(path: Path) -> None:
    baseline = Baseline.read(path)
    assert baseline.probes and all(isinstance(probe, Probe) for probe in baseline.probes)
    assert json.loads(baseline.dumps()) == json.loads(path.read_text())
    assert path.name == f"dequeue-pg{baseline.major}.json"


def test_a_migration_runs_for_each_version_a_format_still_reads() -> None:
    assert RunDocument.reads() == (1, 2, 3, 4, 5, 6)
    assert IsolationDocument.reads() == (1, 2)
    for document in documents():
        assert set(type(document).MIGRATIONS) == set(type(document).reads()[:-1])


def test_a_version_3_runs_queues_are_read_as_the_typed_record() -> None:
    """Format 3's provenance was a dict whose keys differed by library (procrastinate's
    `connector`, others' `driver`; a library's `version`, an adapter's `versions`); each
    is read into format 4's one record, nothing it said dropped."""
    version_3 = {
        "format_version": 3,
        "run_id": "r",
        "status": "complete",
        "started_at": "2026-12-01T00:00:00+00:00",
        "scenario": {"name": "s", "path": "s.yaml", "sha256": "0", "seed": 1},
        "queues": {
            "fifo": {"kind": "sql", "files": ["fifo.sql"], "claim": "short"},
            "procrastinate_tuned": {
                "library": "procrastinate",
                "version": "3.5.0",
                "connector": "PsycopgConnector",
                "mapping": "one_queue",
                "settings": {"listen_notify": True},
                "tuned": {"processes": 2},
            },
            "pgboss": {
                "adapter": "pgboss",
                "protocol": 1,
                "library": "pg-boss",
                "language": "JavaScript (Node 22)",
                "versions": {"pg-boss": "12.38.0"},
                "settings": {"batchSize": 1},
                "unlike_the_scenario": ["polls every 0.5 s"],
            },
        },
    }
    queues = RunDocument.from_data(version_3, "run.json").queues
    assert queues["fifo"].settings == {"files": ["fifo.sql"], "claim": "short"}
    assert (queues["fifo"].kind, queues["fifo"].library) == ("sql", "harness")
    tuned = queues["procrastinate_tuned"]
    assert tuned.versions == {"procrastinate": "3.5.0"} and tuned.tuned == {"processes": 2}
    assert tuned.settings == {"listen_notify": True, "connector": "PsycopgConnector"}
    pgboss = queues["pgboss"]
    assert (pgboss.protocol, pgboss.unlike_the_scenario) == (1, ["polls every 0.5 s"])
