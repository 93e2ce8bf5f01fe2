from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results.folder import RUN_FORMAT_VERSION, RunFolder, load_run, point_latest


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


def test_load_run_refuses_another_format_version(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "demo")
    folder.write_json("run.json", {"format_version": RUN_FORMAT_VERSION + 1})
    with pytest.raises(ValueError, match="format_version"):
        load_run(folder.path)
    folder.write_json("run.json", {"format_version": RUN_FORMAT_VERSION}, replace=True)
    assert json.loads((folder.path / "run.json").read_text()) == load_run(folder.path)
