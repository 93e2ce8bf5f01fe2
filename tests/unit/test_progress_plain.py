"""A long run's progress where the console is no terminal (a log file, CI): rich draws no
bar there, so the horizon's line is written plain, once a minute and at each
repetition's start, never once a second; on a terminal the bar carries it alone."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from harness.commands import progress
from harness.commands.progress import PLAIN_EVERY_S, ProgressBars
from harness.run.captures import CaptureRequest
from harness.run.repetition import Repetition


@pytest.mark.parametrize("terminal", [False, True])
def test_a_horizon_line_is_written_once_a_minute_to_a_log(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    console = Console(file=io.StringIO(), force_terminal=terminal, width=200)
    logged: list[str] = []
    monkeypatch.setattr(console, "log", lambda line, **_: logged.append(str(line)))
    with ProgressBars(console, steps=2) as bars:
        for index in (1, 2):
            bars.repetition_started(Repetition("pgmq", 2, index), 100)
            for second in range(150):  # once a second for 150 s
                clock[0] += 1
                bars.horizon_progress(f"{second}/1,200 s, steady, 12.0 jobs/s, dead tuples 40")
    if terminal:  # the bar's description carries it; no line is logged
        assert logged == []
        return
    # each repetition: its first line, then one a minute: 0, 60 and 120 s
    assert [line.split()[0] for line in logged] == ["0/1,200", "60/1,200", "120/1,200"] * 2
    assert logged[0] == "  0/1,200 s, steady, 12.0 jobs/s, dead tuples 40"
    assert PLAIN_EVERY_S == 60.0


@pytest.mark.parametrize("terminal", [False, True])
def test_each_plan_capture_is_a_line_of_a_log(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    """`harness explain` loading a million jobs per strategy is minutes between captures:
    in a log, each capture's start is a line; on a terminal the bar says it."""
    console = Console(file=io.StringIO(), force_terminal=terminal, width=200)
    logged: list[str] = []
    monkeypatch.setattr(console, "log", lambda line, **_: logged.append(str(line)))
    with ProgressBars(console, steps=2) as bars:
        for strategy in ("fifo", "river"):
            bars.capture_started(CaptureRequest("jobs-1m", strategy, slow=False), 4)
            bars.capture_step()
    assert logged == ([] if terminal else ["EXPLAIN fifo on jobs-1m", "EXPLAIN river on jobs-1m"])
