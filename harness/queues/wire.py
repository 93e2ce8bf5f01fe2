"""Programs and reports as JSON, for a fleet: what the coordinator assigns a member and
what the member sends back travel through the database as plain data.

A program's entry point and its spec's type are named, not pickled, and only names in
the harness package are resolved: a row in the fleet's tables can choose which of the
harness's own programs a member runs, never make it run anything else. Specs are
dataclasses; pydantic validates them back from their JSON, nested ones included.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pydantic_core
from pydantic import TypeAdapter

from harness.queues.base import Program, WorkerReport

_REPORTS = TypeAdapter(list[WorkerReport])


def program_to_wire(program: Program) -> dict[str, Any]:
    spec_type = type(program.spec)
    return {
        "role": program.role,
        "main": _name(program.main),
        "spec_type": _name(spec_type),
        "spec": TypeAdapter(spec_type).dump_python(program.spec, mode="json"),
        "name": program.name,
    }


def program_from_wire(data: dict[str, Any]) -> Program:
    spec_type = _resolve(data["spec_type"])
    spec = TypeAdapter(spec_type).validate_python(data["spec"])
    return Program(data["role"], _resolve(data["main"]), spec, data.get("name", ""))


def reports_to_wire(reports: list[WorkerReport]) -> list[dict[str, Any]]:
    """As JSON data that jsonb takes: a library's claims have no latency (NaN), which
    JSON cannot write as a number, so it travels as the string "NaN"."""
    return json.loads(pydantic_core.to_json(reports, inf_nan_mode="strings"))  # type: ignore[no-any-return]


def reports_from_wire(data: list[dict[str, Any]]) -> list[WorkerReport]:
    return _REPORTS.validate_python(data)


def _name(thing: Any) -> str:
    return f"{thing.__module__}:{thing.__qualname__}"


def _resolve(name: str) -> Any:
    module, _, qualname = name.partition(":")
    if module != "harness" and not module.startswith("harness."):
        raise ValueError(f"{name}: only the harness's own programs travel to a fleet member")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found
