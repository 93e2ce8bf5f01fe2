"""The Python adapters' kit at a worker's stop: one still running well after `stop` says
on stderr where it waits, which the harness's `did not stop` failure quotes."""

from __future__ import annotations

import asyncio
import io
import tempfile
from types import SimpleNamespace
from typing import Any

import pytest

from harness.queues.adapters.python import kit
from harness.queues.contract.process import AdapterProcess


async def _lingers(config: kit.Config, work: kit.Work) -> None:
    await work.stopped()
    await _closing_its_pool()


async def _closing_its_pool() -> None:
    await asyncio.sleep(0.5)


async def _stops(config: kit.Config, work: kit.Work) -> None:
    await work.stopped()


def _serve_worker(worker: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The worker role of a module whose worker is `worker`, its stdin closed at once (a
    stop): what it wrote on stdout."""
    monkeypatch.setattr(kit, "STUCK_S", 0.1)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    out = io.StringIO()
    kit._worker(SimpleNamespace(worker=worker), {}, kit.Out(out))
    return out.getvalue()


def test_a_worker_still_busy_after_stop_says_where_it_waits(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    said = _serve_worker(_lingers, monkeypatch)
    assert said.splitlines() == ['{"event": "stopped"}']
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("kit: still running 0.1 s after stop: _closing_its_pool (test_kit_stop")


def test_a_worker_that_stops_in_time_says_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _serve_worker(_stops, monkeypatch).splitlines() == ['{"event": "stopped"}']
    assert capsys.readouterr().err == ""


def test_the_harness_reads_a_running_adapters_last_line_without_moving_its_writes() -> None:
    """said_last reads at offsets: the file's position, shared with the adapter that
    writes to it, stays where its next line goes; the password is masked."""
    adapter = AdapterProcess.__new__(AdapterProcess)
    adapter.secret = "s3cret"
    with tempfile.TemporaryFile() as stderr:
        adapter.stderr = stderr
        assert adapter.said_last() is None
        stderr.write(b"starting\nkit: still running 20 s after stop: connect s3cret\n")
        stderr.flush()  # as the adapter's own writes are: in the file
        assert adapter.said_last() == "kit: still running 20 s after stop: connect ********"
        stderr.write(b"later\n")
        stderr.seek(0)
        assert stderr.read().endswith(b"connect s3cret\nlater\n")


def test_a_library_worker_that_ends_before_the_stop_ends_its_process() -> None:
    """`stopped(running)`: a task of the library's worker that raises (procrastinate's
    Worker.run when a side task fails) or returns before the stop is LibraryStopped,
    naming why, so that the adapter's process exits as the library's own would; a stop
    that comes first returns, whatever the tasks do after it."""

    async def scenario(body: Any, stop_first: bool) -> None:
        work = kit.Work(kit.Out(io.StringIO()), {})
        if stop_first:
            work.stop.set()
        running = [asyncio.create_task(body()), asyncio.create_task(asyncio.sleep(60))]
        try:
            await work.stopped(running)
        finally:
            for task in running:
                task.cancel()

    async def fails() -> None:
        raise ConnectionError("side task deferrer failed")

    async def returns() -> None:
        return None

    with pytest.raises(kit.LibraryStopped, match=r"ConnectionError: side task deferrer failed"):
        asyncio.run(scenario(fails, stop_first=False))
    with pytest.raises(kit.LibraryStopped, match=r"\(it returned\)"):
        asyncio.run(scenario(returns, stop_first=False))
    asyncio.run(scenario(fails, stop_first=True))
