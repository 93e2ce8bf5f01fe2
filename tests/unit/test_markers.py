"""The `integration` marker selects exactly the tests under tests/integration; `heavy`
tests are left out unless asked for."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def collected(marker: str | None) -> list[str]:
    """Test ids pytest collects with `-m marker` (None: as `make test` runs it), in a
    subprocess (no server starts)."""
    select = ["-m", marker] if marker is not None else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *select, "tests"],
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


def test_heavy_tests_run_only_when_asked_for() -> None:
    heavy = collected("heavy")
    assert heavy, "make test-heavy has tests to run"
    assert not set(heavy) & set(collected(None))
