"""The terminal's tables in a CI log (no terminal, 160 columns or fewer): every figure
whole, the names wrapped instead; progress lines without a source path."""

from __future__ import annotations

import io

from rich.console import Console

from harness.cli import console as cli_console
from harness.report.console import show_table
from harness.report.sections import Table

PLANS = Table(
    ["strategy", "variant", "shared buffers", "planning + execution ms", "top node"],
    [
        ["round_robin_by_id_no_fifo_index", "idle-9989", "1,000,903", "10,384.1", "Index Scan"],
        ["round_robin", "idle-9989", "30,058", "15.2", "Nested Loop over queue_tenants"],
    ],
    "Plans",
)


def printed(width: int) -> str:
    out = io.StringIO()
    show_table(Console(file=out, width=width, force_terminal=False), PLANS)
    return out.getvalue()


def test_a_narrow_log_shows_every_figure_whole_and_wraps_the_names() -> None:
    for width in (160, 80, 50):
        text = printed(width)
        for figure in ("1,000,903", "30,058", "10,384.1", "15.2"):
            assert figure in text, (width, text)
        assert "…" not in text, (width, text)
    narrow = printed(50)
    assert "round_robin_by_id_no_fifo_index" not in narrow  # wrapped, not cut
    assert "round_robin_" in narrow and "o_index" in narrow


def test_the_progress_lines_name_no_source_file() -> None:
    """The CLI's console logs (the repetitions' progress lines) without the source path
    rich adds by default: a line of progress in a CI log ends with what it says."""
    out = io.StringIO()
    cli_console.begin_capture()
    cli_console.log("fifo x2 #1: 240 jobs, books balanced", markup=False)
    out.write(cli_console.end_capture())
    assert out.getvalue().rstrip().endswith("books balanced")
    assert ".py:" not in out.getvalue()
