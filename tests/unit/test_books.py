"""The books, one check for every repetition: without faults every job done exactly once;
with them, stuck, duplicated, retried and dead-lettered jobs told apart from lost ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from harness.queues.base import JobRecord, Ledger
from harness.run.books import check_books

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(
    job_id: int,
    status: str = "done",
    start: float = 1,
    finish: float = 2,
    failed: int = 0,
    dead_lettered: bool = False,
) -> JobRecord:
    finished = T0 + timedelta(seconds=finish) if status in ("done", "dead") else None
    started = T0 + timedelta(seconds=start) if status != "queued" else None
    return JobRecord(job_id, 1, status, T0, started, finished, 0, 1.0, failed, dead_lettered)


def problems(enqueued: int, records: list[JobRecord], claims: list[int]) -> list[str]:
    return check_books(enqueued, Ledger(records, claims)).problems


def test_balanced_books_have_no_problems() -> None:
    assert problems(2, [job(1), job(2)], [2, 1]) == []


def test_a_lost_job_is_caught() -> None:
    assert problems(3, [job(1), job(2)], [1, 2]) == [
        "3 jobs enqueued but 2 in the table",
        "1 job(s) enqueued but not in the table: 3",
    ]


def test_a_job_left_running_is_caught() -> None:
    assert problems(2, [job(1), job(2, "running")], [1, 2]) == ["1 job(s) not done: 2"]


def test_a_job_claimed_twice_is_caught() -> None:
    assert problems(2, [job(1), job(2)], [1, 2, 2]) == ["1 job(s) claimed more than once: 2"]


def test_a_job_no_worker_reported_is_caught() -> None:
    assert problems(2, [job(1), job(2)], [1]) == ["1 job(s) done but never claimed by a worker: 2"]


def test_a_claim_of_a_job_not_in_the_table_is_caught() -> None:
    assert problems(1, [job(1)], [1, 7]) == ["1 job(s) claimed but not in the table: 7"]


def test_timestamps_out_of_order_are_caught() -> None:
    assert problems(1, [job(1, start=3, finish=2)], [1]) == [
        "1 job(s) with timestamps out of order: 1"
    ]


def test_long_lists_are_cut_short() -> None:
    records = [job(i, "queued") for i in range(1, 9)]
    assert problems(8, records, list(range(1, 9))) == [
        "8 job(s) not done: 1, 2, 3, 4, 5 and 3 more"
    ]


def test_without_a_lease_a_killed_workers_job_is_stuck_not_lost() -> None:
    records = [job(1), job(2, "running"), job(3)]
    books = check_books(3, Ledger(records, [1, 2, 3]), held=frozenset({2}))
    assert (books.problems, books.stuck, books.lost, books.status) == ([], [2], [], "stuck: 1")


def test_a_job_nobody_holds_left_running_is_lost() -> None:
    books = check_books(2, Ledger([job(1), job(2, "running")], [1, 2]))
    assert books.lost == [2]
    assert books.problems == ["1 job(s) not done: 2"]


def test_a_second_claim_is_a_duplicate_with_a_lease_and_a_problem_without() -> None:
    ledger = Ledger([job(1), job(2)], [1, 2, 2])
    leased = check_books(2, ledger, frozenset({2}), at_least_once=True)
    assert (leased.duplicates, leased.problems) == ([2], [])
    assert check_books(2, ledger).problems == ["1 job(s) claimed more than once: 2"]


def test_retried_and_dead_jobs_are_counted() -> None:
    records = [job(1, failed=1), job(2, "dead", failed=3, dead_lettered=True)]
    books = check_books(2, Ledger(records, [1, 1, 2, 2, 2]))
    assert (books.problems, books.retried, books.dead, books.duplicates) == ([], [1], [2], [])


def test_a_dead_job_the_queue_did_not_dead_letter_is_caught() -> None:
    books = check_books(1, Ledger([job(1, "dead", failed=1)], [1]))
    assert books.problems == ["1 job(s) dead but not dead-lettered: 1"]


def test_a_finished_job_with_fewer_claims_than_attempts_is_caught() -> None:
    books = check_books(1, Ledger([job(1, failed=2)], [1, 1]))
    assert books.problems == ["1 job(s) finished with fewer claims than attempts: 1"]


def test_under_a_librarys_faults_a_job_gone_or_never_enqueued_is_measured() -> None:
    """Job 3 enqueued, in no table and never run: lost, by the library; job 9 run and
    held, never enqueued: unexpected, apart from every enqueued job's outcome. Neither
    fails the books; without faults both do (the count)."""
    records, claims = [job(1), job(2), job(9)], [1, 2, 9]
    books = check_books(3, Ledger(records, claims), unfinished_measured=True)
    assert (books.problems, books.missing, books.unexpected) == ([], [3], [9])
    assert (books.lost, books.duplicates, books.status) == ([], [], "lost: 1; unexpected: 1")
    assert problems(3, records, claims) == [
        "1 job(s) enqueued but not in the table: 3",
        "1 job(s) in the table but never enqueued: 9",
    ]


def test_a_job_twice_in_the_table_fails_the_books_under_faults_too() -> None:
    books = check_books(2, Ledger([job(1), job(2), job(2)], [1, 2]), unfinished_measured=True)
    assert books.problems == ["1 job(s) in the table more than once: 2"]
