from __future__ import annotations

from datetime import UTC, datetime, timedelta

from harness.run.books import JobRow, check_books

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def done(job_id: int, start: float = 1, finish: float = 2) -> JobRow:
    return JobRow(
        job_id, 1, "done", T0, T0 + timedelta(seconds=start), T0 + timedelta(seconds=finish)
    )


def test_balanced_books_have_no_problems() -> None:
    assert check_books(2, [done(1), done(2)], [2, 1]) == []


def test_a_lost_job_is_caught() -> None:
    problems = check_books(3, [done(1), done(2)], [1, 2])
    assert problems == ["3 jobs enqueued but 2 in the table"]


def test_a_job_left_running_is_caught() -> None:
    running = JobRow(2, 1, "running", T0, T0, None)
    problems = check_books(2, [done(1), running], [1, 2])
    assert problems == ["1 job(s) not done: 2"]


def test_a_job_claimed_twice_is_caught() -> None:
    assert check_books(2, [done(1), done(2)], [1, 2, 2]) == ["1 job(s) claimed more than once: 2"]


def test_a_job_no_worker_reported_is_caught() -> None:
    problems = check_books(2, [done(1), done(2)], [1])
    assert problems == ["1 job(s) done but never claimed by a worker: 2"]


def test_timestamps_out_of_order_are_caught() -> None:
    problems = check_books(1, [done(1, start=3, finish=2)], [1])
    assert problems == ["1 job(s) with timestamps out of order: 1"]


def test_long_lists_are_cut_short() -> None:
    rows = [JobRow(i, 1, "queued", T0, None, None) for i in range(1, 9)]
    problems = check_books(8, rows, list(range(1, 9)))
    assert problems == ["8 job(s) not done: 1, 2, 3, 4, 5 and 3 more"]
