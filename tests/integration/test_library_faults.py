"""A library's faults: faults.worker_kills (its worker process group killed mid-run,
started again or not as a supervisor would) and faults.backend_kills (its workers'
sessions terminated); every job counted once, what the library did not recover measured,
never a failed run. On the fixture adapter (tests/fixtures/adapters/pyqueue), whose
claim marks a job `running` and which has no recovery at all: a job its killed worker
held stays running, the rest is done by the restarted worker."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.run.faults import OUTCOMES
from harness.server.kinds import Server
from tests.conftest import harness_cli
from tests.integration.test_adapters import FIXTURES, ON_PATH

JOBS = 60  # 30 ms each, two at a time: about a second of work


def killed_run(
    server: Server, tmp_path: Path, kill: str, timeout_s: float, strategy: str = "pyqueue"
) -> dict:
    """A run with `kill` as its one worker kill: run.json's repetition entry."""
    return faulted_run(server, tmp_path, f"worker_kills: [{kill}]", timeout_s, strategy)


def faulted_run(
    server: Server | None,
    tmp_path: Path,
    faults: str,
    timeout_s: float,
    strategy: str = "pyqueue",
    jobs: int = JOBS,
    duration_ms: float = 30,
    extra: str = "",
) -> dict:
    """The one repetition's entry of `faulted_runs`."""
    (entry,) = faulted_runs(server, tmp_path, faults, timeout_s, strategy, jobs, duration_ms, extra)
    return entry


def faulted_runs(
    server: Server | None,
    tmp_path: Path,
    faults: str,
    timeout_s: float,
    strategy: str = "pyqueue",
    jobs: int = JOBS,
    duration_ms: float = 30,
    extra: str = "",
) -> list[dict]:
    """`harness run` of a repetition (of the fixture adapter, by default) with `faults`
    (a line of YAML in the faults mapping): run.json's repetition entry. Through the
    CLI, as the adapter tests run the fixture: its `python3` must be the harness's, on
    the PATH of every process the run starts (a fork server started earlier has the
    suite's PATH). Without `server`, on an embedded server of its own (a crash needs one
    the harness started). `strategy` may be several, comma-separated: an entry each;
    `jobs` of `duration_ms` each, two at a time; `extra`, lines of YAML at the top level
    (a long_transaction)."""
    path = tmp_path / "kills.yaml"
    path.write_text(
        f"""\
name: kills
strategies: [{strategy}]
workers: 2
repetitions: 1
poll_interval_ms: 50
timeout_s: {timeout_s}
faults:
  {faults}
{extra}tenant_groups:
  - {{name: large, tenants: 1, jobs_per_tenant: {jobs}, duration_ms: {duration_ms}}}
"""
    )
    results = tmp_path / "results"
    on = ["--dsn", server.dsn] if server is not None else []
    options = ["--adapters-dir", str(FIXTURES), *on, "--results-dir", str(results)]
    # each strategy's window and its library's start-up (seconds each), on a busy machine
    bound = 180 + len(strategy.split(",")) * (timeout_s + 15)
    done = harness_cli("run", str(path), *options, "--no-plots", timeout=bound, env=ON_PATH)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = (results / "latest").resolve()  # --no-plots: every table, no figure
    document = json.loads((folder / "run.json").read_text())
    entries = list(document["repetitions"])
    # summary.csv summarises the jobs the workers reported: a library whose sessions
    # were cut before its first job (pgqueuer, its worker slow to start on a busy
    # machine) reports none, a measured outcome whose table is library-faults.csv's.
    reported = any(entry["jobs"] for entry in entries)
    assert (folder / "summary.csv").is_file() == reported, entries
    assert (folder / "library-faults.csv").is_file() and not list(folder.glob("*.png"))
    said = f"Figures not drawn: harness report {folder} draws them."
    assert said in (folder / "report.html").read_text()
    return entries


def kill_verdicts(tmp_path: Path) -> list[dict]:
    """library-faults.csv of `faulted_runs`'s run: a row per repetition."""
    table = pd.read_csv(tmp_path / "results" / "latest" / "library-faults.csv")
    return list(table.to_dict("records"))


def test_a_killed_worker_restarted_leaves_only_the_jobs_it_held(
    server: Server, tmp_path: Path
) -> None:
    # The window: the run waits timeout_s for a recovery pyqueue never makes. The
    # restarted worker must do every other job within it: 0.6 s of work, after a start
    # that took 3.3 s beside stress-ng and the suite (load 6.5; 4 s was too short then).
    entry = killed_run(server, tmp_path, "{at_s: 0.3, restart_after_s: 0.2}", timeout_s=8)
    kills = entry["library_faults"]
    assert (kills["kills"], kills["restarts"]) == (1, 1)
    # pyqueue has no recovery: the jobs the killed process held (one per worker thread,
    # at most; none in a thread between two jobs) stay running; the restarted worker did
    # every other one, once. Whether a thread held one at the kill is the kill's luck:
    # what is certain is that each job is in one outcome.
    held = kills["stranded"]
    assert 0 <= held <= 2, kills
    assert (kills["ok"], kills["duplicated"], kills["abandoned"], kills["waiting"]) == (
        JOBS - held,
        0,
        0,
        0,
    )
    assert len(kills["jobs"].get("stranded", [])) == held
    assert entry["books"] == (f"not recovered: {held}" if held else "balanced")
    # the jobs the kill interrupted, by its `started` events: none started again (a job
    # done before its report was lost with the worker is ok, `unreported`), and pyqueue
    # promises no more (its manifest: `left`)
    interrupted = kills["interrupted"]
    assert kills["starts_said"] and kills["started_again"] == 0 and kills["rerun"] == []
    for row in interrupted:
        assert row["started_again_after_s"] is None, interrupted
        assert row["outcome"] == "stranded" or row["job"] in kills["unreported"], kills
    (verdict,) = kill_verdicts(tmp_path)
    assert verdict["promise"] == "left"
    assert verdict["verdict"] == ("as promised" if held else "no job held"), verdict
    # jobs.csv: the finished ones the workers reported (one killed between pyqueue's
    # commit and its report is ok, but has no moments of its own: `unreported`)
    unreported = kills["unreported"]
    assert len(unreported) <= 2 and entry["jobs"] == JOBS - held - len(unreported)


def test_a_killed_workers_jobs_given_back_are_started_again_and_timed(
    server: Server, tmp_path: Path
) -> None:
    """holds_claim claims, works and finishes each job in one transaction: the jobs its
    killed worker held (killed at the first moment from 1 s that it holds one: 200 ms
    each, with 4 s of work queued however late a busy machine let them begin) are waiting
    again once its sessions end, and its restarted worker starts each again. Each is timed
    from the kill to that start, and judged against its manifest's promise (retried after
    1 s: within 1.5 x 1 + 5 s, as promised). A job it had committed, but whose report the
    kill cut off, was finished before the kill: `unreported`, not interrupted (fcU,
    2026-12-05: job 9 so, job 10 interrupted)."""
    kill = "worker_kills: [{at_s: 1.0, restart_after_s: 0.2, holding: true}]"
    jobs = 40  # four seconds of work
    entry = faulted_run(server, tmp_path, kill, 20, "holds_claim", jobs=jobs, duration_ms=200)
    kills = entry["library_faults"]
    assert sum(kills[o] for o in OUTCOMES) == jobs and kills["ok"] == jobs, kills
    interrupted = kills["interrupted"]
    # the kill came when its events said it held one or two: each was cut mid-work, or
    # had committed a moment before the kill (its report lost with the worker)
    finished_first = {row["job"] for row in interrupted} & set(kills["unreported"])
    assert not finished_first, kills
    assert 1 <= len(interrupted) + len(kills["unreported"]) <= 2, kills
    again = [row["started_again_after_s"] for row in interrupted]
    assert all(after is not None and after > 0 for after in again), interrupted
    assert kills["started_again"] == len(interrupted)
    (verdict,) = kill_verdicts(tmp_path)
    assert verdict["promise"] == "retried after 1 s"
    if not interrupted:  # both had committed (a race of a few ms on each slot)
        assert verdict["verdict"] == "no job held", verdict
        return
    assert kills["recovery_max_s"] == max(again)
    assert verdict["verdict"] == ("as promised" if max(again) <= 6.5 else "worse"), verdict


def test_a_kill_that_waits_for_a_held_job_interrupts_one(server: Server, tmp_path: Path) -> None:
    """`holding`: from 0 s the kill waits for the first poll at which the worker holds a
    job it said it started: holds_claim's jobs last 0.6 s, so at that poll one or two
    are held, and the kill interrupts them (a job finishing in the same millisecond is
    the only way out, and then the other slot's is still held); holds_claim gives them
    back and its restarted worker does them: every job done once."""
    kill = "worker_kills: [{at_s: 0, restart_after_s: 0.2, holding: true}]"
    entry = faulted_run(server, tmp_path, kill, 20, "holds_claim", jobs=4, duration_ms=600)
    kills = entry["library_faults"]
    assert kills["kills"] == 1 and 1 <= len(kills["interrupted"]) <= 2, kills
    assert kills["ok"] == 4 and kills["started_again"] == len(kills["interrupted"]), kills


@pytest.mark.thorough  # a kill that never comes: a variant of the one above
def test_a_kill_waiting_for_a_held_job_never_comes_if_starts_are_never_said(
    server: Server, tmp_path: Path
) -> None:
    """An adapter that says no starts never holds a job by its events: the kill never
    happens, the run ends when its jobs are done, and the report says the kill missed."""
    kill = "worker_kills: [{at_s: 0, holding: true}]"
    entry = faulted_run(server, tmp_path, kill, 20, "says_no_starts", jobs=10)
    kills = entry["library_faults"]
    assert (kills["kills"], kills["ok"]) == (0, 10), kills
    report = (tmp_path / "results" / "latest" / "report.html").read_text()
    assert "0 of 1 worker kills never happened" not in report
    assert "1 of 1 worker kills never happened" in report


@pytest.mark.thorough  # make test kills and restarts; a worker left dead is the matrix's
def test_a_killed_worker_left_dead_leaves_its_queue_to_the_window(
    server: Server, tmp_path: Path
) -> None:
    """No restart: nothing takes the queue up again; the run ends at timeout_s, not
    failed, with every job counted: done before the kill, held by it, or still waiting."""
    entry = killed_run(server, tmp_path, "{at_s: 0.3, restart: false}", timeout_s=3)
    kills = entry["library_faults"]
    assert (kills["kills"], kills["restarts"], kills["window_s"]) == (1, 0, 3)
    assert 0 <= kills["stranded"] <= 2, kills
    assert kills["ok"] + kills["stranded"] + kills["waiting"] == JOBS
    assert kills["ok"] > 0 and kills["waiting"] > 0  # it did some work; the rest waits
    assert kills["duplicated"] == kills["abandoned"] == 0


@pytest.mark.libraries
@pytest.mark.parametrize("library", ["procrastinate", "pgqueuer"])
def test_a_librarys_killed_worker_is_restarted_and_every_job_counted(
    server: Server, tmp_path: Path, library: str
) -> None:
    """A real library through its own worker: killed once, started again; whatever its
    recovery did, every job is in one outcome (the figures: docs/faults.md)."""
    entry = killed_run(
        server, tmp_path, "{at_s: 0.5, restart_after_s: 0.3}", timeout_s=8, strategy=library
    )
    kills = entry["library_faults"]
    assert (kills["kills"], kills["restarts"]) == (1, 1), kills
    assert sum(kills[o] for o in OUTCOMES) == JOBS, kills
    assert kills["ok"] > 0  # the restarted worker took the queue up again
    # Its adapter says its starts; the jobs the kill interrupted are judged against its
    # manifest's promise: procrastinate leaves a dead worker's job `doing` (as promised);
    # pgqueuer retries it after its heartbeat_timeout, 30 s, which this 8 s window does
    # not reach. A job done before the kill took its report is no job held.
    assert kills["starts_said"], kills
    held = [
        row
        for row in kills["interrupted"]
        if row["started_again_after_s"] is not None or row["outcome"] not in ("ok", "duplicated")
    ]
    expected = {"procrastinate": "as promised", "pgqueuer": "not reached"}[library]
    (row,) = kill_verdicts(tmp_path)
    assert row["verdict"] == (expected if held else "no job held"), (row, kills["interrupted"])


@pytest.mark.libraries
def test_dbos_recovery_takes_up_its_killed_workers_workflows_at_its_relaunch(
    server: Server, tmp_path: Path
) -> None:
    """dbos_recovery's promise (dbos.toml): its worker process, started again with the
    executor id it had, recovers the workflows it left pending at its launch. Both slots
    mid-job (200 ms each) at the kill, 1.5 s in, with 6 s of work queued: each
    interrupted job started again, and every job done. Done once, but for a workflow
    whose body had returned and whose outcome DBOS had not yet written at the kill (a
    run in CI had 59 of 60 ok; docs/faults.md): DBOS restarts a pending workflow from
    the beginning and skips only the steps it recorded ("How Workflows Work"), and
    this one has no step, so it runs again. Such a job is duplicated without the kill
    having interrupted it (`rerun`), one per slot at most."""
    kill = "worker_kills: [{at_s: 1.5, restart_after_s: 0.2}]"
    jobs = 60
    entry = faulted_run(server, tmp_path, kill, 30, "dbos_recovery", jobs=jobs, duration_ms=200)
    kills = entry["library_faults"]
    duplicated = kills["jobs"].get("duplicated", [])
    # a string, which pytest prints whole (a dict's repr it cuts at 240 characters)
    seen = f"not ok: {kills['jobs']}; rerun: {kills['rerun']}; held: {kills['interrupted']}"
    assert sum(kills[o] for o in OUTCOMES) == jobs, seen
    assert kills["ok"] + len(duplicated) == jobs, seen
    assert len(duplicated) <= 2 and set(duplicated) <= set(kills["rerun"]), seen
    interrupted = kills["interrupted"]
    assert interrupted and kills["started_again"] == len(interrupted), kills
    (row,) = kill_verdicts(tmp_path)
    assert row["promise"] == "retried after 10 s", row


def test_a_job_dropped_run_twice_or_never_enqueued_is_measured_each_in_its_own_outcome(
    server: Server, tmp_path: Path
) -> None:
    """The ledger's categories on purpose, each from one process of two slots: drops_a_job
    deletes its first claim (lost: gone from its table, never run); twice reports each
    slot's first job twice (duplicated); phantom reports, after its first job, one no one
    enqueued (unexpected: in no outcome). A kill makes the run measure them rather than
    fail (without faults, each fails the books); it comes at 2.5 s, when a worker that
    took its first job at the start has long done the rest (which it may not have, on a
    busy machine: the outcomes of those it had not are counted too)."""
    kill = "worker_kills: [{at_s: 2.5, restart: false}]"
    dropped, twice, phantom = faulted_runs(server, tmp_path, kill, 3, "drops_a_job, twice, phantom")
    for entry in (dropped, twice, phantom):
        faults = entry["library_faults"]
        assert sum(faults[o] for o in OUTCOMES) == JOBS, faults
    faults = dropped["library_faults"]
    assert faults["lost"] == 1 and faults["unexpected"] == [], faults
    assert len(faults["jobs"]["lost"]) == faults["lost"] and faults["duplicated"] == 0
    assert f"lost: {faults['lost']}" in dropped["books"]
    faults = twice["library_faults"]
    assert faults["duplicated"] >= 1 and faults["lost"] == 0 and faults["unexpected"] == []
    faults = phantom["library_faults"]
    assert len(faults["unexpected"]) == 1 and faults["lost"] == faults["duplicated"] == 0
    assert all(job > 1_000_000_000 for job in faults["unexpected"]), faults
    assert f"unexpected: {len(faults['unexpected'])}" in phantom["books"]
    assert phantom["jobs"] <= JOBS  # jobs.csv: enqueued jobs only
