from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from harness.analysis.faults import (
    kill_verdict,
    missed_faults,
    missed_library_faults,
    recovery_waits,
)
from harness.errors import RunFailed
from harness.queues.base import JobRecord, Ledger, TaskRun, WorkerReport
from harness.queues.contract.jobs import ledger_of
from harness.queues.contract.protocol import Record
from harness.queues.contract.supervisor import schedule
from harness.results.document import RepetitionEntry, RunDocument, ScenarioRef
from harness.run.books import check_books
from harness.run.faults import fault_summary, throughput_dips
from harness.scenario.model import BackendKill, Scenario, WorkerKill


def test_a_kill_every_n_seconds_comes_until_the_window_ends_in_order() -> None:
    every = WorkerKill(at_s=1.0, every_s=2.0, restart_after_s=0.5)
    once = WorkerKill(at_s=2.5)
    due = schedule((every, once), until_s=6.0)
    assert [(d.at_s, d.kill is once) for d in due] == [
        (1.0, False),
        (2.5, True),
        (3.0, False),
        (5.0, False),
    ]
    assert schedule((WorkerKill(at_s=7.0),), until_s=6.0) == []


T = datetime(2026, 12, 3, tzinfo=UTC)


def _record(job: int, status: str) -> JobRecord:
    done = status == "done"
    return JobRecord(job, 1, status, T, T if done else None, T if done else None)


def test_every_job_of_a_killed_run_is_in_exactly_one_outcome() -> None:
    """Finished once, finished twice, and unfinished by the state the library left it
    in: held running by the dead worker, failed by the library, queued still."""
    records = [
        _record(1, "done"),
        _record(2, "done"),
        _record(3, "not finished (running)"),
        _record(4, "not finished (failed)"),
        _record(5, "not finished (waiting)"),
    ]
    ledger = Ledger(records, claims=[1, 2, 2])  # job 2's task ran twice
    books = check_books(5, ledger, at_least_once=True, unfinished_measured=True)
    assert books.problems == [] and books.status == "not recovered: 3"
    killed = WorkerReport(0, kills=[1.25], kills_holding=[(100.0, [], 10)], restarts=1)
    summary = fault_summary(books, records, [killed, WorkerReport(1)], window_s=10.0)
    outcomes = [summary[o] for o in ("ok", "duplicated", "stranded", "abandoned", "waiting")]
    assert outcomes == [1, 1, 1, 1, 1] and (summary["lost"], summary["unexpected"]) == (0, [])
    assert summary["jobs"] == {"duplicated": [2], "stranded": [3], "abandoned": [4], "waiting": [5]}
    assert (summary["kills"], summary["killed_at_s"], summary["restarts"]) == (1, [1.25], 1)


def test_without_kills_an_unfinished_job_still_fails_the_books() -> None:
    ledger = Ledger([_record(1, "done"), _record(2, "not finished (running)")], claims=[1])
    assert check_books(2, ledger).problems == ["1 job(s) not done: 2"]


def test_a_job_done_in_its_table_but_never_reported_is_ok_when_its_worker_was_killed() -> None:
    """Killed between the library's commit and the worker's report: done once by the
    library's word, no moments of its own; without kills, the books fail it."""
    unreported = JobRecord(2, 1, "done", T, None, None)
    records = [_record(1, "done"), unreported]
    ledger = Ledger(records, claims=[1])
    books = check_books(2, ledger, at_least_once=True, unfinished_measured=True)
    assert (books.problems, books.unreported, books.status) == ([], [2], "balanced")
    killed = WorkerReport(0, kills=[0.5], kills_holding=[(100.0, [2], 10)], starts=[(2, 99.9, 10)])
    summary = fault_summary(books, records, [killed], window_s=5.0)
    assert (summary["ok"], summary["unreported"]) == (2, [2])
    # held at the kill by the worker's word, done by the library's, never started again:
    # finished before the kill, which interrupted nothing of it
    assert summary["interrupted"] == []
    assert kill_verdict(summary, LEFT) == (
        "no job held",
        "no killed worker held a job it had not finished",
    )
    assert check_books(2, ledger).problems == [
        "1 job(s) with timestamps out of order: 2",
        "1 job(s) done but never claimed by a worker: 2",
    ]


LEFT = {"then": "left", "after_s": None, "says": "stays running", "source": "its code"}
RETRIED = {"then": "retried", "after_s": 30.0, "says": "after a heartbeat", "source": "its docs"}
FAILED = {"then": "failed", "after_s": 60.0, "says": "the sweep aborts it", "source": "its code"}


def test_a_kills_interrupted_jobs_are_timed_to_their_next_start_by_any_worker() -> None:
    """Worker 0, killed at 1 s (the moment 100.0 on the run's clock), held jobs 1 and 2:
    worker 1 started 1 again 2.5 s later, and 2 never; 3, which no kill interrupted, was
    started twice (a rerun); 1's start before the kill is not its recovery, nor is 2's,
    read after the kill from the killed process (a busy machine's reader lags)."""
    records = [_record(1, "done"), _record(2, "not finished (running)"), _record(3, "done")]
    books = check_books(
        3, Ledger(records, claims=[1, 3]), at_least_once=True, unfinished_measured=True
    )
    killed = WorkerReport(0, kills=[1.0], kills_holding=[(100.0, [1, 2], 10)])
    # job 2's start, said before the kill, read after it: its own, never its recovery
    killed.starts = [(1, 99.0, 10), (2, 100.2, 10)]
    other = WorkerReport(1, starts=[(3, 99.2, 11), (1, 102.5, 11), (3, 103.0, 11)])
    summary = fault_summary(books, records, [killed, other], window_s=10.0)
    assert summary["interrupted"] == [
        {"job": 1, "worker": 0, "killed_at_s": 1.0, "started_again_after_s": 2.5, "outcome": "ok"},
        {
            "job": 2,
            "worker": 0,
            "killed_at_s": 1.0,
            "started_again_after_s": None,
            "outcome": "stranded",
        },
    ]
    assert (summary["started_again"], summary["recovery_p50_s"], summary["recovery_max_s"]) == (
        1,
        2.5,
        2.5,
    )
    assert summary["rerun"] == [3] and summary["starts_said"] is True
    # a promise of a retry after 30 s: job 2 not started again in the 9 s the window
    # left after the kill cannot be judged yet; in a window of 60 s, it is worse
    assert kill_verdict(summary, RETRIED)[0] == "not reached"
    assert kill_verdict({**summary, "window_s": 60.0}, RETRIED) == (
        "worse",
        "job 2 (killed at 1 s) stranded 59 s after the kill; documented: retried after 30 s",
    )
    assert kill_verdict(summary, LEFT)[0] == "better"  # job 1 was started again


def test_a_job_claimed_but_killed_before_its_start_was_said_is_interrupted() -> None:
    """The kill came between the library's claim and the adapter's `started`: job 2 is
    held running by the dead worker with no start said by anyone. It was interrupted
    (CI once read such a run as "no job held" beside a stranded job), timed from the
    last kill; job 3, waiting, was never taken."""
    records = [
        _record(1, "done"),
        _record(2, "not finished (running)"),
        _record(3, "not finished (waiting)"),
    ]
    books = check_books(
        3, Ledger(records, claims=[1]), at_least_once=True, unfinished_measured=True
    )
    killed = WorkerReport(
        0, kills=[0.3, 2.0], kills_holding=[(100.0, [], 10), (101.7, [], 12)], restarts=2
    )
    other = WorkerReport(1, starts=[(1, 99.5, 11)])
    summary = fault_summary(books, records, [killed, other], window_s=8.0)
    assert summary["interrupted"] == [
        {
            "job": 2,
            "worker": None,
            "killed_at_s": 2.0,
            "started_again_after_s": None,
            "outcome": "stranded",
        }
    ]
    assert kill_verdict(summary, LEFT) == (
        "as promised",
        "job 2 (held unsaid; the last kill at 2 s) not started again in 6 s; documented: left",
    )
    assert kill_verdict(summary, RETRIED)[0] == "not reached"
    # where no adapter says its starts, which jobs a kill held stays unknown
    silent = fault_summary(books, records, [killed, WorkerReport(1)], window_s=8.0)
    assert silent["interrupted"] == [] and kill_verdict(silent, LEFT)[0] == "not said"


def _interrupted(again: float | None, outcome: str, at_s: float = 1.0) -> dict[str, Any]:
    held = [
        {
            "job": 7,
            "worker": 0,
            "killed_at_s": at_s,
            "started_again_after_s": again,
            "outcome": outcome,
        }
    ]
    return {"kills": 1, "starts_said": True, "interrupted": held, "window_s": 300.0}


@pytest.mark.parametrize(
    ("promise", "again", "outcome", "verdict"),
    [
        (RETRIED, 31.0, "ok", "as promised"),
        (RETRIED, 50.0, "ok", "as promised"),  # 1.5 x 30 + 5: the bound itself
        (RETRIED, 50.5, "ok", "worse"),
        (RETRIED, None, "abandoned", "worse"),
        (RETRIED, None, "lost", "worse"),
        (FAILED, None, "abandoned", "as promised"),
        (FAILED, 61.0, "ok", "better"),
        (FAILED, None, "stranded", "worse"),
        (LEFT, None, "stranded", "as promised"),
        (LEFT, None, "abandoned", "better"),
        (LEFT, None, "lost", "worse"),
    ],
)
def test_a_kills_verdict_reads_each_interrupted_job_beside_the_promise(
    promise: dict[str, Any], again: float | None, outcome: str, verdict: str
) -> None:
    assert kill_verdict(_interrupted(again, outcome), promise)[0] == verdict


def test_a_kill_has_no_verdict_without_a_promise_starts_or_a_job_held() -> None:
    summary = _interrupted(None, "stranded")
    assert kill_verdict({**summary, "kills": 0}, LEFT) == ("", "")
    assert kill_verdict(summary, None)[0] == "no promise"
    assert kill_verdict({**summary, "starts_said": False}, LEFT)[0] == "not said"
    assert kill_verdict({**summary, "interrupted": []}, LEFT)[0] == "no job held"
    # the worst job decides, and the first three are named
    held = [{**summary["interrupted"][0], "job": job} for job in range(1, 6)]
    verdict, why = kill_verdict({**summary, "interrupted": held}, RETRIED)
    assert verdict == "worse" and why.endswith("; and 2 more") and why.count("job ") == 3


def test_a_backend_kill_comes_per_s_times_a_second_through_its_window() -> None:
    assert BackendKill(from_s=1.0, for_s=1.0, per_s=4).moments() == [1.0, 1.25, 1.5, 1.75]
    assert BackendKill(from_s=0.5, for_s=1.1, per_s=2).moments() == [0.5, 1.0, 1.5]
    assert BackendKill(from_s=2.0, for_s=0.1, per_s=1).moments() == [2.0]


def test_the_summary_counts_sessions_terminated_and_each_exit_with_its_reason() -> None:
    records = [_record(1, "done"), _record(2, "not finished (waiting)")]
    books = check_books(
        2, Ledger(records, claims=[1]), at_least_once=True, unfinished_measured=True
    )
    exited = WorkerReport(0, exits=[(0.4, "adapter x exited: its connection is lost")], restarts=1)
    summary = fault_summary(books, records, [exited], 5.0, terminations=[(0.3, 3), (0.8, 0)])
    assert (summary["backend_kills"], summary["sessions_terminated"]) == (2, 3)
    assert summary["terminated_at_s"] == [[0.3, 3], [0.8, 0]]
    assert (summary["exits"], summary["restarts"], summary["kills"]) == (1, 1, 0)
    assert summary["exited_at_s"] == [[0.4, "adapter x exited: its connection is lost"]]
    assert (summary["ok"], summary["waiting"], summary["jobs"]) == (1, 1, {"waiting": [2]})


def test_a_job_done_whose_library_record_is_gone_is_ok_and_said_under_faults() -> None:
    """A worker reported job 2 done; after the fault its library holds no record of it
    (and its event said no moments): without faults the harness cannot place it, and the
    run fails; under them it is done once, `unrecorded`, and kept out of jobs.csv."""
    record = {"event": "record", "id": "1", "job": 1, "tenant": 1, "state": "done"}
    held = [Record.model_validate({**record, "enqueued_at": T.isoformat()})]
    runs = [TaskRun(1, 1, "1", None, T, T), TaskRun(2, 1, "2")]
    reports = [WorkerReport(0, task_runs=runs)]
    with pytest.raises(RunFailed, match=r"job 2 \(library id 2\): its library holds no record"):
        ledger_of(held, reports)
    ledger = ledger_of(held, reports, unrecorded_ok=True)
    assert ledger.unrecorded == [2] and [r.status for r in ledger.records] == ["done", "done"]
    books = check_books(2, ledger, at_least_once=True, unfinished_measured=True)
    assert (books.problems, books.unrecorded, books.status) == ([], [2], "balanced")
    summary = fault_summary(books, ledger.records, reports, 5.0)
    assert (summary["ok"], summary["unrecorded"]) == (2, [2])


def test_library_faults_that_never_happened_are_said_per_repetition() -> None:
    """A crash at 5 s and four backend kills from 1 s, in a repetition that did every job
    by 1.2 s: the crash never came and three kills did not; one that had them all is
    not named."""
    planned = {
        "backend_kills": [{"from_s": 1, "for_s": 2, "per_s": 2}],
        "server_crash": {"at_s": 5},
    }
    short = {"backend_kills": 1, "server_crashes": 0}
    whole = {"backend_kills": 4, "server_crashes": 1}
    (warning,) = missed_library_faults(*_faulted(planned, short, whole))
    assert warning.startswith(
        "procrastinate x2 #1: the server crash at 5 s, 3 of 4 backend kills never happened"
    )


def test_a_connection_exhaustion_that_never_came_is_said() -> None:
    planned = {"connection_exhaustion": {"from_s": 3, "for_s": 1}}
    held = {"connection_exhaustions": 1, "connections_held": 94}
    (warning,) = missed_library_faults(*_faulted(planned, {"connection_exhaustions": 0}, held))
    assert warning.startswith(
        "procrastinate x2 #1: the connection exhaustion from 3 s never happened"
    )


def test_a_connection_exhaustion_on_the_harnesss_strategy_that_never_came_is_said() -> None:
    """The same for fifo's record (run.json's `faults`): every job done before 3 s."""
    planned = {"connection_exhaustion": {"from_s": 3, "for_s": 1}}
    document, scenario = _faulted(planned, {})
    never = {"crashes": [], "connection_exhaustions": 0}
    document.repetitions[0] = document.repetitions[0].model_copy(
        update={"strategy": "fifo", "library_faults": None, "faults": never}
    )
    (warning,) = missed_faults(document, scenario)
    assert warning.startswith("fifo x2 #1: the connection exhaustion from 3 s never happened")
    came = {"crashes": [], "connection_exhaustions": 1}
    document.repetitions[0] = document.repetitions[0].model_copy(update={"faults": came})
    assert missed_faults(document, scenario) == []


def test_a_worker_kill_planned_after_the_run_ended_is_said() -> None:
    """Two kills planned (worker 0's from 1 s, every 2 s; worker 1's at 1.5 s): a
    repetition done by 0.8 s had neither, and is named; one that had both is not (worker
    0's repeats are as many as the run's length allows, none of them owed)."""
    planned = {"worker_kills": [{"at_s": 1, "every_s": 2}, {"worker": 1, "at_s": 1.5}]}
    (warning,) = missed_library_faults(*_faulted(planned, {"kills": 0}, {"kills": 2}))
    assert warning.startswith("procrastinate x2 #1: 2 of 2 worker kills never happened")


def _faulted(planned: dict[str, Any], *done: dict[str, Any]) -> tuple[RunDocument, Scenario]:
    """A run of a scenario with the `planned` faults, a repetition for each of `done`
    (its run.json library_faults)."""
    scenario = Scenario.model_validate(
        {
            "name": "s",
            "strategies": ["procrastinate"],
            "workers": 2,
            "timeout_s": 10,
            "tenant_groups": [{"name": "a", "tenants": 1, "jobs_per_tenant": 5, "duration_ms": 5}],
            "faults": planned,
        }
    )
    entry: dict[str, Any] = {
        "strategy": "procrastinate",
        "workers": 2,
        "jobs": 5,
        "empty_polls": 0,
        "lost_races": 0,
        "books": "balanced",
        "started_at": T.isoformat(),
        "finished_at": T.isoformat(),
    }
    document = RunDocument(
        run_id="r",
        started_at=T.isoformat(),
        scenario=ScenarioRef(name="s", path="s.yaml", sha256="0", seed=1),
        repetitions=[
            RepetitionEntry.model_validate({**entry, "repetition": n, "library_faults": faults})
            for n, faults in enumerate(done, start=1)
        ],
    )
    return document, scenario


def test_a_kills_throughput_dip_is_timed_until_it_is_back_near_its_median() -> None:
    """Ten jobs a second until the kill at 3 s (the moment 3.0), none until 4.55, then
    ten a second again: back at 90 % of the median (10/s) with the first whole second
    after the kill that holds 9 jobs, (4.4, 5.4]: 1.4 s after the kill, 0 at its lowest."""
    before = [round(0.05 + k * 0.1, 2) for k in range(30)]  # 0.05 ... 2.95
    again = [round(4.55 + k * 0.1, 2) for k in range(35)]  # 4.55 ... 7.95
    killed = WorkerReport(0, kills=[3.0], kills_holding=[(3.0, [], 10)], finishes=before)
    other = WorkerReport(1, finishes=again)
    (dip,) = throughput_dips([killed, other], offset_s=0.25)
    assert dip == {
        "killed_at_s": 3.0,
        "killed_at": "1970-01-01T00:00:03.250000+00:00",  # the moment on the server's clock
        "before_per_s": 10,
        "lowest_per_s": 0,
        "back_after_s": 1.4,
    }
    # a kill too soon after the first job has no median to compare with
    early = WorkerReport(0, kills=[0.5], kills_holding=[(0.5, [], 10)], finishes=before)
    assert throughput_dips([early])[0]["before_per_s"] is None


def test_each_classs_wait_before_a_kill_and_during_its_recovery() -> None:
    """Killed at T+3 s, throughput back 1 s later: the jobs started before T+3 s are
    `before`, those enqueued before T+4 s and started after T+3 s `during` (however late
    they started), one enqueued after T+4 s neither; per class."""

    def job(tenant_class: str, enqueued_s: float, started_s: float) -> dict[str, Any]:
        at = lambda s: T + timedelta(seconds=s)  # noqa: E731
        return {
            "strategy": "procrastinate",
            "workers": 2,
            "repetition": 1,
            "tenant_class": tenant_class,
            "enqueued_at": at(enqueued_s),
            "started_at": at(started_s),
        }

    jobs = pd.DataFrame(
        [
            job("large", 0.0, 0.5),
            job("large", 0.0, 2.5),
            job("small", 2.0, 2.1),
            job("large", 0.0, 3.5),
            job("small", 2.9, 3.9),
            job("small", 3.1, 3.7),
            job("small", 3.2, 6.0),  # queued in the recovery, started after it
            job("small", 4.5, 4.6),  # enqueued after it
        ]
    )
    dip = {"killed_at_s": 3.0, "killed_at": (T + timedelta(seconds=3)).isoformat()}
    kill = {"worker_kills": [{"at_s": 3}]}
    document, _ = _faulted(kill, {"dips": [{**dip, "back_after_s": 1.0}]})
    table = recovery_waits(document, jobs)
    assert table is not None
    rows = {row["tenant_class"]: row for row in table.to_dict("records")}
    assert rows["large"]["jobs_before"] == 2 and rows["large"]["wait_p50_before_s"] == 1.5
    assert (rows["large"]["jobs_during"], rows["large"]["wait_p50_during_s"]) == (1, 3.5)
    assert (rows["small"]["jobs_before"], rows["small"]["wait_p50_before_s"]) == (1, 0.1)
    assert (rows["small"]["jobs_during"], rows["small"]["wait_p50_during_s"]) == (3, 1.0)
    assert rows["small"]["recovery_s"] == 1.0
    # never back: the recovery runs to the last start; a dip without killed_at (a run
    # from before it was recorded) gives no rows
    document, _ = _faulted(kill, {"dips": [{**dip, "back_after_s": None}]})
    table = recovery_waits(document, jobs)
    assert table is not None and set(table["recovery_s"]) == {3.0}  # to the start at T+6 s
    old, _ = _faulted(kill, {"dips": [{"killed_at_s": 3.0}]})
    assert recovery_waits(old, jobs) is None
