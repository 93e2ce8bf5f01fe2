"""Every library of the thirteen, at its default mapping, through a worker kill in
`make test-matrix` (the suite, scenarios/real-queues-faults.yaml, runs every fault
against every library with the windows their promises need; this is its short form, a
library each on one server). Apart from test_library_faults.py, so that pytest-xdist
runs its minutes beside that module's."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.run.faults import OUTCOMES
from harness.server.kinds import Server
from tests.integration.test_library_faults import faulted_runs, kill_verdicts

LIBRARIES = [
    "procrastinate",
    "pgqueuer",
    "saq",
    "pgmq",
    "dbos",
    "awa",
    "pgboss",
    "graphile_worker",
    "minion",
    "delayed_job",
    "pgqrs",
    "river",
    "dbscheduler",
]
JOBS = 80  # of 100 ms, two at a time: 4 s of work, the kill at the first held job from 1 s


@pytest.mark.libraries
@pytest.mark.timeout(1200)  # thirteen runs of a 10 s window: eleven took 271 s at load 10-15
def test_every_library_killed_mid_job_has_every_job_counted(server: Server, tmp_path: Path) -> None:
    """Each library's worker killed at the first moment from 1 s that it holds a job,
    started again 0.2 s later, a 10 s window: whatever its recovery did in it, every job
    is in one outcome, and its verdict beside its promise is never `worse` (a retry
    promised within the window and not made, or a job lost). awa's killed worker's jobs
    stay in open lease claims until its 90 s rescue, which awa 0.6's `awa.jobs` view does
    not show (awa#422): its ledger reads the claims, and they are stranded, not lost."""
    kill = "worker_kills: [{at_s: 1.0, restart_after_s: 0.2, holding: true}]"
    entries = faulted_runs(
        server, tmp_path, kill, 10, ", ".join(LIBRARIES), jobs=JOBS, duration_ms=100
    )
    assert [entry["strategy"] for entry in entries] == LIBRARIES
    verdicts = {row["strategy"]: row for row in kill_verdicts(tmp_path)}
    for entry in entries:
        done = entry["library_faults"]
        said = f"{entry['strategy']}: {done['jobs']} {done['interrupted']}"
        assert (done["kills"], done["restarts"]) == (1, 1), said
        assert sum(done[o] for o in OUTCOMES) == JOBS, said
        row = verdicts[entry["strategy"]]
        if entry["strategy"] == "awa":
            held = {interrupted["job"] for interrupted in done["interrupted"]}
            assert held and held <= set(done["jobs"].get("stranded", [])), said
        assert done["lost"] == 0 and row["verdict"] != "worse", (said, row["verdict_why"])
