"""`harness check --pg-version N` against the baseline that ships for N, on every major
installed: the deterministic figures (buffers, rows removed, scans, dangerous shapes)
pass as committed. Timings are judged by test_check_runs on 17 (best of five, under
load); here they are printed, not asserted."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from harness.check.verdict import CheckSettings
from harness.commands.check import CheckRequest, check_command
from harness.server.builds import MAJORS
from tests.conftest import ROOT
from tests.majors.conftest import major_choice

TIMING = "claim latency / reference"


@pytest.mark.parametrize("major", MAJORS, ids=lambda major: f"pg{major}")
def test_each_majors_shipped_baseline_passes_on_its_major(
    major: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the checkout's baselines/ and scenarios/
    choice = major_choice(major)
    out = io.StringIO()
    request = CheckRequest(
        baseline=None,
        probes=ROOT / "scenarios" / "dequeue-check.yaml",
        settings=CheckSettings(samples=10),
    )
    code = check_command(request, choice, None, Console(file=out, width=200))
    output = out.getvalue()
    regressions = [line for line in output.splitlines() if line.startswith("REGRESSION: ")]
    assert [line for line in regressions if TIMING not in line] == [], output
    assert code == (1 if regressions else 0)
    assert f"Starting PostgreSQL {major} (embedded)" in output
    print(f"PostgreSQL {major}: timing flagged: {regressions or 'none'}")
