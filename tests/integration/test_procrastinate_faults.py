"""Every fault on one real Python library in `make test` (the ten libraries take them in
the matrix: test_library_faults.py, test_backend_kills.py, test_server_crash.py and
test_connection_exhaustion.py): procrastinate through its own worker, at its defaults.
A worker kill, backend kills and a connection exhaustion here; a server crash in
test_procrastinate_crash.py, a held snapshot in test_procrastinate_held.py (apart, so
that pytest-xdist runs their seconds of waiting on different workers). Counts only:
every job in one outcome, each fault done, and what procrastinate promises of a killed
worker's job (`doing` until a stalled-job task it does not run by default)."""

from __future__ import annotations

from pathlib import Path

from harness.run.faults import OUTCOMES
from tests.integration.test_library_faults import faulted_run, kill_verdicts

JOBS = 200  # of 30 ms, two at a time: 3 s of work, past every fault's moment below


def test_procrastinate_killed_then_cut_in_a_full_server_counts_every_job(
    tmp_path: Path,
) -> None:
    """One run of three faults: the worker killed at the first moment from 0.6 s it
    holds a job (restarted 0.1 s later), the server filled from 1.0 s for 1.5 s, and
    the workers' sessions cut at 1.5 s, inside it. procrastinate reconnects (a refused
    start is an exit, started again), and leaves the jobs the kill interrupted `doing`,
    as it promises; nothing runs twice."""
    faults = (
        "{worker_kills: [{at_s: 0.6, restart_after_s: 0.1, holding: true}], "
        "backend_kills: [{from_s: 1.5, for_s: 0.5, per_s: 2}], "
        "connection_exhaustion: {from_s: 1.0, for_s: 1.5}, restart_exited_after_s: 0.3}"
    )
    entry = faulted_run(None, tmp_path, faults, 8, "procrastinate", jobs=JOBS)
    done = entry["library_faults"]
    assert sum(done[o] for o in OUTCOMES) == JOBS, done
    assert (done["kills"], done["backend_kills"], done["connection_exhaustions"]) == (1, 1, 1)
    assert done["connections_held"] > 0 and done["duplicated"] == 0, done
    assert done["rerun"] == [] and done["lost"] == 0, done
    (row,) = kill_verdicts(tmp_path)
    assert row["promise"] == "left" and row["verdict"] in ("as promised", "no job held"), row
