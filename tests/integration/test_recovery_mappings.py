"""The recovery mappings of the Perl, Ruby and Java adapters, each through a worker kill:
the jobs the killed worker held are started again, as their manifests promise, and every
job is done once. Apart from test_library_faults.py, so that pytest-xdist runs their
minutes beside that module's."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.run.faults import OUTCOMES
from harness.server.kinds import Server
from tests.integration.test_adapters import shipped
from tests.integration.test_library_faults import faulted_run, kill_verdicts

# Of 3 s each, two at a time: 9 s of work. The kill comes at the first moment from 1.5 s
# that the worker holds a job: a job begun before 1.5 s has at least 1.5 s still to run,
# one begun later has just begun. Jobs of 200 ms left the kill, on a busy machine, at a
# job whose run had ended and whose report had not yet been read (CI, 2026-12-05:
# minion, nothing interrupted): this test is of the recovery, so its kill must hold one.
JOBS = 6
DURATION_MS = 3000


@pytest.mark.adapters
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("adapter", "window_s"),
    [
        # max_run_time 5 s: a lock that old is taken by any worker's next reserve
        ("delayed_job", 30),
        # missing after 15 s, a repair every 5-10 s, then Minion's backoff of 15 s
        ("minion", 90),
        # dead after 8 s without a heartbeat (every 2 s), looked for every 4 s
        ("dbscheduler", 60),
    ],
)
def test_a_recovery_mapping_starts_its_killed_workers_jobs_again(
    server: Server, tmp_path: Path, adapter: str, window_s: float
) -> None:
    """`<adapter>_recovery`'s promise (its manifest's [mappings.recovery]): each job the
    killed worker held is started again by another, within a window of several times
    the promise, and every job is done once. A held job whose run had ended as the kill
    came (its report lost with its worker) is done and needs no second start."""
    shipped(adapter)
    kill = "worker_kills: [{at_s: 1.5, restart_after_s: 0.2, holding: true}]"
    strategy = f"{adapter}_recovery"
    entry = faulted_run(
        server, tmp_path, kill, window_s, strategy, jobs=JOBS, duration_ms=DURATION_MS
    )
    kills = entry["library_faults"]
    seen = f"not ok: {kills['jobs']}; held: {kills['interrupted']}"
    assert sum(kills[o] for o in OUTCOMES) == JOBS and kills["ok"] == JOBS, seen
    interrupted = kills["interrupted"]
    assert interrupted and kills["started_again"] >= 1, seen
    for row in interrupted:
        assert row["started_again_after_s"] is not None or row["outcome"] == "ok", seen
    (row,) = kill_verdicts(tmp_path)
    assert row["verdict"] == "as promised", row["verdict_why"]
