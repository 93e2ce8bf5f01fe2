"""faults.connection_exhaustion: the harness holds the server's connections until none
is left, so that a library worker started again meanwhile cannot connect; every job in
one outcome. Apart from test_library_faults.py so that pytest-xdist runs the modules'
waits on different workers."""

from __future__ import annotations

import json
from pathlib import Path

from harness.run.faults import OUTCOMES
from tests.integration.test_library_faults import faulted_run


def test_a_worker_started_while_the_server_is_full_exits_until_it_is_not(
    tmp_path: Path,
) -> None:
    """On a server of the run's own (an exhaustion is refused on --dsn, whose server has
    other clients): from 0.1 s for 5.5 s the harness holds every connection it has left (about
    94 of 100: full by 0.4-0.6 s here, at loads up to 4). The fixture's worker, killed at
    2 s and started again 0.1 s later, finds its three sessions' slots taken by the
    harness (as a storm of other clients would take them) and cannot connect: each start
    that fails is an exit, with the server's refusal as its reason, and the next comes
    0.3 s later. Once the connections are closed a start takes, and the restarted worker
    takes the queue up; the jobs its killed process held stay running (the fixture has no
    recovery). 200 jobs of 30 ms, two at a time: the queue still has work at the kill.
    The margins are wide, so that a busy machine does not move the kill before the server
    is full, nor a start out of the window it belongs in: a fill 4 times slower, and a
    start of up to 3.5 s both before the release and after it (one took 3.3 s beside
    stress-ng and the suite)."""
    faults = (
        "{worker_kills: [{at_s: 2.0, restart_after_s: 0.1}], "
        "connection_exhaustion: {from_s: 0.1, for_s: 5.5}, restart_exited_after_s: 0.3}"
    )
    entry = faulted_run(None, tmp_path, faults, timeout_s=10, jobs=200)
    done = entry["library_faults"]
    said = json.dumps(done)
    assert done["connection_exhaustions"] == 1 and done["max_connections"] == 100, said
    # every slot but those the run's sessions had when it began (the harness's, the
    # enqueuer's, the workers'), and those the killed worker freed
    assert done["connections_held"] < 100 and done["full_at_s"] < 2.0, said
    assert done["released_at_s"] >= 5.6, said
    # the killed worker's three sessions (its own and a slot's two) taken back
    assert done["taken_back"] >= 1 and done["connections_held"] > 80, said
    refused = [why for at, why in done["exited_at_s"] if at < done["released_at_s"]]
    assert refused and all("too many clients" in why for why in refused), said
    # a start that failed is an exit, not a restart: the one start that took is counted
    assert (done["kills"], done["restarts"]) == (1, 1), said
    assert sum(done[o] for o in OUTCOMES) == 200, said
    assert done["duplicated"] == done["abandoned"] == 0 and done["stranded"] <= 2, said
