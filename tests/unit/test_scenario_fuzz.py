"""The scenario loader on random and mutated YAML: a scenario or one line, never a traceback.

Beside random documents, the shapes a user gets wrong: nesting past the limit, a key
written twice, a boolean or a string where a number goes, arrivals after the timeout."""

from __future__ import annotations

import os
import re
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError
from harness.scenario.loader import load_scenario
from harness.scenario.parse import MAX_DEPTH
from tests.conftest import SCENARIOS, builtin_traits

NAMES = builtin_traits()
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))  # more for a longer hunt
# the scenarios; a suite (`suite:`) names some of them, and its refusals have their tests
SHIPPED = [
    doc
    for doc in (yaml.safe_load(path.read_text()) for path in sorted(SCENARIOS.glob("*.yaml")))
    if "suite" not in doc
]


def _keys(node: object) -> set[str]:
    """Every mapping key of a document, at any depth (tenant groups, durations, faults)."""
    if isinstance(node, dict):
        return {str(key) for key in node} | {k for value in node.values() for k in _keys(value)}
    if isinstance(node, list):
        return {key for item in node for key in _keys(item)}
    return set()


KEYS = sorted({key for doc in SHIPPED for key in _keys(doc)})

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["fifo", "round_robin", "1e309", "-1", "0", "nan", "~", "yes"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=5),
    ),
    max_leaves=20,
)


def outcome_of(tmp: Path, text: str) -> str:
    path = tmp / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    try:
        load_scenario(path, NAMES)
    except HarnessError as error:
        message = str(error)
        assert "\n" not in message, message
        assert message.startswith(f"{path}:"), message
        assert error.exit_code == 2
        return "refused"
    return "valid"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(document=values)
def test_random_documents(tmp_path: Path, document: object) -> None:
    outcome_of(tmp_path, yaml.safe_dump(document, allow_unicode=True))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(base=st.sampled_from(SHIPPED), key=st.sampled_from(KEYS), value=values, drop=st.booleans())
def test_mutated_shipped_scenarios(
    tmp_path: Path, base: dict, key: str, value: object, drop: bool
) -> None:
    document = dict(base)
    if drop:
        document.pop(key, None)
    else:
        document[key] = value
    outcome_of(tmp_path, yaml.safe_dump(document, allow_unicode=True))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=st.text(alphabet=string.printable + "\u00e9\u2028\ufeff", max_size=200))
def test_arbitrary_text(tmp_path: Path, text: str) -> None:
    outcome_of(tmp_path, text)


def test_the_shipped_scenarios_survive_the_round_trip(tmp_path: Path) -> None:
    assert {outcome_of(tmp_path, yaml.safe_dump(doc)) for doc in SHIPPED} == {"valid"}


FUZZ = settings(
    max_examples=EXAMPLES // 3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
TIMED = [doc for doc in SHIPPED if doc.get("tenant_groups")]


def refusal_of(tmp: Path, text: str) -> str:
    """The loader's one line for a document that must be refused."""
    path = tmp / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    assert outcome_of(tmp, text) == "refused"
    with pytest.raises(HarnessError) as caught:
        load_scenario(path, NAMES)
    return str(caught.value).removeprefix(f"{path}:")


def nest(value: object, kinds: list[str]) -> object:
    for kind in kinds:
        value = [value] if kind == "list" else {"k": value}
    return value


@FUZZ
@given(
    base=st.sampled_from(SHIPPED),
    key=st.sampled_from(KEYS),
    kinds=st.lists(st.sampled_from(["list", "map"]), min_size=MAX_DEPTH, max_size=4 * MAX_DEPTH),
    flow=st.booleans(),
)
def test_deep_nesting_is_one_line(
    tmp_path: Path, base: dict, key: str, kinds: list[str], flow: bool
) -> None:
    document = {**base, key: nest(1, kinds)}
    text = yaml.safe_dump(document, default_flow_style=flow, width=10**6)
    assert f"nested deeper than {MAX_DEPTH} levels" in refusal_of(tmp_path, text)


def key_lines(text: str) -> list[int]:
    """Lines of a block-style dump that start a key of a mapping (not a list item)."""
    return [
        index for index, line in enumerate(text.splitlines()) if re.match(r"^\s*[a-z_]+:", line)
    ]


@FUZZ
@given(base=st.sampled_from(SHIPPED), pick=st.integers(0, 10**6))
def test_a_key_written_twice_is_one_line_naming_both(tmp_path: Path, base: dict, pick: int) -> None:
    document = {key: value for key, value in base.items() if key != "description"}
    lines = yaml.safe_dump(document, default_flow_style=False, width=10**6).splitlines()
    index = key_lines("\n".join(lines))[pick % len(key_lines("\n".join(lines)))]
    doubled = [*lines[: index + 1], lines[index], *lines[index + 1 :]]
    message = refusal_of(tmp_path, "\n".join(doubled) + "\n")
    assert message.startswith(f"{index + 2}: "), message
    assert f"written twice in one mapping (on lines {index + 1} and {index + 2})" in message


def numbers(node: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """The path of every number in a document (not booleans, which are ints in Python)."""
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in numbers(value, (*path, key))]
    if isinstance(node, list):
        return [p for index, value in enumerate(node) for p in numbers(value, (*path, index))]
    return [path] if isinstance(node, int | float) and not isinstance(node, bool) else []


def replaced(node: object, path: tuple[object, ...], value: object) -> object:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {**node, head: replaced(node[head], rest, value)}
    assert isinstance(node, list) and isinstance(head, int)
    return [replaced(item, rest, value) if i == head else item for i, item in enumerate(node)]


@FUZZ
@given(
    base=st.sampled_from(SHIPPED),
    pick=st.integers(0, 10**6),
    kind=st.sampled_from(["true", "false", "string"]),
)
def test_a_boolean_or_a_string_is_never_a_number(
    tmp_path: Path, base: dict, pick: int, kind: str
) -> None:
    paths = numbers(base)
    path = paths[pick % len(paths)]
    number = _at(base, path)
    value = {"true": True, "false": False, "string": str(number)}[kind]
    message = refusal_of(tmp_path, yaml.safe_dump(replaced(base, path, value)))
    assert "Input should be a valid" in message, message
    assert f"(got {value!r})" in message, message


def _at(node: object, path: tuple[object, ...]) -> object:
    for part in path:
        node = node[part]  # type: ignore[index]
    return node


@FUZZ
@given(
    base=st.sampled_from(TIMED),
    pick=st.integers(0, 10**6),
    late=st.floats(0, 5000),
    how=st.sampled_from(["enqueue_at_s", "every_s"]),
)
def test_arrivals_at_or_after_the_timeout_are_refused(
    tmp_path: Path, base: dict, pick: int, late: float, how: str
) -> None:
    groups = [dict(group) for group in base["tenant_groups"]]
    group = groups[pick % len(groups)]
    timeout = base.get("timeout_s", 300)
    start = group.get("enqueue_at_s", 0)
    if how == "every_s" and group.get("arrival") != "poisson":
        group["repeat"] = max(group.get("repeat", 1), 2)
        group["every_s"] = min((timeout - start + late) / (group["repeat"] - 1), 86_400)
    else:
        group["enqueue_at_s"] = min(timeout + late, 86_400)
    message = refusal_of(tmp_path, yaml.safe_dump({**base, "tenant_groups": groups}))
    assert "not before timeout_s" in message, message


def test_a_refused_character_is_placed_on_its_line(tmp_path: Path) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text("name: x\nworkers: 1\n\x0c\n")
    try:
        load_scenario(path, NAMES)
    except HarnessError as error:
        assert str(error).startswith(f"{path}:3: not valid YAML: unacceptable character")
    else:
        raise AssertionError("a form feed is not YAML")
