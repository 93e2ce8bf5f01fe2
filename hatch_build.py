"""Wheel build hook: the shipped scenarios and baselines go into the wheel as
harness/shipped/, so an installed harness can run them by name.

They stay in git once, at the top of the repository (scenarios/, baselines/), where
people read and copy them. An editable install reads them there (harness/shipped.py),
so they are copied only into a real wheel, never left as a stale copy beside the source.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SHIPPED = {"scenarios": "harness/shipped/scenarios", "baselines": "harness/shipped/baselines"}


class ShippedFiles(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "editable":
            build_data["force_include"].update(SHIPPED)
