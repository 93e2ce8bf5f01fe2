"""Fault scenarios on the real server: crashes with and without a lease, failing jobs
and a server restart. Counts only; times only as lower bounds the configuration implies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.results.jobs import load_jobs
from harness.scenario.distributions import attempt_fails
from harness.server.kinds import Server
from tests.integration.conftest import run_yaml

BASE = """\
name: faults-test
workers: 3
strategies: [fifo]
repetitions: 1
poll_interval_ms: 5
timeout_s: 30
tenant_groups:
  - {name: a, tenants: 2, jobs_per_tenant: 30, duration_ms: 60}
"""
TOTAL = 60
CRASHES = "faults:\n  crashes: [{worker: 1, at_s: 0.3}, {worker: 2, at_s: 0.6}]\n"


def only_repetition(outcome: Any) -> dict[str, Any]:
    (entry,) = json.loads((outcome.folder.path / "run.json").read_text())["repetitions"]
    return entry  # type: ignore[no-any-return]


def test_a_crash_without_a_lease_leaves_its_job_stuck(server: Server, tmp_path: Path) -> None:
    outcome = run_yaml(server, tmp_path, BASE + CRASHES)
    entry = only_repetition(outcome)
    faults = entry["faults"]
    assert (faults["stuck"], faults["lost"], faults["duplicates"]) == (2, 0, 0)
    assert entry["books"] == "stuck: 2"
    assert sorted(faults["stuck_jobs"]) == sorted(c["job"] for c in faults["crashes"])
    assert len(load_jobs(outcome.folder.path)) == TOTAL - 2
    assert "| 2 | 0 | 0 | 2 |" in (outcome.folder.path / "summary.md").read_text()


def test_a_lease_recovers_a_crashed_workers_job(server: Server, tmp_path: Path) -> None:
    outcome = run_yaml(server, tmp_path, BASE + CRASHES + "  lease: {seconds: 0.5}\n")
    entry = only_repetition(outcome)
    faults = entry["faults"]
    assert (faults["lost"], faults["stuck"], entry["books"]) == (0, 0, "balanced")
    assert faults["duplicates"] == 2  # each crashed job's work started twice
    assert len(load_jobs(outcome.folder.path)) == TOTAL
    recoveries = [crash["recovery_s"] for crash in faults["crashes"]]
    assert len(recoveries) == 2
    assert all(r is not None and r >= 0.5 - 0.02 for r in recoveries), recoveries


def test_dead_letters_are_the_jobs_whose_every_attempt_failed(
    server: Server, tmp_path: Path
) -> None:
    text = BASE.replace(
        "duration_ms: 60}",
        "duration_ms: 5, failure_probability: 0.4, max_attempts: 2, backoff_ms: 20}",
    )
    outcome = run_yaml(server, tmp_path, text)
    faults = only_repetition(outcome)["faults"]
    # One enqueuer: the jobs get ids 1..60 in order, so the draws say which ones die.
    expected = [
        job for job in range(1, TOTAL + 1) if all(attempt_fails(1, job, a, 0.4) for a in (1, 2))
    ]
    assert expected and faults["dead_jobs"] == expected
    retried = [job for job in range(1, TOTAL + 1) if attempt_fails(1, job, 1, 0.4)]
    assert faults["retried_done"] == len(retried) - len(expected)
    jobs = load_jobs(outcome.folder.path)
    assert (jobs["tenant_class"].str.endswith("+dead")).sum() == len(expected)


def test_a_server_restart_mid_run_completes_with_balanced_books(
    server: Server, tmp_path: Path
) -> None:
    outcome = run_yaml(server, tmp_path, BASE + "faults:\n  server_restart: {at_s: 0.8}\n")
    entry = only_repetition(outcome)
    faults = entry["faults"]
    assert (entry["books"], faults["lost"], faults["server_restarts"]) == ("balanced", 0, 1)
    assert faults["reconnects"] >= 1
    assert len(load_jobs(outcome.folder.path)) == TOTAL
