"""results.json's figures, the check's CI outputs and `harness history`, without a server."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pandas as pd
import pytest
from rich.console import Console

from harness.analysis.headline import run_headline
from harness.analysis.history import chosen, figures_frame, trend
from harness.analysis.reference import is_within
from harness.check.verdict import (
    Finding,
    check_markdown,
    github_annotations,
    github_command,
    not_run_junit,
    not_run_markdown,
)
from harness.commands.history import history_command
from harness.errors import HarnessError
from harness.results.headline import Figure, Results, find_results, results_document
from harness.results.versioned import UnreadableDocument
from harness.scenario.model import Reference


@pytest.mark.parametrize(
    ("reference", "low", "high", "within"),
    [
        ((4.5, 4.5), 4.64, 4.67, True),  # a single figure, met within 10 %
        ((4.5, 4.5), 4.64, 5.0, False),  # one repetition beyond it
        ((0.10, 0.15), 0.141, 0.143, True),
        ((30, 45), 28.8, 31.2, True),  # 28.8 >= 27
        ((0.6, 0.6), 0.30, 0.33, False),
        ((-2.0, -1.0), -2.1, -1.05, True),  # negative ends widen outwards too
    ],
)
def test_a_measured_range_is_within_the_reference_widened_by_its_tolerance(
    reference: tuple[float, float], low: float, high: float, within: bool
) -> None:
    assert is_within(reference, 0.10, low, high) is within


def summary_of(rows: list[tuple[str, str, int, float, float]]) -> pd.DataFrame:
    """A summary.csv's rows: strategy, class, repetition, p50 wait, throughput."""
    return pd.DataFrame(
        [
            {
                "strategy": strategy,
                "workers": 4,
                "repetition": repetition,
                "tenant_class": tenant_class,
                "wait_p50_s": p50,
                "wait_p95_s": p50 * 2,
                "makespan_s": 5.0,
                "claim_p50_ms": 0.5,
                "throughput_jobs_s": throughput,
            }
            for strategy, tenant_class, repetition, p50, throughput in rows
        ]
    )


def test_run_figures_are_medians_and_ranges_over_repetitions_with_the_reference() -> None:
    summary = summary_of(
        [
            ("fifo", "small", 1, 4.6, 180),
            ("fifo", "small", 2, 4.7, 181),
            ("fifo", "small", 3, 4.8, 179),
            ("round_robin", "small", 1, 0.14, 175),
            ("round_robin", "small", 2, 0.16, 176),
            ("round_robin", "small", 3, 0.15, 177),
        ]
    )
    reference = Reference.model_validate(
        {
            "source": "the article",
            "figures": [
                {"label": "fifo / rr", "metric": "wait_p50_s", "strategy": "fifo",
                 "versus": "round_robin", "tenant_class": "small", "value": [30, 45], "unit": "x"},
                {"label": "fifo", "metric": "wait_p50_s", "strategy": "fifo",
                 "tenant_class": "small", "value": 4.5},
            ],
        }
    )  # fmt: skip
    figures = {figure.name: figure for figure in run_headline("nn", summary, None, reference)}
    ratio = figures["nn: fifo / rr"]
    # per repetition; a ratio to 4 significant digits (results.json's precision)
    assert ratio.range == (29.38, 32.86)  # 4.7 / 0.16, 4.6 / 0.14
    assert ratio.value == 32.0  # 4.8 / 0.15
    assert (ratio.reference, ratio.within, ratio.lower_is_better) == ((30, 45), True, None)
    assert figures["nn: fifo"].within is True  # 4.6-4.8 within 4.05-4.95
    p50 = figures["nn: fifo, 4 workers, small: p50 wait"]
    assert (p50.value, p50.range, p50.samples, p50.reference) == (4.7, (4.6, 4.8), 3, None)
    throughput = figures["nn: round_robin, 4 workers: throughput"]
    assert (throughput.value, throughput.lower_is_better, throughput.unit) == (176, False, "jobs/s")
    assert len(figures) == 2 + 2 * 3 + 2 * 2  # references, waits, per repetition


def document(run_id: str, started: str, values: dict[str, float], **extra: object) -> Results:
    figures = [
        Figure(name=n, unit="s", value=v, range=(v, v), lower_is_better=True, samples=1)
        for n, v in values.items()
    ]
    return results_document(
        run_id=run_id,
        kind="run",
        name="nn",
        status="complete",
        started_at=started,
        metadata={"harness": {"git_commit": "abc", "git_dirty": False}, "host": {"hostname": "h"}},
        figures=figures,
        **extra,  # type: ignore[arg-type]
    )


def test_history_trends_the_shared_figures_oldest_first() -> None:
    newer = document("b", "2026-12-02T00:00:00", {"x: p50": 2.0, "only in b": 1.0})
    older = document("a", "2026-12-01T00:00:00", {"x: p50": 1.0, "y": 3.0})
    older.figures[0].reference = (0.5, 1.5)
    figures = figures_frame([newer, older])
    assert chosen(figures, []) == ["x: p50"]  # shared by two runs, with a reference
    assert chosen(figures, ["only*", "y"]) == ["only in b", "y"]
    rows = trend(figures, ["x: p50"])
    assert rows["run_id"].tolist() == ["a", "b"]
    assert pd.isna(rows["change"].iloc[0]) and rows["change"].iloc[1] == 2.0


def test_results_json_is_versioned_and_read_back(tmp_path: Path) -> None:
    written = document("r1", "2026-12-01T00:00:00", {"x": 1.0})
    (tmp_path / "r1").mkdir()
    path = written.write(tmp_path / "r1" / "results.json")
    assert json.loads(path.read_text())["format_version"] == 1
    with pytest.raises(FileExistsError):
        written.write(path)  # never silently overwritten
    ((folder, read),) = find_results(tmp_path)
    assert folder == tmp_path / "r1" and read == written
    path.write_text(json.dumps({**json.loads(path.read_text()), "format_version": 9}))
    with pytest.raises(
        UnreadableDocument, match=r"results.json format_version 9; this harness reads 1$"
    ):
        Results.read(path)


def test_history_says_in_one_line_where_there_is_nothing(tmp_path: Path) -> None:
    console = Console(file=None, record=True)
    with pytest.raises(HarnessError, match="no such folder"):
        history_command(tmp_path / "absent", [], None, console)
    with pytest.raises(HarnessError, match=r"no run folder with a results\.json"):
        history_command(tmp_path, [], None, console)
    (tmp_path / "r1").mkdir()
    document("r1", "2026-12-01", {"x": 1.0}).write(tmp_path / "r1" / "results.json")
    with pytest.raises(HarnessError, match=r"--figure: no figure of these runs matches \['zz'\]"):
        history_command(tmp_path, ["zz"], None, console)
    assert history_command(tmp_path, [], None, console) is None  # one run: nothing to trend
    assert not (tmp_path / "history").exists()


def finding(verdict: str, figure: str = "shared buffers") -> Finding:
    return Finding("round_robin", "skewed", figure, "409", "9,000", 22.0, verdict, "note: 50%")


def test_github_annotations_are_one_line_with_its_escapes() -> None:
    assert (
        github_command("error", "a: b, c", "50%\nnext") == "::error title=a%3A b%2C c::50%25%0Anext"
    )
    assert (
        github_command("error", "t", "m", "sql/a,b.sql") == "::error file=sql/a%2Cb.sql,title=t::m"
    )
    shown = github_annotations([finding("ok"), finding("regression"), finding("noisy", "claim")])
    assert [line.split(" ")[0] for line in shown] == ["::error"]
    assert shown[0].endswith(
        "::round_robin dequeue on skewed: shared buffers 409 -> 9,000 (22.00x); note: 50%25"
    )


def test_a_strategys_findings_are_one_annotation_on_its_file() -> None:
    """A dropped index flags every figure of every variant: one error for the strategy,
    each regression a line of it, on the user's file; a strategy with only warnings gets
    one warning; one with nothing to say, none."""
    other = Finding("fifo", "skewed", "claim", "1", "3", 3.0, "noisy")
    quiet = Finding("capped", "skewed", "jobs scan", "a", "a", None, "ok")
    found = [finding("regression"), finding("regression", "jobs scan"), other, quiet]
    shown = github_annotations(found, {"round_robin": "sql/round_robin.sql"})
    assert len(shown) == 2
    assert shown[0].startswith(
        "::error file=sql/round_robin.sql,title=harness check%3A round_robin%3A 2 regression::"
    )
    assert shown[0].count("%0A") == 1  # two lines, one per regression
    assert shown[1].startswith("::warning title=harness check%3A fifo%3A 1 noisy::")


def test_the_job_summary_opens_with_the_verdict_and_exit_code() -> None:
    text = check_markdown(
        [finding("regression")], 1, 3.0, "baselines/dequeue.json", "results/check/x"
    )
    lines = text.splitlines()
    assert lines[0] == "## harness check: 1 regression(s) (exit 1)"
    assert "against `baselines/dequeue.json`" in lines[2] and "`results/check/x`" in lines[2]
    assert lines[-1].startswith("- REGRESSION: round_robin dequeue on skewed")


def test_a_check_that_could_not_run_says_why_in_both_reports() -> None:
    why = "baselines/dequeue.json: made with other probes"
    assert not_run_markdown(why).startswith("## harness check: could not run (exit 2)")
    assert why in not_run_markdown(why)
    suite = ElementTree.fromstring(not_run_junit(why))
    assert (suite.get("tests"), suite.get("errors")) == ("1", "1")
    error = suite.find("testcase/error")
    assert error is not None and error.get("message") == f"could not run: {why}"
