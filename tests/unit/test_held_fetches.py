"""A library's fetches explained under a held snapshot, on hand-made plans: each fetch's
figures, its phase, the per-phase summary, and the stamped plans file they come from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.analysis.bloat import bloat_rows, bloat_sentences, bloat_summary, hold_windows
from harness.analysis.fault_matrix import _held_effect
from harness.analysis.headline import run_headline
from harness.analysis.held_fetches import FETCH_COLUMNS, fetch_figures, fetch_summary, phase_of
from harness.queues.base import Site
from harness.queues.contract.captures import append_stamped, read_stamped
from harness.queues.contract.manifest import load_adapters
from harness.queues.contract.protocol import Connection
from harness.queues.contract.queue import ContractSpec
from tests.unit.test_bloat import KEYS, document, jobs, sample


def node(kind: str, hit: int, read: int = 0, *children: dict[str, Any], **more: Any) -> dict:
    return {
        "Node Type": kind,
        "Shared Hit Blocks": hit,
        "Shared Read Blocks": read,
        "Plans": list(children),
        **more,
    }


# A fetch whose index scan walks 40 buffers of its own under a LockRows and an update.
SCAN = node("Index Scan", 40, 2, **{"Relation Name": "jobs", "Index Name": "ix"})
FETCH = node(
    "ModifyTable",
    50,
    2,
    node("LockRows", 42, 2, SCAN),
    **{"Relation Name": "jobs", "Actual Rows": 1},
)


def test_a_fetch_is_its_root_buffers_and_the_node_that_read_most_itself() -> None:
    figures = fetch_figures(FETCH, 1.23456)
    assert (figures["shared_hit"], figures["shared_read"], figures["shared_buffers"]) == (50, 2, 52)
    assert figures["rows"] == 1
    assert figures["top_node"] == "Index Scan using ix on jobs"
    assert figures["top_node_buffers"] == 42  # the ModifyTable's own: 8, the LockRows' 0
    assert figures["duration_ms"] == 1.2346
    assert set(figures) | {"at_s", "phase"} == set(FETCH_COLUMNS)


def test_a_fetch_belongs_to_the_phase_its_plan_arrived_in() -> None:
    at_s = pd.Series([0.1, 1.999, 2.0, 4.999, 5.0, 9.0])
    assert list(phase_of(at_s, 2.0, 5.0)) == [
        "before",
        "before",
        "during",
        "during",
        "after",
        "after",
    ]
    assert set(phase_of(at_s, None, None)) == {"before"}  # no hold began
    assert list(phase_of(at_s, 2.0, None))[-1] == "during"  # never ended before the stop


def fetches(buffers_by_phase: dict[str, list[int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            KEYS | {"phase": phase, "shared_buffers": b, "top_node": f"Seq Scan on {phase}"}
            for phase, buffers in buffers_by_phase.items()
            for b in buffers
        ]
    )


def test_the_summary_has_each_phase_count_median_and_largest_fetch() -> None:
    table = fetch_summary(fetches({"before": [10, 12, 14], "during": [20, 60], "after": [11]}))
    row = table.iloc[0]
    assert (row["fetches_before"], row["fetches_during"], row["fetches_after"]) == (3, 2, 1)
    assert (row["fetch_buffers_p50_before"], row["fetch_buffers_max_before"]) == (12, 14)
    assert (row["fetch_buffers_p50_during"], row["fetch_buffers_max_during"]) == (40, 60)
    assert row["fetch_top_node_during"] == "Seq Scan on during"


def test_a_phase_without_fetches_has_no_figures() -> None:
    row = fetch_summary(fetches({"before": [10]})).iloc[0]
    assert row["fetches_during"] == 0
    assert pd.isna(row["fetch_buffers_p50_during"]) and row["fetch_top_node_during"] == ""


def test_the_bloat_summary_carries_the_fetch_figures_into_the_report() -> None:
    claimed = jobs([(0.5, 2), (1.0, 4), (2.5, 10), (3.0, 20), (6.0, 3)])
    samples = pd.DataFrame([sample(1, "before", 5, 8192), sample(2, "during", 10, 8192)])
    windows = hold_windows(document(2, 5))
    plans = fetches({"before": [10, 12], "during": [30, 50], "after": [11]})
    table = bloat_summary(claimed, samples, windows, plans)
    headers, rows = bloat_rows(table)
    cells = dict(zip(headers, rows[0], strict=True))
    assert (cells["fetch buffers p50 before"], cells["fetch buffers max during"]) == ("11", "50")
    (sentence,) = bloat_sentences(table)
    assert "Its own fetch read a median 11 buffers before the hold, 40 during it" in sentence
    without = bloat_summary(claimed, samples, windows)
    assert "fetch buffers p50 before" not in bloat_rows(without)[0]
    assert "Its own fetch" not in bloat_sentences(without)[0]


def notice(query: str, plan: dict[str, Any], ms: float = 0.5) -> str:
    return f"duration: {ms} ms  plan:\n" + json.dumps({"Query Text": query, "Plan": plan})


def test_the_stamped_file_keeps_each_fetch_with_its_arrival(tmp_path: Path) -> None:
    path = tmp_path / "0.plans"
    append_stamped(str(path), notice("update jobs /* fetch */", FETCH))
    append_stamped(str(path), notice("insert into jobs", node("ModifyTable", 3)))
    append_stamped(str(path), "not a plan")  # other notices are never written
    with path.open("a") as handle:
        handle.write("12.5\tduration: 1 ms  plan: {")  # being written: not read
    (found,) = read_stamped(path, "/* fetch */", locks=True)
    at, plan = found
    assert at > 0 and plan.plan["Shared Hit Blocks"] == 50
    assert path.read_text().count("\x1e") == 2


@pytest.mark.parametrize("timed", [False, True])
def test_a_timed_worker_is_explained_without_holding_its_jobs(timed: bool) -> None:
    """A plan capture's worker holds its jobs; a timed run's explained worker works as
    ever, auto_explain on all the same, its node timing off."""
    adapter = load_adapters()["procrastinate"]
    mapping = adapter.manifest.mappings[0].mapping
    spec = ContractSpec(adapter, mapping, Site("", "s"), 10, plans_file="p", timed_plans=timed)
    config = spec.config("worker", Connection())
    assert config.hold is not timed
    assert config.explain_options is not None
    assert ("auto_explain.log_timing=off" in config.explain_options) is timed


def test_results_json_lists_a_fetch_figure_per_phase() -> None:
    claimed = jobs([(0.5, 2), (1.0, 4), (2.5, 10), (3.0, 20), (6.0, 3)])
    samples = pd.DataFrame([sample(1, "before", 5, 8192), sample(2, "during", 10, 8192)])
    windows = hold_windows(document(2, 5))
    plans = fetches({"before": [10, 12], "during": [30, 50], "after": [11]})
    table = bloat_summary(claimed, samples, windows, plans)
    figures = {figure.name: figure for figure in run_headline("held", None, None, None, table)}
    during = figures["held: fifo, 2 workers: one fetch's shared buffers, during the hold (median)"]
    assert (during.value, during.unit, during.samples) == (40, "buffers", 1)
    assert len(figures) == 3
    without = bloat_summary(claimed, samples, windows)
    assert run_headline("held", None, None, None, without) == []


def test_the_suites_held_snapshot_cell_says_the_fetch_buffers() -> None:
    row = {"jobs_dead_versions_peak": 1200, "wait_p95_before_s": 0.03, "wait_p95_during_s": 0.04}
    plain = _held_effect(row)
    assert plain == "1,200 dead versions at the peak; wait p95 30 ms before, 40 ms during"
    explained = row | {"fetch_buffers_p50_before": 14.0, "fetch_buffers_p50_during": 15.5}
    assert _held_effect(explained) == plain + "; fetch buffers p50 14 before, 15.5 during"
