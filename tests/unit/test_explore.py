"""open_run() finds the newest run from wherever a notebook's kernel starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.explore import latest_run, open_run


def test_the_latest_run_is_found_in_the_nearest_folder_above(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "results" / "noisy-neighbour" / "20260101T000000Z-abcdef"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (tmp_path / "results" / "latest").symlink_to(run.relative_to(tmp_path / "results"))
    notebooks = tmp_path / "notebooks" / "deeper"
    notebooks.mkdir(parents=True)
    assert latest_run(notebooks) == run
    assert latest_run(tmp_path) == run
    monkeypatch.chdir(notebooks)
    assert open_run().path == run
    assert open_run(run).path == run


def test_no_run_anywhere_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no results/latest in .* run harness run first"):
        latest_run(tmp_path)
