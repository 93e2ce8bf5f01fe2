"""Plan figures and dangerous shapes, from EXPLAIN JSON documents built by hand."""

from __future__ import annotations

from typing import Any

import pytest

from harness.analysis.plans import (
    GROWS_WITH_BACKLOG,
    READS_BACKLOG,
    SORTS_TENANTS,
    WALKS_GLOBAL_INDEX,
    Capture,
    growth_exponent,
    plan_figures,
    plan_runs,
    plans_rows,
    plans_summary,
    reads_backlog,
)


def scan(relation: str, index: str | None = None, **extra: Any) -> dict[str, Any]:
    node = {
        "Node Type": "Index Scan" if index else "Seq Scan",
        "Relation Name": relation,
        "Actual Loops": 1,
        **extra,
    }
    if index:
        node["Index Name"] = index
    return node


def round_robin(inner: dict[str, Any], outer: dict[str, Any] | None = None) -> list[dict]:
    outer = outer or scan("queue_tenants", "queue_tenants_last_served_idx")
    lateral = {
        "Node Type": "Subquery Scan",
        "Plans": [{"Node Type": "Limit", "Plans": [{"Node Type": "LockRows", "Plans": [inner]}]}],
    }
    loop = {"Node Type": "Nested Loop", "Plans": [outer, lateral]}
    root = {
        "Node Type": "Limit",
        "Shared Hit Blocks": 2984,
        "Shared Read Blocks": 16,
        "Plans": [loop],
    }
    return [{"Plan": root, "Planning Time": 0.1, "Execution Time": 1.07}]


def test_the_fixed_plan_is_a_probe_per_tenant_and_raises_no_flag() -> None:
    inner = scan(
        "jobs",
        "jobs_queued_tenant",
        **{
            "Index Cond": "(tenant_id = qt.tenant_id)",
            "Filter": "(status = 'queued'::text)",
            "Actual Loops": 990,
        },
    )
    figures = plan_figures(round_robin(inner))
    assert figures.total_ms == 0.1 + 1.07
    assert figures.shared_buffers == 3000
    assert figures.outer_scan == "Index Scan using queue_tenants_last_served_idx on queue_tenants"
    assert figures.jobs_scan == "Index Scan using jobs_queued_tenant on jobs"
    assert figures.jobs_loops == 990
    assert figures.flags == ()


def test_the_trap_walks_a_global_index_and_removed_rows_count_every_loop() -> None:
    inner = scan(
        "jobs",
        "jobs_queued_fifo",
        **{
            "Filter": "((tenant_id = qt.tenant_id) AND (status = 'queued'::text))",
            "Rows Removed by Filter": 100010,
            "Actual Loops": 990,
        },
    )
    figures = plan_figures(round_robin(inner))
    assert figures.flags == (WALKS_GLOBAL_INDEX,)
    assert figures.rows_removed == 100010 * 990


def test_a_sort_of_all_tenants_under_the_limit_is_flagged() -> None:
    inner = scan("jobs", "jobs_queued_tenant", **{"Index Cond": "(tenant_id = qt.tenant_id)"})
    plan = round_robin(inner, outer=scan("queue_tenants"))
    root = plan[0]["Plan"]
    root["Plans"] = [{"Node Type": "Sort", "Plans": root["Plans"]}]
    assert plan_figures(plan).flags == (SORTS_TENANTS,)
    assert plan_figures(plan).outer_scan == "Seq Scan on queue_tenants"


def test_fifo_walks_its_own_index_without_a_flag() -> None:
    fifo = {
        "Node Type": "Limit",
        "Shared Hit Blocks": 5,
        "Plans": [
            {
                "Node Type": "LockRows",
                "Plans": [scan("jobs", "jobs_queued_fifo", Filter="(status = 'queued'::text)")],
            }
        ],
    }
    figures = plan_figures([{"Plan": fifo, "Planning Time": 0.03, "Execution Time": 0.02}])
    assert figures.flags == ()
    assert figures.jobs_scan == figures.outer_scan == "Index Scan using jobs_queued_fifo on jobs"


def _capture(strategy: str, queued: int, root: dict[str, Any], buffers: int) -> Capture:
    root = {**root, "Shared Hit Blocks": buffers}
    plan = [{"Plan": root, "Execution Time": 1.0}]
    backlog = {"registered_tenants": 11, "idle_tenants": 0, "queued_jobs": queued}
    return Capture(f"jobs-{queued}", strategy, backlog, plans=[plan, plan])


def _whole_queue(queued: int) -> dict[str, Any]:
    """A grouped read's shape: every queued message scanned, then sorted."""
    seq = scan("q_items", **{"Actual Rows": queued})
    return {
        "Node Type": "Limit",
        "Plans": [{"Node Type": "Sort", "Actual Rows": 10, "Plans": [seq]}],
    }


def _head(queued: int) -> dict[str, Any]:
    """A FIFO read's shape: the head of an index, one row."""
    return {"Node Type": "Limit", "Plans": [scan("q_items", "q_items_pkey", **{"Actual Rows": 1})]}


def test_a_node_that_reads_the_queued_jobs_is_flagged_whatever_the_tables_are_called() -> None:
    assert reads_backlog(_whole_queue(100_000), 100_010)
    assert not reads_backlog(_head(100_000), 100_010)
    # Rows thrown away by a filter count too: a walk past the large tenant's backlog.
    walk = scan("job", "job_pkey", **{"Actual Rows": 1, "Rows Removed by Filter": 99_999})
    assert reads_backlog({"Node Type": "Limit", "Plans": [walk]}, 100_010)
    assert not reads_backlog(_whole_queue(500), 510)  # a tiny queue says nothing


def test_the_plans_table_flags_a_fetch_whose_buffers_grow_with_the_backlog() -> None:
    """Across a growing backlog (10,000 / 100,000 / 1,000,000 jobs) the whole-queue read's
    buffers grow with it and the head read's stay put: only the first is GROWS WITH
    BACKLOG (and READS BACKLOG on every variant)."""
    captures = [
        *(_capture("grouped", q, _whole_queue(q), q // 100) for q in (10_000, 100_000, 1_000_000)),
        *(_capture("head", q, _head(q), 5) for q in (10_000, 100_000, 1_000_000)),
    ]
    summary = plans_summary(plan_runs(captures), captures).set_index(["strategy", "variant"])
    grouped = summary.loc["grouped", "flags"]
    assert all(GROWS_WITH_BACKLOG in flags and READS_BACKLOG in flags for flags in grouped)
    assert (summary.loc["head", "flags"] == "").all()
    assert growth_exponent(summary.loc["grouped"].reset_index()) == pytest.approx(1.0)
    headers, rows = plans_rows(summary.reset_index(), compact=True)
    flags = {row[1]: row[headers.index("flags")] for row in rows}
    assert flags["grouped"] == "READS BACKLOG, GROWS WITH BACKLOG"


def test_a_fetch_that_turns_to_a_sequential_scan_still_grows_with_the_backlog() -> None:
    """An index walk past 10,000 capped jobs hits a buffer per row or more; at 1,000,000 a
    sequential scan reads them in fewer buffers than before. The rows its busiest node
    reads grow all the same: flagged."""
    walk = scan("job", "job_pkey", **{"Actual Rows": 1, "Rows Removed by Filter": 9_999})
    seq = scan("job", **{"Actual Rows": 1, "Rows Removed by Filter": 999_999})
    captures = [
        _capture("capped", 10_000, {"Node Type": "Limit", "Plans": [walk]}, 30_000),
        _capture("capped", 1_000_000, {"Node Type": "Limit", "Plans": [seq]}, 9_000),
    ]
    summary = plans_summary(plan_runs(captures), captures)
    assert growth_exponent(summary, "shared_buffers") < 0
    assert growth_exponent(summary, "rows_read") == pytest.approx(1.0)
    assert all(GROWS_WITH_BACKLOG in flags for flags in summary["flags"])
