"""`harness schema`: the JSON Schema of scenario files, from the model that validates them.

The committed copy (docs/scenario.schema.json) is what editors point at to validate and
complete scenario files; a test keeps it equal to what this prints.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter

from harness.scenario.model import Scenario, Suite

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def scenario_schema() -> dict[str, Any]:
    """A scenario, or a suite of scenarios (a file with `suite:`)."""
    schema = TypeAdapter(Scenario | Suite).json_schema()
    return {"$schema": DIALECT, "title": "Scenario or suite", **schema}


def schema_command() -> None:
    print(json.dumps(scenario_schema(), indent=2, ensure_ascii=False))
