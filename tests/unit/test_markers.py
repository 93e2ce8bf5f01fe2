"""The `integration` marker selects exactly the tests under tests/integration, `majors`
exactly those under tests/majors, which make test leaves out and make test-matrix runs;
every test runs in make test or in make test-matrix."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable

import pytest
import yaml
from _pytest.mark.expression import Expression

from tests.conftest import COLLECTED, ROOT


@pytest.fixture(scope="module")
def markers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[str]]:
    """Every test's id and markers: this session's own collection where it collected the
    whole suite (make test does), else one collection in a subprocess (no server
    starts)."""
    collected = request.config.stash.get(COLLECTED, None)
    if collected is not None:
        return collected
    out = tmp_path_factory.mktemp("markers") / "markers.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tests.marker_listing"],
        cwd=ROOT,
        env={**os.environ, "TQB_MARKERS_OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listing: dict[str, list[str]] = json.loads(out.read_text())
    return listing


def selected(markers: dict[str, list[str]], expression: str) -> list[str]:
    """The tests `pytest -m expression` runs, evaluated as pytest evaluates it."""
    compiled = Expression.compile(expression)
    return [test for test, names in markers.items() if compiled.evaluate(_has(names))]


def _has(names: list[str]) -> Callable[..., bool]:
    return lambda name, /, **kwargs: name in names


def test_not_integration_collects_no_integration_test(markers: dict[str, list[str]]) -> None:
    unit = selected(markers, "not integration")
    assert unit, "the unit tests are collected"
    assert all(test.startswith(("tests/unit/", "tests/majors/")) for test in unit), unit


def test_integration_collects_every_integration_test_and_nothing_else(
    markers: dict[str, list[str]],
) -> None:
    integration = selected(markers, "integration")
    files = {test.split("::")[0] for test in integration}
    expected = {
        str(path.relative_to(ROOT)) for path in (ROOT / "tests/integration").glob("test_*.py")
    }
    assert files == expected


def test_ci_runs_the_readme_command_and_the_matrix() -> None:
    """.ci/run and the GitHub workflow both run make test, make test once more beside a
    load (make test-under-load), then make test-matrix (what make test leaves out) and
    the check; the workflow is YAML that parses (a colon in a plain `run:` scalar made it
    a mapping)."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    runs = [step.get("run", "") for step in workflow["jobs"]["test"]["steps"]]
    makes = [run for run in runs if run.startswith("make ")]
    assert makes == ["make test", "make test-under-load", "make test-matrix"]
    assert any("harness check" in run for run in runs)
    script = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    steps = ("make test", "make test-under-load", "make test-matrix", "make check")
    assert [line for line in script if line in steps] == list(steps)


def test_what_make_test_leaves_out_the_matrix_runs() -> None:
    """Every marker make test excludes (from both of its parts) is one make test-matrix
    selects: nothing falls between the two."""
    makefile = (ROOT / "Makefile").read_text()
    parts = [set(re.findall(r"not (\w+)", part)) for part in make_selections(makefile, "test")]
    excluded = set.intersection(*parts)
    matrix = " ".join(make_selections(makefile, "test-matrix"))
    selected = set(re.findall(r"(\w+)", matrix)) - {"or", "and", "not"}
    assert excluded and excluded == selected
    assert {"heavy", "throughput", "libraries"} <= excluded  # minutes each


def test_every_test_runs_in_make_test_or_the_matrix(markers: dict[str, list[str]]) -> None:
    """Over the collection: each test is selected by make test or by make test-matrix,
    and by one of them only."""
    makefile = (ROOT / "Makefile").read_text()
    (suite,) = make_selections(makefile, "test")
    matrix = make_selections(makefile, "test-matrix")
    matrix_parts = [set(selected(markers, part)) for part in matrix]
    tested, matrixed = set(selected(markers, suite)), set.union(*matrix_parts)
    assert tested | matrixed == set(markers)
    assert tested and matrixed and not tested & matrixed
    assert sum(len(part) for part in matrix_parts) == len(matrixed)  # no test in two parts


def make_selections(makefile: str, target: str) -> list[str]:
    """The `-m` expression of each pytest command in the target's recipe, its make
    variables (`NAME := value`) put in."""
    variables = dict(re.findall(r"^(\w+) [:?]?= (.*)$", makefile, re.MULTILINE))
    block = makefile.split(f"\n{target}: ", 1)[1].split("\n\n", 1)[0]
    found = re.findall(r'pytest [^"\n]*-m "([^"]+)"', block)
    assert found, target
    return [re.sub(r"\$\((\w+)\)", lambda name: variables[name[1]], each) for each in found]


def test_majors_collects_the_tests_of_every_major_make_test_none_the_matrix_all(
    markers: dict[str, list[str]],
) -> None:
    majors = selected(markers, "majors")
    assert majors and all(test.startswith("tests/majors/") for test in majors), majors
    makefile = (ROOT / "Makefile").read_text()
    parts = make_selections(makefile, "test")
    in_make_test = [test for part in parts for test in selected(markers, part)]
    assert in_make_test and not [t for t in in_make_test if t.startswith("tests/majors/")]
    matrix = make_selections(makefile, "test-matrix")
    assert set(majors) <= {test for part in matrix for test in selected(markers, part)}
