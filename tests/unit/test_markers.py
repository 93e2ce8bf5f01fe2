"""The `integration` marker selects exactly the tests under tests/integration, `majors`
exactly those under tests/majors, which a plain pytest (make test) leaves out."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def collected(marker: str | None) -> list[str]:
    """Test ids pytest collects with `-m marker` (None: as make test runs it), in a
    subprocess (no server starts)."""
    selection = ["-m", marker] if marker is not None else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *selection, "tests"],
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


def test_majors_collects_the_tests_of_every_major_and_make_test_none() -> None:
    majors = collected("majors")
    assert majors and all(test.startswith("tests/majors/") for test in majors), majors
    assert not [test for test in collected(None) if test.startswith("tests/majors/")]
