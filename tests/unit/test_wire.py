"""Programs as a fleet's tables carry them (harness/queues/wire.py): each of the harness's
own programs travels by its registered name, its spec without DSN, SQL or file path,
and comes back on a member as the same spec with the member's own DSN and SQL."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.queues.base import Program, Site, TaskRun, WorkerReport
from harness.queues.contract import queue as contract
from harness.queues.contract.manifest import load_adapters
from harness.queues.programs import Local, Refused
from harness.queues.sql.queue import SqlQueue
from harness.queues.sql.strategies import load_strategies
from harness.queues.wire import (
    program_from_wire,
    program_to_wire,
    reports_from_wire,
    reports_to_wire,
)
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from tests.conftest import SHORT_NOISY

PASSWORD = "Sekr3t-of-the-coordinator"
COORDINATOR = Site(f"postgresql://bench:{PASSWORD}@db.example/bench", "harness_run_1")
MEMBER_DSN = "postgresql://member@10.0.0.7/bench"
CUSTOM = """\
-- extends: fifo
-- name: dequeue
select id, tenant_id from jobs where status = 'queued'
order by id limit 1 for update skip locked;
"""


@pytest.fixture(scope="module")
def inputs() -> RunInputs:
    return RunInputs.of(Scenario.model_validate(yaml.safe_load(SHORT_NOISY)))


def every_kind(inputs: RunInputs) -> list[Program]:
    """A worker and an enqueuer of the SQL strategies and of adapters (a Python
    library's, its tenants and their weights named, and pg-boss's)."""
    sql = SqlQueue(load_strategies()["round_robin"], COORDINATOR, inputs)
    adapter = contract.ContractSpec(load_adapters()["pgboss"], "one_queue", COORDINATOR, 10)
    pgmq = load_adapters()["pgmq"]
    libraries = [
        contract.ContractQueue("pgmq_round_robin", pgmq, "round_robin", COORDINATOR, inputs),
    ]
    return [
        *sql.workers(2),
        *sql.enqueuers(inputs.schedules),
        *[program for queue in libraries for program in queue.workers(3)],
        *[program for queue in libraries for program in queue.enqueuers(inputs.schedules)],
        Program("worker", contract.worker_main, replace(adapter, concurrency=4), "pgboss-worker"),
        Program("enqueuer", contract.enqueuer_main, adapter),
    ]


def test_every_program_travels_without_dsn_or_sql_and_comes_back_the_same(
    inputs: RunInputs,
) -> None:
    programs = every_kind(inputs)
    rows = json.loads(json.dumps([program_to_wire(program) for program in programs]))
    text = json.dumps(rows)
    assert PASSWORD not in text and "db.example" not in text
    assert '"dsn"' not in text and "select" not in text.lower()
    assert {row["program"] for row in rows} == {
        "sql.worker",
        "sql.enqueuer",
        "adapter.worker",
        "adapter.enqueuer",
    }
    local = Local(MEMBER_DSN, load_strategies(), load_adapters())
    for program, row in zip(programs, rows, strict=True):
        received = program_from_wire(row, local)
        assert (received.role, received.main, received.name) == (
            program.role,
            program.main,
            program.name,
        )
        assert received.spec == _at(program.spec, MEMBER_DSN)


def _at(spec: Any, dsn: str) -> Any:
    """The spec as the member runs it: the same, connecting with its own DSN."""
    if isinstance(getattr(spec, "site", None), Site):
        return replace(spec, site=replace(spec.site, dsn=dsn))
    return replace(spec, dsn=dsn)


def test_a_strategy_of_the_coordinators_strategies_dir_needs_the_same_file_on_the_member(
    tmp_path: Path, inputs: RunInputs
) -> None:
    """The member runs its own install's SQL, checked by its SHA-256: the coordinator's
    custom strategy is refused without --strategies-dir, and with a file that differs."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for folder, text in ((ours, CUSTOM), (theirs, CUSTOM.replace("limit 1", "limit 1 "))):
        folder.mkdir()
        (folder / "mine.sql").write_text(text)
    strategy = load_strategies(ours)["mine"]
    row = program_to_wire(SqlQueue(strategy, COORDINATOR, inputs).workers(1)[0])
    accepted = program_from_wire(row, Local(MEMBER_DSN, load_strategies(ours)))
    assert accepted.spec.claim.dequeue == strategy.sql("dequeue")
    with pytest.raises(Refused, match=r"strategy 'mine' is not in this member's install"):
        program_from_wire(row, Local(MEMBER_DSN, load_strategies()))
    with pytest.raises(Refused, match=r"strategy 'mine': this member's install differs"):
        program_from_wire(row, Local(MEMBER_DSN, load_strategies(theirs)))


def test_a_capture_and_a_worker_with_faults_never_leave_the_coordinator(
    inputs: RunInputs,
) -> None:
    """A capture's worker appends to a file of the coordinator's host; a worker with the
    fault features is killed and replaced there: neither has a wire form."""
    queue = contract.ContractQueue("pgmq", load_adapters()["pgmq"], "read", COORDINATOR, inputs)
    with pytest.raises(ValueError, match="plan capture runs on the coordinator's host only"):
        program_to_wire(queue.capture_workers(2, "/tmp/plans.txt")[0])
    faults = yaml.safe_load(SHORT_NOISY) | {"faults": {"lease": {"seconds": 1}}}
    with_faults = RunInputs.of(Scenario.model_validate(faults))
    sql = SqlQueue(load_strategies()["fifo"], COORDINATOR, with_faults)
    with pytest.raises(ValueError, match="fault features runs on the coordinator's host only"):
        program_to_wire(sql.workers(1)[0])


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
