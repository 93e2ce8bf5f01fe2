from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results.contract import listed
from harness.results.document import (
    RUN_FORMAT_VERSION,
    RepetitionEntry,
    RunDocument,
    ScenarioRef,
    load_document,
)
from harness.results.folder import RunFolder, point_latest
from harness.results.versioned import UnreadableDocument


def test_run_folders_are_new_and_files_never_overwritten(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "demo")
    assert folder.path.parent == tmp_path / "demo"
    folder.write("a.txt", "one")
    with pytest.raises(FileExistsError, match="never overwritten"):
        folder.write("a.txt", "two")
    assert (folder.path / "a.txt").read_text() == "one"
    assert RunFolder.create(tmp_path, "demo").path != folder.path


def test_writes_leave_no_temporary_files_and_are_readable_by_others(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "demo")
    written = folder.write("b.bin", b"\x00\x01")
    assert [p.name for p in folder.path.iterdir()] == ["b.bin"]
    assert written.stat().st_mode & 0o044 == 0o044


def test_latest_points_at_the_newest_run(tmp_path: Path) -> None:
    first = RunFolder.create(tmp_path, "demo")
    point_latest(tmp_path, first.path)
    second = RunFolder.create(tmp_path, "other")
    point_latest(tmp_path, second.path)
    assert (tmp_path / "latest").resolve() == second.path.resolve()


def document(run_id: str = "r1") -> RunDocument:
    scenario = ScenarioRef(name="demo", path="demo.yaml", sha256="0" * 64, seed=1)
    return RunDocument(run_id=run_id, started_at="2026-12-01T00:00:00+00:00", scenario=scenario)


def test_the_run_document_reads_back_what_it_wrote(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "demo")
    written = document()
    written.repetitions.append(
        RepetitionEntry(
            strategy="fifo",
            workers=2,
            repetition=1,
            jobs=3,
            empty_polls=0,
            lost_races=0,
            books="balanced",
            started_at="a",
            finished_at="b",
        )
    )
    folder.write("run.json", written.dumps())
    assert load_document(folder.path) == written
    raw = json.loads((folder.path / "run.json").read_text())
    assert raw["format_version"] == RUN_FORMAT_VERSION
    assert raw["scenario"]["copy"] == "scenario.yaml"
    assert "faults" not in raw["repetitions"][0]  # absent features stay absent


def test_a_format_1_document_is_migrated_on_reading(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "demo")
    old = json.loads(document().dumps())
    del old["queues"]
    old["format_version"] = 1
    folder.write("run.json", json.dumps(old))
    migrated = load_document(folder.path)
    assert (migrated.format_version, migrated.queues) == (RUN_FORMAT_VERSION, {})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            {"format_version": RUN_FORMAT_VERSION + 1},
            "format_version 7; this harness reads 1, 2, 3, 4, 5, 6",
        ),
        ({"format_version": 2, "run_id": "x"}, "started_at: Field required"),
        ("not json", "not JSON"),
    ],
)
def test_a_document_that_cannot_be_read_is_refused_naming_the_file(
    tmp_path: Path, content: object, message: str
) -> None:
    folder = RunFolder.create(tmp_path, "demo")
    text = content if isinstance(content, str) else json.dumps(content)
    folder.write("run.json", text)
    with pytest.raises(UnreadableDocument, match=message) as caught:
        load_document(folder.path)
    assert "run.json" in str(caught.value)


def test_a_writer_may_write_only_what_the_contract_lists() -> None:
    assert listed("explain/skewed/round_robin.json", "raw") == "explain/skewed/round_robin.json"
    assert listed("waits.svg", "derived") == "waits.svg"
    with pytest.raises(ValueError, match=r"notes\.txt is not a raw file"):
        listed("notes.txt", "raw")
    with pytest.raises(ValueError, match=r"jobs\.csv is not a derived file"):
        listed("jobs.csv", "derived")  # raw: a render never rewrites it
