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
from harness.server.kinds import ProviderKind, Server

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


@pytest.mark.parametrize("provider", ["external", "container"])
def test_a_server_restart_is_refused_on_other_providers_in_one_wording(
    write_yaml, tmp_path: Path, provider: ProviderKind
) -> None:
    """One rule, one function, one line: the command's refusal before any server starts
    (tests/unit/test_scenario_refusals.py) is the runner's, which refuses it before the
    run folder is made."""
    path = write_yaml(BASE + "faults:\n  server_restart: {at_s: 1}\n")
    line = (
        f"{path}:8: faults.server_restart: restarts the server, which only the embedded "
        f"provider can do (--pg embedded); this run uses --pg {provider}"
    )
    loaded = load_scenario(path, FIFO_ONLY)
    with pytest.raises(HarnessError) as refused:
        refuse_restart(loaded, provider)
    assert str(refused.value) == line
    server = Server(dsn="host=/nonexistent", provider=provider)
    with pytest.raises(HarnessError) as refused:
        run_scenario(loaded, catalog(), server, tmp_path / "results", None, RunOptions())  # type: ignore[arg-type]
    assert str(refused.value) == line
    assert not (tmp_path / "results").exists()
    refuse_restart(loaded, "embedded")


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
