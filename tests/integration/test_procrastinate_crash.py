"""procrastinate through a server crash, in `make test` (test_procrastinate_faults.py
says why), on a server of the run's own: a crash needs one the harness started."""

from __future__ import annotations

from pathlib import Path

from harness.run.faults import OUTCOMES
from tests.integration.test_library_faults import faulted_run
from tests.integration.test_procrastinate_faults import JOBS


def test_procrastinate_through_a_server_crash_counts_every_job(tmp_path: Path) -> None:
    """The server crashed at 0.5 s (an immediate shutdown; its start replays the WAL)
    and back 0.5 s later: procrastinate reconnects or exits and is started again;
    whatever it did, every job is in one outcome, none run twice."""
    crash = "{server_crash: {at_s: 0.5, down_s: 0.5}, restart_exited_after_s: 0.2}"
    entry = faulted_run(None, tmp_path, crash, 8, "procrastinate", jobs=JOBS)
    done = entry["library_faults"]
    assert done["server_crashes"] == 1 and done["back_at_s"] >= 1.0, done
    assert sum(done[o] for o in OUTCOMES) == JOBS and done["duplicated"] == 0, done
