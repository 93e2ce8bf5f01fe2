"""faults.backend_kills: a library's workers' sessions terminated, the harness's and the
enqueuers' spared; a worker that exits over it counted and started again; every job in
one outcome. Apart from test_library_faults.py so that pytest-xdist runs the modules'
waits (each run lasts its window) on different workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.run.faults import OUTCOMES
from harness.server.kinds import Server
from tests.integration.test_library_faults import JOBS, faulted_run, faulted_runs


def test_backend_kills_cut_the_workers_sessions_and_an_exited_worker_is_restarted(
    server: Server, tmp_path: Path
) -> None:
    """One run of two fixtures, three kills (0.3, 0.7, 1.1 s). pyqueue: the kills end
    its worker process's three sessions (its own and one per slot; a slot on a busy
    machine may connect after the first kill, the next one takes it); its slots end with
    them and never reconnect, its process stays: no exit. The run goes on to its window
    (the harness's sessions and the enqueuer's were spared), every job in one outcome.
    pyqueue --dies-with-its-connection exits instead: each exit counted with its reason,
    and it is started again (a start cut by the next kill is one more exit, not a
    restart). How much the restarted worker does within the window is the machine's
    speed."""
    cuts = "{backend_kills: [{from_s: 0.3, for_s: 1.2, per_s: 2.5}], restart_exited_after_s: 0.2}"
    idle, dies = faulted_runs(server, tmp_path, cuts, 4, "pyqueue, dies_with_connection")
    for entry in (idle, dies):
        faults = entry["library_faults"]
        assert faults["backend_kills"] == 3 and sum(faults[o] for o in OUTCOMES) == JOBS, faults
        assert faults["duplicated"] == faults["abandoned"] == 0, faults
    faults = idle["library_faults"]
    assert (faults["sessions_terminated"], faults["exits"]) == (3, 0), faults
    assert 0 <= faults["stranded"] <= 2 and faults["waiting"] > 0, faults
    faults = dies["library_faults"]
    assert faults["exits"] >= 1 and 1 <= faults["restarts"] <= faults["exits"], faults
    assert any("its connection is lost" in why for _, why in faults["exited_at_s"]), faults
    assert 0 <= faults["stranded"] <= 2 * faults["exits"], faults


@pytest.mark.libraries
@pytest.mark.parametrize("library", ["procrastinate", "pgqueuer", "saq", "pgmq"])
def test_a_librarys_workers_sessions_terminated_and_every_job_counted(
    server: Server, tmp_path: Path, library: str
) -> None:
    """A real library's worker sessions cut twice: whatever it did (reconnected, went
    idle, exited and was restarted, failed at its stop), every job is in one outcome and
    each exit has its reason (the figures: docs/faults.md)."""
    cuts = "backend_kills: [{from_s: 0.3, for_s: 0.6, per_s: 2}]"
    entry = faulted_run(server, tmp_path, cuts, timeout_s=8, strategy=library)
    faults = entry["library_faults"]
    assert faults["backend_kills"] == 2 and faults["sessions_terminated"] >= 1, faults
    assert sum(faults[o] for o in OUTCOMES) == JOBS, faults
    assert faults["restarts"] <= faults["exits"] == len(faults["exited_at_s"]), faults
    assert all(why for _, why in faults["exited_at_s"]), faults
