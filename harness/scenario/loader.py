"""Scenario files read: YAML parsed and validated into the model, every problem as one line
naming the file, the line and the field."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError
from harness.scenario.model import Model, Scenario


class LoadedScenario(Model):
    """A validated scenario with where it came from: its path, text and hash."""

    scenario: Scenario
    path: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def load_scenario(path: Path, strategies: set[str]) -> LoadedScenario:
    """Read, parse and validate a scenario file; HarnessError with file:line otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise HarnessError(f"{path}: cannot read scenario ({error})") from error
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise HarnessError(
            f"{path}:{_yaml_error_line(error, text)}: not valid YAML: {_yaml_problem(error)}"
        ) from error
    if not isinstance(data, dict):
        raise HarnessError(
            f"{path}:1: a scenario is a mapping of fields (name, workers, "
            "strategies, tenant_groups, ...)"
        )
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as error:
        raise HarnessError(_first_error(path, node, error)) from error
    for field, names in (
        ("strategies", scenario.strategies),
        ("explain.strategies", scenario.explain_strategies),
    ):
        unknown = [name for name in names if name not in strategies]
        if unknown:
            line = _line_of(node, tuple(field.split(".")))
            raise HarnessError(
                f"{path}:{line}: {field}: unknown {unknown}; available: {sorted(strategies)}"
            )
    return LoadedScenario(scenario=scenario, path=str(path), text=text)


def _yaml_problem(error: yaml.YAMLError) -> str:
    """What PyYAML says is wrong, on one line (its own text spans several)."""
    problem = getattr(error, "problem", None) or (str(error).splitlines() or [""])[0]
    return " ".join(str(problem).split())


def _yaml_error_line(error: yaml.YAMLError, text: str) -> int:
    mark = getattr(error, "problem_mark", None)
    if mark is not None:
        return int(mark.line) + 1
    position = getattr(error, "position", None)  # a character the reader refused
    return text[:position].count("\n") + 1 if isinstance(position, int) else 1


def _first_error(path: Path, node: yaml.Node | None, error: ValidationError) -> str:
    first = error.errors()[0]
    location = _location(first["loc"])
    line = _line_of(node, first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown field; allowed: " + ", ".join(_allowed_fields(first["loc"]))
    elif first["type"] == "missing":
        message = "required field is missing"
    got = "" if first["type"] in ("missing", "extra_forbidden") else _got(first.get("input"))
    where = f"{location}: " if location else ""
    if not first["loc"]:
        line = _line_of(node, _named_path(message)) if _named_path(message) else line
    return f"{path}:{line}: {where}{message}{got}"


_NAMED = re.compile(r"^(faults(?:\.[a-z_]+|\[\d+\])*):")


def _named_path(message: str) -> tuple[int | str, ...]:
    """A whole-scenario fault check names its field first ('faults.crashes[0]: ...'): the
    path to that field, so the error's line is the field's, not the file's first."""
    found = _NAMED.match(message)
    if found is None:
        return ()
    return tuple(
        int(part) if part.isdigit() else part for part in re.findall(r"[a-z_]+|\d+", found.group(1))
    )


def _got(value: Any) -> str:
    if isinstance(value, dict | list) or value is None:
        return ""
    return f" (got {value!r})"


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        # pydantic names the branch of a union it tried (e.g. 'int', 'list[...]'); a user
        # never wrote those, so they are left out of the path shown.
        if isinstance(part, int):
            text += f"[{part}]"
        elif "[" not in part and "-" not in part and part not in ("int", "float"):
            name = part if part.isprintable() else repr(part)  # the message stays one line
            text += f".{name}" if text else name
    return text


def _allowed_fields(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] = Scenario
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        if field is None:
            continue
        inner = _model_in(field.annotation)
        if inner is not None:
            model = inner
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int:
    """The 1-based line of the deepest YAML key or item that the error location reaches."""
    line = node.start_mark.line + 1 if node is not None else 1
    for part in loc:
        found = _child(node, part)
        if found is None:
            break
        line, node = found
    return line


def _child(node: yaml.Node | None, part: int | str) -> tuple[int, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == part:
                return key.start_mark.line + 1, value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        item: yaml.Node = node.value[part]
        return item.start_mark.line + 1, item
    return None
