"""A crew's process start and its events' sets are not cut in half by an interrupt: the
signal waits for them to return, then arrives as usual (harness/run/crew.py)."""

from __future__ import annotations

import os
import signal

import pytest

from harness.run.crew import set_uninterrupted, start_uninterrupted


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


class _Event:
    """Stands in for a multiprocessing Event whose set is interrupted inside notify_all."""

    def __init__(self) -> None:
        self.is_set = False

    def set(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the Ctrl-C lands inside the set
        self.is_set = True


def test_ctrl_c_inside_an_events_set_arrives_once_the_set_returned() -> None:
    """Interrupted inside multiprocessing's notify_all, an Event's Condition is left
    half-counted and its next set fails on an assertion (the crew's exit sets `start`
    again): the set completes first, then the KeyboardInterrupt comes."""
    event = _Event()
    with pytest.raises(KeyboardInterrupt):
        set_uninterrupted(event)
    assert event.is_set
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
