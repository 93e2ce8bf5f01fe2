"""Scenario files read: YAML parsed and validated into the model, every problem as one line
naming the file, the line and the field."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError, unknown_name
from harness.scenario.model import Horizon, Model, Scenario, Suite
from harness.scenario.parse import Parsed, ParseRefused, parse, read_limited
from harness.scenario.traits import QueueTraits
from harness.shipped import scenario_file

HORIZON_MAX_S = Horizon.model_fields["max_duration_s"].default


class _Read(Model):
    """A file the loader read: its path, its text as read, and the text's hash."""

    path: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class LoadedScenario(_Read):
    """A validated scenario with where it came from: its path, text and hash; and what
    the run's options changed in it that a reader would not guess (`notes`)."""

    scenario: Scenario
    notes: tuple[str, ...] = ()

    def refusal(self, field: str, message: str) -> HarnessError:
        """A problem known only once the run's options are (the provider, say), as one
        line on the field's line like the loader's own."""
        line = _line_of(parse(self.text).node, _parts(field))
        return HarnessError(f"{self.path}:{line}: {field}: {message}")


def load_scenario(path: Path, queues: Mapping[str, QueueTraits]) -> LoadedScenario:
    """Read, parse and validate a scenario file (or the shipped scenario of that name)
    against the queues it may name (what each cannot take, and why); HarnessError with
    file:line otherwise. A suite is refused here, before its scenarios are read: only
    `run` and `validate` take one."""
    path = scenario_file(path)
    parsed = _mapping(path)
    if "suite" in parsed.data:
        line = _line_of(parsed.node, ("suite",))
        cases = parsed.data["suite"]
        count = f" of {len(cases)} scenarios" if isinstance(cases, list) else ""
        raise HarnessError(
            f"{path}:{line}: suite: a suite{count} runs with `harness run` or `harness "
            "validate`; here, name one of its scenarios"
        )
    return _scenario(path, parsed, queues)


class LoadedSuite(_Read):
    """A validated suite with where it came from, and each of its scenarios loaded."""

    suite: Suite
    cases: list[LoadedScenario]  # the suite's, in its order


def load_any(
    path: Path,
    queues: Mapping[str, QueueTraits],
    duration_s: float | None = None,
    only: Sequence[str] = (),
) -> LoadedScenario | LoadedSuite:
    """A scenario, or a suite of them (a file with `suite:`), each scenario validated;
    `duration_s` (harness run --duration) stretches a horizon's (docs/long-horizon.md),
    `only` (harness run --strategy) keeps those of its strategies."""
    path = scenario_file(path)
    parsed = _mapping(path)
    if "suite" in parsed.data:
        return _load_suite(path, parsed, queues, duration_s, only)
    return _scenario(path, parsed, queues, duration_s, only)


def _mapping(path: Path) -> Parsed:
    """The file parsed, refused unless it is a mapping of fields."""
    parsed = _parsed(path)
    if not isinstance(parsed.data, dict):
        raise HarnessError(
            f"{path}:1: a scenario is a mapping of fields (name, workers, "
            "strategies, tenant_groups, ...)"
        )
    return parsed


def _scenario(
    path: Path,
    parsed: Parsed,
    queues: Mapping[str, QueueTraits],
    duration_s: float | None = None,
    only: Sequence[str] = (),
) -> LoadedScenario:
    data, notes = parsed.data, []
    left_out: list[str] = []
    if duration_s is not None:
        data = _stretched(path, parsed, duration_s)
        notes.append(f"--duration {duration_s:g}")
    try:
        # Strict: `tenants: true` or `tenants: "3"` is a mistake, not a 1 or a 3.
        scenario = Scenario.model_validate(data, strict=True)
        if scenario.libraries is not None:
            chosen = _libraries_chosen(path, parsed.node, scenario, queues)
            scenario = Scenario.model_validate({**data, "strategies": chosen}, strict=True)
        if only:
            data, left_out = _narrowed(path, data, scenario, only)
            notes.append(" ".join(f"--strategy {name}" for name in only))
            scenario = Scenario.model_validate(data, strict=True)
    except ValidationError as error:
        raise HarnessError(_first_error(path, parsed.node, error)) from error
    _refuse_unknown_queues(path, parsed.node, scenario, queues)
    _refuse_what_queues_cannot_take(path, parsed.node, scenario, queues)
    said = [f"left out, their strategies not run: reference {label!r}" for label in left_out]
    text = _as_ran(notes, said, data) if notes else parsed.text
    return LoadedScenario(scenario=scenario, path=str(path), text=text, notes=tuple(said))


def _narrowed(
    path: Path, data: dict[str, Any], scenario: Scenario, only: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """The scenario's fields with only the strategies `only` names (harness run
    --strategy), in the scenario's order, and what to say of it: its explain list kept to
    them too (the section left out where none of them is in it), and its reference
    figures on strategies left out dropped (their labels returned). A name it does not have, or none
    of its timed strategies kept, is refused; a threshold on a strategy left out is
    refused by the validation that follows."""
    known = list(dict.fromkeys([*scenario.strategies, *scenario.explain_strategies]))
    for name in only:
        if name not in known:
            said = unknown_name(name, known, "it has")
            raise HarnessError(f"--strategy {name}: {path} has no such strategy; {said}")
    kept = {key: value for key, value in data.items() if key != "libraries"}
    kept["strategies"] = [name for name in scenario.strategies if name in only]
    if not kept["strategies"]:
        raise HarnessError(
            f"--strategy: {path}: none of {list(only)} is among its strategies "
            f"{scenario.strategies} (the explain section's alone cannot run)"
        )
    explain = data.get("explain")
    if isinstance(explain, dict) and explain.get("strategies"):
        listed = [name for name in scenario.explain_strategies if name in only]
        if listed:
            kept["explain"] = {**explain, "strategies": listed}
        else:
            del kept["explain"]
    reference = data.get("reference")
    if scenario.reference is None or not isinstance(reference, dict):
        return kept, []
    base = Scenario.model_validate({**kept, "reference": None}, strict=True)
    figures, dropped = [], []
    for raw, figure in zip(reference["figures"], scenario.reference.figures, strict=True):
        try:
            base.check_figure(figure)
            figures.append(raw)
        except ValueError:
            dropped.append(figure.label)
    if figures:
        kept["reference"] = {**reference, "figures": figures}
    else:
        del kept["reference"]
    return kept, dropped


def _stretched(path: Path, parsed: Parsed, duration_s: float) -> dict[str, Any]:
    """The scenario's fields with its horizon run for `duration_s` (--duration): the
    phases scaled in proportion, each stream and the timeout lengthened (or shortened)
    by the difference. Refused, one line, where the file has no horizon or the duration
    is past its max_duration_s."""
    horizon = parsed.data.get("horizon")
    if not isinstance(horizon, dict) or not isinstance(horizon.get("duration_s"), int | float):
        raise HarnessError(f"{path}:1: horizon: --duration needs a scenario with a horizon")
    line = _line_of(parsed.node, ("horizon", "duration_s"))
    most = horizon.get("max_duration_s", HORIZON_MAX_S)
    if not 0 < duration_s <= most:
        raise HarnessError(
            f"{path}:{line}: horizon.duration_s: --duration {duration_s:g} s is outside "
            f"the scenario's limits; allowed: over 0 up to max_duration_s ({most:g} s)"
        )
    old = float(horizon["duration_s"])
    scale, longer = duration_s / old, duration_s - old
    held = dict(horizon.get("held") or {})
    for key in ("from_s", "for_s"):
        if isinstance(held.get(key), int | float):
            held[key] = round(held[key] * scale, 3)
    stretched = dict(horizon, duration_s=duration_s, held=held)
    if isinstance(horizon.get("warmup_s"), int | float):
        stretched["warmup_s"] = round(horizon["warmup_s"] * scale, 3)
    groups = [
        dict(group, window_s=round(group["window_s"] + longer, 3))
        if isinstance(group, dict) and isinstance(group.get("window_s"), int | float)
        else group
        for group in parsed.data.get("tenant_groups") or []
    ]
    timeout = parsed.data.get("timeout_s", Scenario.model_fields["timeout_s"].default)
    return dict(
        parsed.data,
        horizon=stretched,
        tenant_groups=groups,
        timeout_s=round(float(timeout) + longer, 3),
    )


def _as_ran(options: list[str], said: list[str], data: dict[str, Any]) -> str:
    """What the run folder keeps of a scenario changed by options (--duration,
    --strategy): the fields that ran, after comments saying which and what they left
    out (the file's own text is in its repository)."""
    lines = [f"harness run {' '.join(options)}: the scenario as it ran", *said]
    return "".join(f"# {line}\n" for line in lines) + yaml.safe_dump(data, sort_keys=False)


def _load_suite(
    path: Path,
    parsed: Parsed,
    queues: Mapping[str, QueueTraits],
    duration_s: float | None = None,
    only: Sequence[str] = (),
) -> LoadedSuite:
    """Each case's scenario file, named from the suite's folder, loaded as a scenario of
    its own: its problems are said on its own file's lines."""
    try:
        suite = Suite.model_validate(parsed.data, strict=True)
    except ValidationError as error:
        raise HarnessError(_first_error(path, parsed.node, error, Suite)) from error
    cases: list[LoadedScenario] = []
    for index, case in enumerate(suite.suite):
        field = f"suite[{index}].scenario"
        where = f"{path}:{_line_of(parsed.node, _parts(field))}: {field}"
        member = path.parent / case.scenario
        if not member.is_file():
            raise HarnessError(
                f"{where}: no such file {str(member)!r} (named from the suite's folder)"
            )
        inner = _mapping(member)
        if "suite" in inner.data:  # a suite of suites (or of itself) stops here
            raise HarnessError(
                f"{where}: {str(member)!r} is a suite; a suite's cases are scenarios"
            )
        loaded = _scenario(member, inner, queues, duration_s, only)
        names = [done.scenario.name for done in cases]
        name = loaded.scenario.name
        if name in names:
            raise HarnessError(
                f"{where}: scenario {name!r} is suite[{names.index(name)}]'s too; each runs once"
            )
        cases.append(loaded)
    return LoadedSuite(suite=suite, path=str(path), text=parsed.text, cases=cases)


def _parsed(path: Path) -> Parsed:
    try:
        text = read_limited(path)
    except (OSError, UnicodeDecodeError) as error:
        raise HarnessError(f"{path}: cannot read scenario ({error})") from error
    except ParseRefused as refused:
        raise HarnessError(f"{path}:{refused.line}: {refused.message}") from refused
    try:
        return parse(text)
    except yaml.YAMLError as error:
        raise HarnessError(
            f"{path}:{_yaml_error_line(error, text)}: not valid YAML: {_yaml_problem(error)}"
        ) from error
    except ParseRefused as refused:
        raise HarnessError(f"{path}:{refused.line}: {refused.message}") from refused


def _libraries_chosen(
    path: Path, node: yaml.Node | None, scenario: Scenario, queues: Mapping[str, QueueTraits]
) -> list[str]:
    """`strategies`, then every library mapping `libraries` picks by what it declares, in
    the catalog's order (adapter by adapter, each in its manifest's order)."""
    assert scenario.libraries is not None
    picked = scenario.libraries
    adapters = {t.declared.adapter for t in queues.values() if t.declared is not None}
    for index, name in enumerate(picked.leave_out):
        if name not in adapters and name not in queues:
            line = _line_of(node, ("libraries", "leave_out", index))
            raise HarnessError(
                f"{path}:{line}: libraries.leave_out[{index}]: '{name}' is no adapter "
                f"{sorted(adapters)} nor strategy"
            )
    left_out = set(picked.leave_out)
    found = [
        name
        for name, traits in queues.items()
        if traits.declared is not None
        and traits.declared.setting in picked.settings
        and not {name, traits.declared.adapter} & left_out
    ]
    return [*scenario.strategies, *(name for name in found if name not in scenario.strategies)]


def _refuse_unknown_queues(
    path: Path, node: yaml.Node | None, scenario: Scenario, queues: Mapping[str, QueueTraits]
) -> None:
    for field, names in (
        ("strategies", scenario.strategies),
        ("explain.strategies", scenario.explain_strategies),
    ):
        unknown = [name for name in names if name not in queues]
        if unknown:
            line = _line_of(node, _parts(field))
            said = unknown_name(unknown[0], queues, "available")
            raise HarnessError(f"{path}:{line}: {field}: unknown '{unknown[0]}'; {said}")


def _refuse_what_queues_cannot_take(
    path: Path, node: yaml.Node | None, scenario: Scenario, queues: Mapping[str, QueueTraits]
) -> None:
    """A strategy asked for a feature it cannot take: refused on the strategy's line,
    before any server starts, rather than after the other strategies ran."""
    for trait, feature, field in _features_used(scenario):
        chosen = scenario.explain_strategies if field == "explain.strategies" else None
        for index, name in enumerate(chosen or scenario.strategies):
            why = getattr(queues[name], trait)
            if why is not None:
                line = _line_of(node, (*_parts(field), index))
                raise HarnessError(f"{path}:{line}: {field}[{index}]: cannot take {feature}: {why}")


def _features_used(scenario: Scenario) -> list[tuple[str, str, str]]:
    """(QueueTraits field, the feature as the scenario asks for it, the strategies field)."""
    used = []
    if scenario.faults is not None and scenario.faults.harness_faults:
        used.append(("faults", "faults", "strategies"))
    elif scenario.uses_faults:
        used.append(("faults", "failing jobs (failure_probability)", "strategies"))
    if scenario.worker_kills:
        used.append(("worker_kills", "faults.worker_kills", "strategies"))
    if scenario.backend_kills:
        used.append(("backend_kills", "faults.backend_kills", "strategies"))
    if scenario.server_crash is not None:
        used.append(("server_crash", "faults.server_crash", "strategies"))
    if scenario.connection_exhaustion is not None:
        used.append(("connection_exhaustion", "faults.connection_exhaustion", "strategies"))
    if scenario.long_transaction is not None:
        used.append(("long_transaction", "a long_transaction", "strategies"))
    if scenario.horizon is not None:
        used.append(("long_transaction", "a horizon's held phase", "strategies"))
    if scenario.backlog is not None and scenario.timed:
        used.append(("backlog", "a backlog", "strategies"))
    if scenario.explain is not None:
        field = "explain.strategies" if scenario.explain.strategies else "strategies"
        used += [("backlog", "a backlog", field), ("explain", "explain captures", field)]
    return used


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


def _first_error(
    path: Path, node: yaml.Node | None, error: ValidationError, model: type[BaseModel] = Scenario
) -> str:
    first = error.errors()[0]
    location = _location(first["loc"])
    line = _line_of(node, first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown field; allowed: " + ", ".join(_allowed_fields(first["loc"], model))
    elif first["type"] == "missing":
        message = "required field is missing"
    got = "" if first["type"] in ("missing", "extra_forbidden") else _got(first.get("input"))
    where = f"{location}: " if location else ""
    if not first["loc"]:
        line = _line_of(node, _named_path(message)) if _named_path(message) else line
    return f"{path}:{line}: {where}{message}{got}"


_NAMED = re.compile(r"^([a-z_]+(?:\.[a-z_]+|\[\d+\])*):")


def _named_path(message: str) -> tuple[int | str, ...]:
    """A whole-scenario check names its field first ('faults.crashes[0]: ...'): the path
    to that field, so the error's line is the field's, not the file's first."""
    found = _NAMED.match(message)
    return _parts(found.group(1)) if found is not None else ()


def _parts(field: str) -> tuple[int | str, ...]:
    """'tenant_groups[0].every_s' -> ('tenant_groups', 0, 'every_s')."""
    parts = re.findall(r"[a-z_]+|\d+", field)
    return tuple(int(part) if part.isdigit() else part for part in parts)


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


def _allowed_fields(loc: tuple[int | str, ...], model: type[BaseModel]) -> list[str]:
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
