"""Fault scenarios without a database: the refusals and the seeded failures (their books:
test_books.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.queues.catalog import catalog
from harness.run.faults import refuse_restart
from harness.run.scenario_run import RunOptions, run_scenario
from harness.scenario.distributions import attempt_fails
from harness.scenario.loader import load_scenario
from harness.scenario.traits import ANY
from harness.server.kinds import Server
from harness.server.processes import crash_recovery

FIFO_ONLY = {"fifo": ANY}
BASE = """\
name: faulty
workers: 2
strategies: [fifo]
timeout_s: 10
tenant_groups:
  - {name: a, tenants: 1, jobs_per_tenant: 10, duration_ms: 5}
"""


def load(write_yaml, extra: str):  # type: ignore[no-untyped-def]
    return load_scenario(write_yaml(BASE + extra), FIFO_ONLY).scenario


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "faults:\n  crashes: [{worker: 2, at_s: 1}]\n",
            r":8: faults.crashes\[0\]: worker 2 does not exist with 2 workers",
        ),
        (
            "faults:\n  crashes: [{worker: 0, at_s: 10}]\n",
            r":8: faults.crashes\[0\]: at_s 10 is not before timeout_s",
        ),
        (
            "faults:\n  crashes: [{worker: 0, at_s: -1}]\n",
            r":8: faults.crashes\[0\].at_s: Input should be greater than or equal to 0",
        ),
        (
            "faults:\n  crashes: [{worker: 0, at_s: 1}, {worker: 0, at_s: 2}]\n"
            "  restart_workers: false\n",
            "a worker is killed twice but restart_workers is false",
        ),
        ("faults:\n  lease: {seconds: 0}\n", r"faults.lease.seconds: Input should be greater"),
        ("faults:\n  server_restart: {at_s: 0}\n", "is not after the last arrival"),
        ("faults:\n  server_restart: {at_s: 11}\n", "is not before timeout_s"),
        ("faults:\n  crash: []\n", "faults.crash: unknown field; allowed: crashes, restart"),
    ],
)
def test_bad_faults_are_refused_with_one_line(write_yaml, extra: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message) as caught:
        load(write_yaml, extra)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("failure_probability: 1.5", "failure_probability: Input should be less than or equal"),
        ("max_attempts: 0", "max_attempts: Input should be greater than or equal to 1"),
        ("backoff_ms: -1", "backoff_ms: Input should be greater than or equal to 0"),
    ],
)
def test_bad_retries_are_refused(write_yaml, field: str, message: str) -> None:
    text = BASE.replace("duration_ms: 5}", f"duration_ms: 5, {field}}}")
    with pytest.raises(HarnessError, match=r":6: tenant_groups\[0\]\." + message):
        load_scenario(write_yaml(text), FIFO_ONLY)


@pytest.mark.parametrize("fault", ["server_restart", "server_crash"])
def test_a_server_restart_or_crash_is_refused_on_dsn_in_one_wording(
    write_yaml, tmp_path: Path, fault: str
) -> None:
    """One rule, one function, one line: the command's refusal before any server starts
    (tests/unit/test_scenario_refusals.py) is the runner's, which refuses it before the
    run folder is made. A server the harness started, embedded or in a container, takes
    both."""
    path = write_yaml(BASE + f"faults:\n  {fault}: {{at_s: 1}}\n")
    does = {"server_restart": "restarts", "server_crash": "crashes"}[fault]
    line = (
        f"{path}:8: faults.{fault}: {does} the server, which only a server the harness "
        "starts can take (--pg embedded or container); this run uses --dsn"
    )
    loaded = load_scenario(path, FIFO_ONLY)
    with pytest.raises(HarnessError) as refused:
        refuse_restart(loaded, "external")
    assert str(refused.value) == line
    server = Server(dsn="host=/nonexistent", provider="external")
    with pytest.raises(HarnessError) as refused:
        run_scenario(loaded, catalog(), server, tmp_path / "results", None, RunOptions())  # type: ignore[arg-type]
    assert str(refused.value) == line
    assert not (tmp_path / "results").exists()
    refuse_restart(loaded, "embedded")
    refuse_restart(loaded, "container")


def test_failures_are_drawn_from_the_seed_the_job_and_the_attempt() -> None:
    draws = [
        [attempt_fails(7, job, attempt, 0.3) for attempt in (1, 2, 3)] for job in range(1, 2001)
    ]
    assert draws == [[attempt_fails(7, job, a, 0.3) for a in (1, 2, 3)] for job in range(1, 2001)]
    rate = sum(map(sum, draws)) / (3 * 2000)
    assert 0.27 < rate < 0.33
    assert draws[:50] != [
        [attempt_fails(8, job, a, 0.3) for a in (1, 2, 3)] for job in range(1, 51)
    ]
    assert not any(attempt_fails(7, job, 1, 0.0) for job in range(1, 100))


CRASHED = """\
2026-12-05 09:34:53.738 UTC [1] LOG:  received immediate shutdown request
2026-12-05 09:34:53.744 UTC [1] LOG:  database system is shut down
2026-12-05 09:34:56.046 UTC [1] LOG:  starting PostgreSQL 17.10 on x86_64-pc-linux-gnu
2026-12-05 09:34:56.047 UTC [1] LOG:  listening on Unix socket "/tmp/.s.PGSQL.5432"
2026-12-05 09:34:56.050 UTC [14] LOG:  database system was interrupted; last known up at \
2026-12-05 09:34:50 UTC
2026-12-05 09:34:56.107 UTC [14] LOG:  database system was not properly shut down; \
automatic recovery in progress
2026-12-05 09:34:56.108 UTC [14] LOG:  redo starts at 0/1865C60
2026-12-05 09:34:56.108 UTC [14] LOG:  redo done at 0/188C770 system usage: CPU: user: 0.00 s
2026-12-05 09:34:56.109 UTC [12] LOG:  checkpoint starting: end-of-recovery immediate wait
2026-12-05 09:34:56.114 UTC [1] LOG:  database system is ready to accept connections
"""


def test_a_crash_recovery_is_read_from_the_servers_log() -> None:
    """The messages that say the start recovered from a crash, without their prefix; a
    start after a clean shutdown, or one with nothing to replay, says so or nothing."""
    assert crash_recovery(CRASHED) == [
        "database system was interrupted; last known up at 2026-12-05 09:34:50 UTC",
        "database system was not properly shut down; automatic recovery in progress",
        "redo starts at 0/1865C60",
        "redo done at 0/188C770 system usage: CPU: user: 0.00 s",
    ]
    clean = "2026-12-05 09:36:54.001 UTC [29] LOG:  database system was shut down at 09:36\n"
    assert crash_recovery(clean + "stand-in postgres:17: cluster made\n") == []
    nothing = "2026-12-05 09:36:54.001 UTC [14] LOG:  redo is not required\n"
    assert crash_recovery(nothing) == ["redo is not required"]
