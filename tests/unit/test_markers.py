"""The `integration` marker selects exactly the tests under tests/integration; the
Makefile's `make test` leaves out every marker of minutes, and `make test-matrix` (which
CI runs after it) runs what `make test` leaves out."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT

NOTHING_COLLECTED = 5  # pytest's exit code when a selection is empty


def collected(marker: str | None) -> list[str]:
    """Test ids pytest collects with `-m marker` (None: every test), in a subprocess (no
    server starts)."""
    select = ["-m", marker] if marker is not None else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *select, "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, NOTHING_COLLECTED), done.stdout + done.stderr
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


def make_marker(target: str) -> str:
    """The `-m` expression a Makefile target runs pytest with."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = rf"^{target}:.*\n(?:\t.*\n)*?\t\$\(BIN\)/pytest -m \"([^\"]+)\""
    found = re.search(recipe, makefile, re.M)
    assert found is not None, target
    return found[1]


def test_make_test_leaves_out_the_markers_of_minutes_and_the_matrix_runs_them() -> None:
    """Each test runs in exactly one of the two: none of minutes in make test, none left
    out of both (CI runs both)."""
    fast, matrix = make_marker("test"), make_marker("test-matrix")
    minutes = "heavy or throughput or libraries or adapters or slow"
    in_both_or_neither = f"(({fast}) and ({matrix})) or not (({fast}) or ({matrix}))"
    assert collected(f"(({fast}) and ({minutes})) or {in_both_or_neither}") == []
    heavy_and_throughput = "\n".join(collected("heavy or throughput"))
    assert "test_throughput.py" in heavy_and_throughput
    assert "test_a_fetch_whose_cost_follows_the_backlog_shows_it" in heavy_and_throughput
