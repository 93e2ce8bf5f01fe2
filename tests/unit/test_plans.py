"""Plan figures and dangerous shapes, from EXPLAIN JSON documents built by hand."""

from __future__ import annotations

from typing import Any

from harness.analysis.plans import (
    READS_QUEUE,
    SORTS_TENANTS,
    WALKS_GLOBAL_INDEX,
    backlog_flags,
    plan_figures,
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


def fetch(*scans: dict[str, Any]) -> list[dict[str, Any]]:
    """A library's fetch as auto_explain reports it: an UPDATE over a LockRows."""
    lock = {"Node Type": "LockRows", "Plans": list(scans)}
    root = {"Node Type": "ModifyTable", "Relation Name": "q_harness", "Actual Rows": 1}
    root["Plans"] = [lock]
    return [{"Plan": root, "Execution Time": 22.0}]


def test_a_fetch_reading_half_the_queue_is_flagged_on_its_backlog() -> None:
    """Rows read are every scan's, kept or filtered away, over its loops (the UPDATE's own
    rows are no read); reading half the queued jobs or more flags the fetch, on a backlog
    of at least 1,000 jobs."""
    walk = scan("saq_jobs", "saq_jobs_idx", **{"Actual Rows": 1, "Rows Removed by Filter": 999})
    whole = scan("q_harness", **{"Actual Rows": 2003})
    head = scan("q_harness", "q_harness_pkey", **{"Actual Rows": 1, "Actual Loops": 4})
    assert plan_figures(fetch(walk)).rows_read == 1000
    assert plan_figures(fetch(whole, head)).rows_read == 2007
    assert backlog_flags(plan_figures(fetch(walk)), queued_jobs=2000) == (READS_QUEUE,)
    assert backlog_flags(plan_figures(fetch(walk)), queued_jobs=2001) == ()
    assert backlog_flags(plan_figures(fetch(head)), queued_jobs=2003) == ()
    assert backlog_flags(plan_figures(fetch(scan("q", **{"Actual Rows": 9}))), 10) == ()
