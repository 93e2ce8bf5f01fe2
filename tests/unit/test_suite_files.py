"""A suite file (`suite:`, scenarios/real-queues-faults.yaml): each problem one line naming
the file, the line and the field, before any server starts; and the matrix's own books,
which fail a suite whose outcomes do not add up to the jobs enqueued."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.fault_matrix import MATRIX_COLUMNS, OUTCOMES, cross_rows, unaccounted
from harness.errors import HarnessError
from harness.scenario.loader import LoadedSuite, load_any, load_scenario
from tests.conftest import SCENARIOS, SHORT_NOISY, builtin_traits, harness_cli

SUITE = """\
name: two
suite:
  - {fault: first, scenario: a.yaml}
  - {fault: second, scenario: b.yaml}
"""


def _suite(tmp_path: Path, text: str = SUITE) -> Path:
    (tmp_path / "a.yaml").write_text(SHORT_NOISY)
    (tmp_path / "b.yaml").write_text(SHORT_NOISY.replace("name: ", "name: b", 1))
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(HarnessError) as caught:
        load_any(path, builtin_traits())
    message = str(caught.value)
    assert "\n" not in message and caught.value.exit_code == 2
    return message


def test_a_suite_loads_each_scenario_from_its_own_folder(tmp_path: Path) -> None:
    loaded = load_any(_suite(tmp_path), builtin_traits())
    assert isinstance(loaded, LoadedSuite)
    assert [case.fault for case in loaded.suite.suite] == ["first", "second"]
    assert [Path(case.path).name for case in loaded.cases] == ["a.yaml", "b.yaml"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (SUITE.replace("a.yaml", "missing.yaml"), ":3: suite[0].scenario: no such file"),
        (SUITE.replace("fault: second", "fault: First"), "suite[1].fault: 'First' is suite[0]'s"),
        (SUITE.replace("b.yaml", "a.yaml"), ":4: suite[1].scenario: scenario "),
        (SUITE.replace("fault: first, ", ""), ":3: suite[0].fault: required field is missing"),
        (SUITE + "workers: 2\n", ":5: workers: unknown field; allowed: name, description, suite"),
        (SUITE.replace("a.yaml", "suite.yaml"), "is a suite; a suite's cases are scenarios"),
        ("name: two\nsuite: []\n", ":2: suite: List should have at least 1 item"),
    ],
    ids=["missing", "fault twice", "scenario twice", "no fault", "unknown", "nested", "empty"],
)
def test_a_suite_problem_is_one_line_on_its_field(tmp_path: Path, text: str, said: str) -> None:
    path = _suite(tmp_path, text)
    message = _refusal(path)
    assert message.startswith(f"{path}:") and said in message, message


def test_a_cases_own_problem_is_said_on_its_own_file(tmp_path: Path) -> None:
    path = _suite(tmp_path)
    (tmp_path / "b.yaml").write_text(SHORT_NOISY.replace("workers:", "wokers:"))
    assert _refusal(path).startswith(f"{tmp_path / 'b.yaml'}:")


def test_only_run_and_validate_take_a_suite(tmp_path: Path) -> None:
    path = _suite(tmp_path)
    with pytest.raises(HarnessError, match=r":2: suite: a suite of 2 scenarios runs with"):
        load_scenario(path, builtin_traits())
    done = harness_cli("simulate", str(path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def test_validate_names_each_case_of_the_shipped_suite() -> None:
    done = harness_cli("validate", str(SCENARIOS / "real-queues-faults.yaml"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "a suite of 5 scenarios" in lines[0]
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "worker kill",
        "backend kills",
        "server crash",
        "connection exhaustion",
        "held snapshot",
    ]


def _row(**counts: int) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(MATRIX_COLUMNS)
    row |= {"fault": "kill", "strategy": "q", "repetition": 1, "enqueued": 10}
    row |= dict.fromkeys(OUTCOMES, 0) | counts
    return row


def test_the_matrix_says_a_job_the_outcomes_do_not_place() -> None:
    whole = pd.DataFrame([_row(ok=8, stranded=2)])
    short = pd.DataFrame([_row(ok=8, stranded=1)])
    assert unaccounted(whole) == []
    assert unaccounted(short) == ["kill: q #1: 9 jobs in outcomes of 10 enqueued"]


def test_a_cell_says_what_went_wrong_before_what_went_right() -> None:
    rows = pd.DataFrame([_row(ok=7, lost=1, duplicated=2) | {"verdict": "worse"}])
    headers, cells = cross_rows(rows, ["kill", "crash"])
    assert headers == ["strategy", "kill", "crash"]
    assert cells == [["q", "7 ok, 1 lost, 2 duplicated; worse", "-"]]
