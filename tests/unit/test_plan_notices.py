"""A capture's plans file as its reader finds it while the worker still appends to it."""

from __future__ import annotations

import json
from pathlib import Path

from harness.queues.contract.captures import append_notice, read_plans

MARKER = "FOR UPDATE SKIP LOCKED"


def _notice(job_id: int) -> str:
    """auto_explain's notice of a fetch that locked one row, as a session receives it."""
    plan = {
        "Node Type": "LockRows",
        "Actual Rows": 1,
        "Plans": [{"Node Type": "Index Scan", "Relation Name": "jobs", "Actual Rows": 1}],
    }
    query = f"SELECT id FROM jobs WHERE id = {job_id} FOR UPDATE SKIP LOCKED"
    return f"duration: 0.250 ms  plan:\n{json.dumps({'Query Text': query, 'Plan': plan})}"


def test_a_notice_being_written_is_not_read_until_it_is_whole(tmp_path: Path) -> None:
    """The reader polls the file while a worker appends a plan of many kilobytes: a notice
    without its separator yet is left for the next read, not parsed half written."""
    path = tmp_path / "plans.notices"
    append_notice(str(path), _notice(1))
    half = _notice(2)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(half[: len(half) // 2])
    assert [plan.query for plan in read_plans(path, MARKER)] == [
        "SELECT id FROM jobs WHERE id = 1 FOR UPDATE SKIP LOCKED"
    ]
    with path.open("a", encoding="utf-8") as handle:
        handle.write(half[len(half) // 2 :] + "\x1e")
    assert len(read_plans(path, MARKER)) == 2


def test_other_statements_and_an_empty_file_are_no_fetches(tmp_path: Path) -> None:
    path = tmp_path / "plans.notices"
    assert read_plans(path, MARKER) == []
    append_notice(str(path), "connection received: not a plan")
    append_notice(str(path), _notice(1).replace("LockRows", "Result"))
    assert read_plans(path, MARKER) == []
