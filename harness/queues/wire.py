"""Programs and reports as JSON, for a fleet: what the coordinator assigns a member and
what the member sends back travel through the database as plain data.

A program travels as the name it is registered by (harness/queues/programs.py), its
spec as data without DSN, SQL or file path, and the process's name. A member takes
nothing in a row on faith: the name must be registered, the spec's fields are validated
as its type says, and the keys that would carry what a member has of its own are
refused with why. Before any of that, the assignment's size: at most MAX_PROGRAMS
programs, whose concurrency (a library worker's, 1 for any other process) adds up to at
most MAX_WORKERS, a repetition's most workers; a list in a spec at most as long as the
scenario's limits allow (LIST_BOUNDS: its tenants, its batches and their jobs). Each
refusal is one line.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from harness.queues.base import Program, WorkerReport
from harness.queues.programs import (
    Local,
    ProcessName,
    Refused,
    Wire,
    registered,
    registration_of,
)
from harness.scenario.model import MAX_BACKLOG_JOBS, MAX_TENANTS, MAX_TOTAL_JOBS, MAX_WORKERS

_REPORTS = TypeAdapter(list[WorkerReport])
MAX_PROGRAMS = MAX_WORKERS  # a member's share: one process per worker at most
MAX_JOBS = max(MAX_TOTAL_JOBS, MAX_BACKLOG_JOBS)  # in any list of jobs or batches
# The longest each list of a spec may be: a worker's tenants, a schedule's batches (each
# a list of jobs) and an enqueuer's arrivals (a list per batch field); another list, as
# long as a scenario's jobs.
LIST_BOUNDS = {"tenants": MAX_TENANTS, "schedule": MAX_JOBS}
NEVER_TRAVELS = {
    "dsn": "no DSN travels: a member connects with its own --dsn",
    "site": "no DSN travels: a member connects with its own --dsn",
    "plans_file": "no file path travels: a plan capture runs on the coordinator's host only",
    "claim": "no SQL travels: a member runs its own install's strategy, checked by its sha256",
    "enqueue": "no SQL travels: a member runs its own install's strategy, checked by its sha256",
    "sql": "no SQL travels: a member runs its own install's strategy, checked by its sha256",
}


class _Row(BaseModel):
    """One program of an assignment, as it travels."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    program: str
    spec: dict[str, Any]
    name: ProcessName = ""


def program_to_wire(program: Program) -> dict[str, Any]:
    registration = registration_of(program.main)
    assert isinstance(program.spec, registration.spec), f"{registration.name}: its spec's type"
    row = _Row(program=registration.name, spec=registration.send(program.spec), name=program.name)
    return row.model_dump(mode="json")


def assignment_from_wire(first_slot: Any, rows: Any, local: Local) -> tuple[int, list[Program]]:
    """A member's assignment: the first process slot its programs take (its reports are
    numbered from there), and the programs."""
    if isinstance(first_slot, bool) or not isinstance(first_slot, int) or first_slot < 0:
        raise _refused(f"first_slot: {str(first_slot)[:40]} is not a process slot (0 or more)")
    return first_slot, programs_from_wire(rows, local)


def programs_from_wire(rows: Any, local: Local) -> list[Program]:
    """A member's assignment: every program accepted, or the first refusal."""
    if not isinstance(rows, list):
        raise _refused("its programs are not a list")
    if len(rows) > MAX_PROGRAMS:
        raise _refused(
            f"{len(rows)} programs; a member runs at most {MAX_PROGRAMS} (a repetition's "
            "most workers)"
        )
    _refuse_oversized(rows)
    return [program_from_wire(row, local) for row in rows]


def _refuse_oversized(rows: list[Any]) -> None:
    """The assignment's size, before a field of it is validated: its workers in all, and
    every list of every spec, each as long as the scenario's limits allow at most."""
    specs: list[dict[str, Any]] = [
        row["spec"] for row in rows if isinstance(row, dict) and isinstance(row.get("spec"), dict)
    ]
    workers = sum(_concurrency(spec) for spec in specs) + len(rows) - len(specs)
    if workers > MAX_WORKERS:
        raise _refused(
            f"{len(rows)} programs of {workers:,} workers in all; a member runs at most "
            f"{MAX_WORKERS} (a repetition's most workers)"
        )
    for spec in specs:
        for key, value in spec.items():
            _refuse_long(str(key)[:40], value)


def _concurrency(spec: dict[str, Any]) -> int:
    """A program's workers: its concurrency (a library worker's), else 1; a count that is
    no number, or more than one program may have, is the spec's validation's to refuse."""
    value = spec.get("concurrency", 1)
    if isinstance(value, bool) or not isinstance(value, int):
        return 1
    return min(max(value, 1), MAX_WORKERS)


def _refuse_long(key: str, value: Any) -> None:
    if not isinstance(value, list):
        return
    bound = LIST_BOUNDS.get(key, MAX_JOBS)
    size = len(value) if key != "schedule" else _scheduled_jobs(value)
    if size > bound:
        what = "jobs" if key == "schedule" else "items"
        raise _refused(f"spec.{key}: {size:,} {what}; at most {bound:,}")


def _scheduled_jobs(schedule: list[Any]) -> int:
    """A schedule's batches and their jobs, counted together."""
    batches = [batch for batch in schedule if isinstance(batch, list) and len(batch) == 2]
    return len(schedule) + sum(len(jobs) for _, jobs in batches if isinstance(jobs, list))


def program_from_wire(data: Any, local: Local) -> Program:
    """One program, accepted only as one of the harness's own with a valid spec."""
    try:
        row = _Row.model_validate(data)
        registration = registered(row.program)
    except ValidationError as error:
        raise _refused(_first_error(error, "a program of an assignment")) from error
    except Refused as error:
        raise _refused(str(error)) from error
    try:
        _refuse_what_never_travels(row.spec)
        spec = registration.receive(row.spec, local)
    except ValidationError as error:
        problem = _first_error(error, f"the spec of {row.program}", "spec")
        raise _refused(f"{row.program}: {problem}") from error
    except Refused as error:
        raise _refused(f"{row.program}: {error}") from error
    return Program(registration.role, registration.main, spec, row.name)


def _refused(problem: str) -> Refused:
    return Refused(f"fleet assignment refused: {problem}")


def _refuse_what_never_travels(spec: Wire) -> None:
    for key, why in NEVER_TRAVELS.items():
        if key in spec:
            raise Refused(f"spec.{key}: {why}")


def _first_error(error: ValidationError, what: str, *within: str) -> str:
    """pydantic's first complaint as one line: where, and what is allowed."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in (*within, *first["loc"]))
    message = first["msg"]
    if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        message = f"not a field of {what}"
    return f"{where}: {message}"


def reports_to_wire(reports: list[WorkerReport]) -> list[dict[str, Any]]:
    """As JSON data that jsonb takes: a library's claims have no latency (NaN), which
    JSON cannot write as a number, so it travels as the string "NaN"."""
    return json.loads(pydantic_core.to_json(reports, inf_nan_mode="strings"))  # type: ignore[no-any-return]


def reports_from_wire(data: list[dict[str, Any]]) -> list[WorkerReport]:
    return _REPORTS.validate_python(data)
