"""The report's first screen: the verdict, waits over the run, tenants' colours, long
tables folded (pure functions and the page, no server)."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.analysis.reference import (
    headline,
    placement,
    reference_rows,
    reference_table,
    tally,
)
from harness.analysis.stats import stability_line
from harness.analysis.waits import (
    backlog_over_run,
    bucket_width,
    claim_note,
    waits_headline,
    waits_over_run,
)
from harness.report.html import FOLD_ROWS, Page, report_html
from harness.report.sections import Section, Table
from harness.results.document import RunDocument, ScenarioRef
from harness.scenario.model import ReferenceFigure


@pytest.mark.parametrize(
    "tenants",
    [
        [("large", 1), *(("small", n) for n in range(2, 12))],  # the noisy neighbour: 11
        [("only", n) for n in range(1, 51)],  # 50 in one class
        [(f"class{c}", 10 * c + n) for c in range(5) for n in range(10)],  # 5 classes of 10
        [(f"c{c}", c) for c in range(50)],  # 50 classes of one: hues past the ten
    ],
    ids=["noisy-neighbour", "one-class", "five-classes", "fifty-classes"],
)
def test_no_two_tenants_share_a_colour_up_to_fifty(tenants: list[tuple[str, int]]) -> None:
    from harness.analysis.figures import tenant_colours

    colours = tenant_colours(tenants)
    assert len(colours) == len(tenants)
    assert len(set(colours.values())) == len(tenants)


def test_a_classs_tenants_are_shades_of_one_hue_from_dark_to_light() -> None:
    from harness.analysis.figures import tenant_colours

    colours = tenant_colours([("small", 3), ("small", 10), ("small", 2), ("large", 1)])
    assert colours[("large", 1)] == "#ff7f0e"  # the second class's hue; alone, unshaded
    lightness = [
        sum(int(colours[("small", n)][i : i + 2], 16) for i in (1, 3, 5)) for n in (2, 3, 10)
    ]
    assert lightness == sorted(lightness)  # numeric order, not 10 before 2


def jobs_frame(rows: list[tuple[str, str, int, float, float]]) -> pd.DataFrame:
    """jobs.csv's rows: strategy, class, tenant, enqueued and started (s after t0)."""
    t0 = pd.Timestamp("2026-12-01T00:00:00Z")
    return pd.DataFrame(
        [
            {
                "scenario": "s",
                "strategy": strategy,
                "workers": 2,
                "repetition": 1,
                "job_id": index,
                "tenant_id": tenant,
                "tenant_class": tenant_class,
                "enqueued_at": t0 + pd.Timedelta(seconds=enqueued),
                "started_at": t0 + pd.Timedelta(seconds=started),
                "finished_at": t0 + pd.Timedelta(seconds=started + 0.02),
                "worker": 0,
                "claim_ms": 1.0 + index % 3,
            }
            for index, (strategy, tenant_class, tenant, enqueued, started) in enumerate(rows)
        ]
    )


def test_the_legend_of_tenant_shares_is_in_numeric_order() -> None:
    from harness.analysis.figures import tenant_share

    rows = [("fifo", "small", n, 0.0, 0.1 * n) for n in (10, 2, 11, 3)]
    figure = tenant_share(jobs_frame([("fifo", "large", 1, 0.0, 0.05), *rows]))
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert labels == ["large 1", "small 2", "small 3", "small 10", "small 11"]


def test_waits_over_the_run_follow_enqueue_time_when_jobs_arrive_over_time() -> None:
    stream = [("fifo", "stream", 2, 0.5 * n, 0.5 * n + 0.1 * n) for n in range(20)]
    frame, clock = waits_over_run(jobs_frame(stream))
    assert clock == "enqueue_s"
    waits = frame.set_index("bucket_s")["p50"]
    assert waits.is_monotonic_increasing and waits.iloc[0] == pytest.approx(0.0)
    assert waits.iloc[-1] == pytest.approx(1.9)


def test_bursts_are_shown_by_when_their_wait_ended() -> None:
    """Every class enqueued at once: by enqueue time it would be one point per class."""
    burst = [("fifo", "large", 1, 0.0, 0.1 * n) for n in range(40)]
    burst += [("fifo", "small", 2, 1.0, 4.0 + 0.01 * n) for n in range(5)]
    frame, clock = waits_over_run(jobs_frame(burst))
    assert clock == "start_s"
    small = frame[frame["tenant_class"] == "small"]
    assert small["bucket_s"].min() > 3.9 and small["p50"].min() == pytest.approx(3.0, abs=0.1)
    assert frame[frame["tenant_class"] == "large"]["bucket_s"].nunique() > 10


@pytest.mark.parametrize(("span", "width"), [(6.0, 0.2), (20.0, 0.5), (1.0, 0.025), (300, 10)])
def test_buckets_are_round(span: float, width: float) -> None:
    assert bucket_width(span) == pytest.approx(width)


def summary_frame() -> pd.DataFrame:
    rows = []
    for repetition in (1, 2):
        for strategy, small, claim in (("fifo", 4.6 + repetition / 50, 0.6), ("rr", 0.15, 0.9)):
            for tenant_class, p50 in (("large", 2.8), ("small", small), ("all", 2.9)):
                rows.append(
                    {
                        "strategy": strategy,
                        "workers": 4,
                        "repetition": repetition,
                        "tenant_class": tenant_class,
                        "wait_p50_s": p50,
                        "claim_p50_ms": claim,
                    }
                )
    return pd.DataFrame(rows)


def test_without_a_reference_the_headline_names_the_class_the_strategies_split() -> None:
    assert waits_headline(summary_frame()) == (
        "Small tenants' median wait, 4 workers: 4.63 s with fifo, 0.15 s with rr (30.9x)."
    )
    assert claim_note(summary_frame()) == (
        "Median claim latency (median over repetitions): fifo 0.6 ms, rr 0.9 ms (1.50x)."
    )


def test_the_headline_is_the_references_ratio_against_its_range() -> None:
    figures = [
        ReferenceFigure(label="fifo wait", metric="wait_p50_s", strategy="fifo",
                        tenant_class="small", value=(4.5, 4.5)),
        ReferenceFigure(label="small tenants' wait, fifo / rr", metric="wait_p50_s",
                        strategy="fifo", versus="rr", tenant_class="small", value=(30, 45),
                        unit="x"),
    ]  # fmt: skip
    table = reference_table(figures, summary_frame(), None, 0.10)
    assert table["placement"].tolist() == ["within", "within"]
    assert headline(table) == (
        "Small tenants' wait, fifo / rr: 30.8-30.9x measured over 2 repetitions, against "
        "30-45x in the reference: within. Figures: 2 of 2 within."
    )
    assert [placement((1.0, 2.0), 0.0, *r) for r in ((2.1, 3), (0.1, 0.5), (0.5, 1.5))] == [
        "above",
        "below",
        "partly",
    ]


def page(sections: list[Section]) -> str:
    document = RunDocument(
        run_id="r",
        started_at="2026-12-01T00:00:00Z",
        scenario=ScenarioRef(name="s", path="s.yaml", sha256="0" * 64, seed=1),
    )
    return report_html(
        Page(
            title="s",
            description="",
            document=document,
            sections=sections,
            plots=[("timeline", b"png2")],
            folded=[],
            scenario_yaml="name: s",
            lead_plots=[("Waits over the run", b"png1")],
        )
    )


def test_the_page_opens_with_the_verdict_then_the_lead_plots_then_contents() -> None:
    long = Table(["a"], [[str(n)] for n in range(FOLD_ROWS + 1)])
    short = Table(["b"], [["1"]])
    html = page(
        [
            Section("waits", "Waits", tables=[short]),
            Section("verdict", "Verdict", headline="FIFO waits 30x longer."),
            Section("ideal", "Against the ideal", tables=[long]),
        ]
    )
    order = ["id='verdict'", "FIFO waits 30x longer.", "Waits over the run", "id='contents'"]
    places = [html.index(marker) for marker in order]
    assert places == sorted(places)
    assert html.index("id='contents'") < html.index("id='waits'") < html.index("id='plots'")
    assert "<details><summary>Against the ideal: 13 rows (click to show)</summary>" in html
    assert "<summary>Waits" not in html  # a short table stays open
    assert "<a href='#ideal'>Against the ideal</a>" in html


def test_a_figure_off_its_reference_says_better_or_worse_and_the_headline_counts_them() -> None:
    """A faster fixed dequeue is better, not BELOW; a slower FIFO wait is worse; a ratio
    of two strategies has no better side; the headline never says 'within' alone over a
    table whose figures are not."""
    figures = [
        ReferenceFigure(label="small tenants' wait, fifo / rr", metric="wait_p50_s",
                        strategy="fifo", versus="rr", tenant_class="small", value=(60, 90),
                        unit="x"),
        ReferenceFigure(label="fifo wait", metric="wait_p50_s", strategy="fifo",
                        tenant_class="small", value=(1.0, 1.0)),
        ReferenceFigure(label="rr wait", metric="wait_p50_s", strategy="rr",
                        tenant_class="small", value=(1.0, 1.0)),
        ReferenceFigure(label="fifo wait, again", metric="wait_p50_s", strategy="fifo",
                        tenant_class="small", value=(4.6, 4.7)),
    ]  # fmt: skip
    table = reference_table(figures, summary_frame(), None, 0.10)
    assert [row[-1] for row in reference_rows(table)[1]] == [
        "below (no better side)",
        "worse (above)",
        "better (below)",
        "within",
    ]
    assert tally(table) == "1 of 4 within; 1 better, 1 worse, 1 below"
    assert headline(table).endswith(
        "in the reference: below (no better side). Figures: 1 of 4 within; 1 better, 1 worse, "
        "1 below."
    )


def test_the_first_screen_warns_of_a_spread_or_a_loaded_machine_as_pyperf_does() -> None:
    assert stability_line({"fifo wait": 0.02}, 0.5, 2) is None
    assert stability_line({"fifo wait": 0.40, "rr wait": 0.12, "ratio": 0.01}, 2.6, 2) == (
        "Unstable: fifo wait spread 40% over repetitions and 1 more (10 % or more); the "
        "load average was 2.60 on 2 cores as the run started: rerun on a quiet machine "
        "before trusting the figures."
    )
    assert stability_line({}, 3.0, None) is None  # no core count recorded: nothing to say
    table = reference_table(
        [ReferenceFigure(label="fifo wait", metric="wait_p50_s", strategy="fifo",
                         tenant_class="small", value=(4.5, 4.5))],
        summary_frame(), None, 0.10,
    )  # fmt: skip
    assert 0 < table["spread"].iloc[0] < 0.10


def test_the_backlog_draining_view_counts_each_class_still_queued() -> None:
    """A large tenant's burst at 0 (4 jobs, one started every second) and a small one's
    at 1 s: under fifo the small job waits behind the large ones (queued to 4 s), under
    round-robin it starts at once; the figure tells the two apart by line style too."""
    from harness.analysis.figures import backlog_draining

    rows = [("fifo", "large", 1, 0.0, float(n)) for n in range(4)]
    rows += [("fifo", "small", 2, 1.0, 4.0)]
    rows += [("rr", "large", 1, 0.0, float(n) + (n > 0)) for n in range(4)]
    rows += [("rr", "small", 2, 1.0, 1.0)]
    frame = backlog_over_run(jobs_frame(rows), points=8)  # a moment every 0.5025 s
    small = frame[frame["tenant_class"] == "small"].pivot(
        index="at_s", columns="strategy", values="queued"
    )
    assert small["fifo"].tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 0]
    assert small["rr"].tolist() == [0] * 9
    large = frame[(frame["tenant_class"] == "large") & (frame["strategy"] == "fifo")]
    assert large["queued"].tolist() == [3, 3, 2, 2, 1, 1, 0, 0, 0]
    styles = [line.get_linestyle() for line in backlog_draining(frame).axes[1].get_lines()]
    assert len(set(styles)) == 2
