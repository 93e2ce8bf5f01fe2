"""Two runs' provenance compared (pure): what of the machine, the server and the harness
differs between them, as run.json's `metadata` records it (harness/server/provenance.py).

Waits measured on another host, CPU, PostgreSQL version or settings, or by another
harness commit, differ for those reasons too; a comparison says so before its numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.results.redaction import redacted_settings

# (what a reader is told, the path in `metadata`)
_RECORDED = (
    ("host", ("host", "hostname")),
    ("CPU model", ("host", "cpu_model")),
    ("CPU count", ("host", "cpu_count")),
    ("PostgreSQL", ("postgres", "version")),
    ("provider", ("provider", "kind")),
)
# Where the server listens, not how it runs: they change from one embedded run to the next.
_LOCATION_SETTINGS = frozenset(
    {
        "unix_socket_directories",
        "port",
        "listen_addresses",
        "data_directory",
        "config_file",
        "hba_file",
        "ident_file",
        "external_pid_file",
    }
)
NOT_RECORDED = "(not recorded)"


@dataclass(frozen=True)
class Difference:
    what: str
    a: str
    b: str


def provenance_differences(
    a: Mapping[str, Any] | None, b: Mapping[str, Any] | None
) -> list[Difference]:
    """Every recorded part that differs, in the order of the table; a run without
    metadata (an old or broken run.json) is one difference of its own."""
    if a is None or b is None:
        if a is None and b is None:
            return [Difference("provenance", NOT_RECORDED, NOT_RECORDED)]
        return [Difference("provenance", _recorded(a), _recorded(b))]
    found = [
        Difference(what, _text(_at(a, path)), _text(_at(b, path)))
        for what, path in _RECORDED
        if _at(a, path) != _at(b, path)
    ]
    return found + _setting_differences(a, b) + _harness_difference(a, b)


def _recorded(metadata: Mapping[str, Any] | None) -> str:
    return "recorded" if metadata is not None else NOT_RECORDED


def _at(metadata: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = metadata
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _text(value: Any) -> str:
    return NOT_RECORDED if value is None else str(value)


def _setting_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Difference]:
    """Non-default settings (a setting missing on one side is at its default there), then
    the key settings that neither side set but that still differ (another build)."""
    changed_a, changed_b = _non_default(a), _non_default(b)
    names = sorted((set(changed_a) | set(changed_b)) - _LOCATION_SETTINGS)
    found = [
        Difference(
            f"setting {name}", changed_a.get(name, "default"), changed_b.get(name, "default")
        )
        for name in names
        if changed_a.get(name) != changed_b.get(name)
    ]
    key_a = _at(a, ("postgres", "key_settings")) or {}
    key_b = _at(b, ("postgres", "key_settings")) or {}
    for name in sorted((set(key_a) | set(key_b)) - set(names)):
        if key_a.get(name) != key_b.get(name):
            found.append(
                Difference(f"setting {name}", _text(key_a.get(name)), _text(key_b.get(name)))
            )
    return found


def _non_default(metadata: Mapping[str, Any]) -> dict[str, str]:
    settings = redacted_settings(_at(metadata, ("postgres", "non_default_settings")) or {})
    return {
        name: value["setting"] + (f" ({value['unit']})" if value.get("unit") else "")
        for name, value in settings.items()
        if isinstance(value, Mapping) and "setting" in value
    }


def _harness_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Difference]:
    """The commit, and whether the tree had uncommitted changes to harness/ then."""
    first, second = _harness(a), _harness(b)
    return [Difference("harness commit", first, second)] if first != second else []


def _harness(metadata: Mapping[str, Any]) -> str:
    commit = _at(metadata, ("harness", "git_commit"))
    if commit is None:
        return NOT_RECORDED
    dirty = _at(metadata, ("harness", "git_dirty"))
    return f"{commit[:12]}" + (" + uncommitted changes" if dirty else "")


def provenance_headline(differences: list[Difference]) -> str:
    """The sentence above the comparison."""
    if not differences:
        return (
            "Same provenance: host, CPU model and count, PostgreSQL version and settings, "
            "provider and harness commit."
        )
    kinds = ["settings" if d.what.startswith("setting ") else d.what for d in differences]
    parts = ", ".join(dict.fromkeys(kinds))
    return (
        f"Provenance differs between A and B ({parts}): the waits may differ for these "
        "reasons, not only the queue."
    )


def provenance_rows(differences: list[Difference]) -> tuple[list[str], list[list[str]]]:
    return ["", "A", "B"], [[d.what, d.a, d.b] for d in differences]


@dataclass(frozen=True)
class ScenarioRan:
    """The scenario a run ran: its name, and its file's sha256 where run.json records it."""

    name: str
    sha256: str | None = None


def scenario_warning(a: ScenarioRan, b: ScenarioRan) -> str | None:
    """The line above a comparison of runs of two scenarios, or of two versions of one."""
    if a.name != b.name:
        return (
            f"WARNING: A and B ran different scenarios (A {a.name}, B {b.name}): their waits "
            "come from different workloads."
        )
    if a.sha256 is not None and b.sha256 is not None and a.sha256 != b.sha256:
        return (
            f"WARNING: A and B ran different versions of scenario {a.name} (sha256 A "
            f"{a.sha256[:12]}, B {b.sha256[:12]}): their workloads may differ."
        )
    return None
