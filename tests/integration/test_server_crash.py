"""faults.server_crash: the server crashed under a library's queue (an immediate
shutdown) and started again on its crash recovery, on a server of the run's own (a crash
is refused on --dsn); every job in one outcome. Apart from test_library_faults.py so
that pytest-xdist runs the modules' waits on different workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.run.faults import OUTCOMES
from tests.integration.test_library_faults import JOBS, faulted_run, faulted_runs


def test_a_server_crash_cuts_every_session_and_the_exited_worker_is_restarted(
    tmp_path: Path,
) -> None:
    """On a server of the run's own (a crash is refused on --dsn): at 0.5 s an immediate
    shutdown, up again 0.5 s later on its crash recovery. The worker exits with its
    session; its restarts fail while the server is down (each an exit) until one takes;
    the run ends at its window, not failed (the enqueuer's stop on a lost session is
    counted, not fatal), every job in one outcome."""
    crash = "{server_crash: {at_s: 0.5, down_s: 0.5}, restart_exited_after_s: 0.2}"
    entry = faulted_run(None, tmp_path, crash, timeout_s=6, strategy="dies_with_connection")
    faults = entry["library_faults"]
    assert faults["server_crashes"] == 1 and faults["crashed_at_s"] >= 0.5, faults
    assert faults["back_at_s"] >= faults["crashed_at_s"] + 0.5, faults
    assert any(said.startswith("redo starts at") for said in faults["crash_recovery"]), faults
    assert faults["exits"] >= 1 and faults["restarts"] >= 1, faults
    assert 0 <= faults["stranded"] <= 2 * faults["exits"], faults
    assert faults["ok"] + faults["stranded"] + faults["waiting"] == JOBS, faults
    assert faults["duplicated"] == faults["abandoned"] == 0, faults


@pytest.mark.libraries
def test_every_python_library_through_a_server_crash_has_every_job_counted(
    tmp_path: Path,
) -> None:
    """Four libraries, one server of the run's own, each through its crash: whatever it
    did (reconnected, exited and was restarted, stalled), every job in one outcome."""
    crash = "{server_crash: {at_s: 0.5, down_s: 0.5}, restart_exited_after_s: 0.2}"
    libraries = "procrastinate, pgqueuer, saq, pgmq"
    entries = faulted_runs(None, tmp_path, crash, timeout_s=8, strategy=libraries)
    assert [entry["strategy"] for entry in entries] == libraries.split(", ")
    for entry in entries:
        faults = entry["library_faults"]
        assert faults["server_crashes"] == 1, faults
        assert sum(faults[o] for o in OUTCOMES) == JOBS, faults
