"""The scenario loader on random and mutated YAML: a scenario or one line, never a traceback."""

from __future__ import annotations

import os
import string
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError
from harness.queues.catalog import catalog
from harness.scenario.loader import load_scenario
from tests.conftest import SCENARIOS

NAMES = set(catalog())
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))  # more for a longer hunt
SHIPPED = [yaml.safe_load(path.read_text()) for path in sorted(SCENARIOS.glob("*.yaml"))]


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


def test_a_refused_character_is_placed_on_its_line(tmp_path: Path) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text("name: x\nworkers: 1\n\x0c\n")
    try:
        load_scenario(path, NAMES)
    except HarnessError as error:
        assert str(error).startswith(f"{path}:3: not valid YAML: unacceptable character")
    else:
        raise AssertionError("a form feed is not YAML")
