"""The `integration` marker selects exactly the tests under tests/integration, `majors`
exactly those under tests/majors, which make test leaves out and make test-matrix runs."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT


def collected(marker: str) -> list[str]:
    """Test ids pytest collects with `-m marker`, in a subprocess (no server starts)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marker, "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_not_integration_collects_no_integration_test() -> None:
    unit = collected("not integration")
    assert unit, "the unit tests are collected"
    assert all(test.startswith(("tests/unit/", "tests/majors/")) for test in unit), unit


def test_integration_collects_every_integration_test_and_nothing_else() -> None:
    integration = collected("integration")
    files = {test.split("::")[0] for test in integration}
    expected = {
        str(path.relative_to(ROOT)) for path in (ROOT / "tests/integration").glob("test_*.py")
    }
    assert files == expected


def make_selection(target: str) -> str:
    """The -m expression of a Makefile target's pytest."""
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(
        rf"^{target}:.*\n(?:\t.*\n)*?\t\$\(BIN\)/pytest -m \"([^\"]+)\"", makefile, re.M
    )
    assert found, target
    return found.group(1)


def test_majors_collects_the_tests_of_every_major_make_test_none_make_test_matrix_all() -> None:
    majors = collected("majors")
    assert majors and all(test.startswith("tests/majors/") for test in majors), majors
    in_make_test = collected(make_selection("test"))
    assert in_make_test and not [t for t in in_make_test if t.startswith("tests/majors/")]
    assert set(majors) <= set(collected(make_selection("test-matrix")))
