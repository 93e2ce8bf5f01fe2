"""Programs and reports as a fleet's tables carry them (harness/queues/wire.py)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

from harness.queues.base import TaskRun, WorkerReport
from harness.queues.wire import reports_from_wire, reports_to_wire


def test_a_librarys_reports_travel_as_json_that_jsonb_takes() -> None:
    """A library's claims carry no latency (NaN): written as a JSON number, jsonb refused
    the upload ('invalid input syntax for type json') and a library fleet run failed."""
    moment = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    reports = [
        WorkerReport(
            worker=3,
            claims=[(7, 1, float("nan")), (8, 2, 1.25)],
            task_runs=[TaskRun(7, 1, "a", moment, moment, moment)],
        )
    ]
    text = json.dumps(reports_to_wire(reports), allow_nan=False)
    back = reports_from_wire(json.loads(text))
    assert back[0].claims[1] == (8, 2, 1.25) and math.isnan(back[0].claims[0][2])
    assert back[0].task_runs == reports[0].task_runs
