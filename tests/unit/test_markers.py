"""The `integration` marker selects exactly the tests under tests/integration."""

from __future__ import annotations

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
    assert all(test.startswith("tests/unit/") for test in unit), unit


def test_integration_collects_every_integration_test_and_nothing_else() -> None:
    integration = collected("integration")
    files = {test.split("::")[0] for test in integration}
    expected = {
        str(path.relative_to(ROOT)) for path in (ROOT / "tests/integration").glob("test_*.py")
    }
    assert files == expected
