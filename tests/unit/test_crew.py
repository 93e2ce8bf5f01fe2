"""A crew's process start is not cut in half by an interrupt: the signal waits for the
start to return, then arrives as usual (harness/run/crew.py)."""

from __future__ import annotations

import os
import signal

import pytest

from harness.run.crew import start_uninterrupted


class _Process:
    """Stands in for a multiprocessing process whose start is interrupted halfway."""

    def __init__(self, sig: int) -> None:
        self.sig, self.started = sig, False

    def start(self) -> None:
        os.kill(os.getpid(), self.sig)  # the interrupt lands inside the start
        self.started = True


def test_ctrl_c_inside_a_start_arrives_once_the_start_returned() -> None:
    process = _Process(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        start_uninterrupted(process)
    assert process.started
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_inside_a_start_reaches_the_handler_that_was_there() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _: seen.append(signum))
    try:
        process = _Process(signal.SIGTERM)
        start_uninterrupted(process)
        assert process.started and seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_start_without_an_interrupt_changes_no_handler() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    class Quiet:
        started = False

        def start(self) -> None:
            self.started = True

    process = Quiet()
    start_uninterrupted(process)
    assert process.started
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
