"""EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) output as data: figures and dangerous shapes.

Pure functions over the JSON PostgreSQL returns; explain.py captures it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

QUEUE_TABLE = "jobs"
TENANT_TABLE = "queue_tenants"
SORTS_TENANTS = "sorts all tenants before the Limit (locks one job per tenant)"
WALKS_GLOBAL_INDEX = "walks all queued jobs (a global index or the table) filtering on tenant_id"


@dataclass(frozen=True)
class PlanFigures:
    planning_ms: float
    execution_ms: float
    shared_hit: int  # execution, whole tree
    shared_read: int
    outer_scan: str  # what the Limit walks first: the rotation's order or the queue's
    jobs_scan: str  # how each probe reaches a job
    jobs_loops: int  # probes: how often the jobs scan ran
    rows_removed: int  # rows read and thrown away by filters, over all loops
    flags: tuple[str, ...]

    @property
    def total_ms(self) -> float:
        return self.planning_ms + self.execution_ms

    @property
    def shared_buffers(self) -> int:
        return self.shared_hit + self.shared_read

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_ms": self.total_ms, "shared_buffers": self.shared_buffers}


@dataclass
class Capture:
    """One strategy's dequeue on one backlog variant: the raw plans and the text form."""

    variant: str
    strategy: str
    backlog: dict[str, int] = field(default_factory=dict)
    plans: list[list[dict[str, Any]]] = field(default_factory=list)  # one per repetition
    text: str = ""
    skipped: str | None = None
    load_s: float | None = None  # schema, backlog and VACUUM (ANALYZE), wall clock

    @property
    def figures(self) -> list[PlanFigures]:
        return [plan_figures(plan) for plan in self.plans]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan tree, depth first, parents before children."""
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def plan_figures(explained: list[dict[str, Any]]) -> PlanFigures:
    """Figures of one EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) result."""
    document = explained[0]
    root = document["Plan"]
    jobs = [node for node in nodes(root) if node.get("Relation Name") == QUEUE_TABLE]
    return PlanFigures(
        planning_ms=float(document["Planning Time"]),
        execution_ms=float(document["Execution Time"]),
        shared_hit=int(root.get("Shared Hit Blocks", 0)),
        shared_read=int(root.get("Shared Read Blocks", 0)),
        outer_scan=_describe(_first_scan(root)),
        jobs_scan=_describe(jobs[0]) if jobs else "-",
        jobs_loops=max((int(node.get("Actual Loops", 0)) for node in jobs), default=0),
        rows_removed=sum(_rows_removed(node) for node in nodes(root)),
        flags=tuple(dangerous_shapes(root)),
    )


def _first_scan(root: dict[str, Any]) -> dict[str, Any] | None:
    """The scan reached by always taking the first (outer) child from the top."""
    node: dict[str, Any] | None = root
    while node is not None and "Relation Name" not in node:
        children = node.get("Plans", [])
        node = children[0] if children else None
    return node


def _describe(scan: dict[str, Any] | None) -> str:
    if scan is None:
        return "-"
    index = scan.get("Index Name")
    where = f" using {index}" if index else ""
    return f"{scan['Node Type']}{where} on {scan.get('Relation Name')}"


def _rows_removed(node: dict[str, Any]) -> int:
    # EXPLAIN reports rows removed per loop, averaged and rounded; times loops gives the
    # total to within one row per loop.
    per_loop = float(node.get("Rows Removed by Filter", 0))
    return round(per_loop * int(node.get("Actual Loops", 1)))


def dangerous_shapes(root: dict[str, Any]) -> list[str]:
    """Plan shapes that make a round-robin dequeue costly or lock too much."""
    flags = []
    for node in nodes(root):
        if node["Node Type"] == "Sort" and _scans(node, TENANT_TABLE) and _scans(node, QUEUE_TABLE):
            flags.append(SORTS_TENANTS)
        if _filters_tenant_on_global_scan(node):
            flags.append(WALKS_GLOBAL_INDEX)
    return sorted(set(flags))


def _scans(node: dict[str, Any], relation: str) -> bool:
    return any(child.get("Relation Name") == relation for child in nodes(node))


def _filters_tenant_on_global_scan(node: dict[str, Any]) -> bool:
    if node.get("Relation Name") != QUEUE_TABLE:
        return False
    condition = node.get("Index Cond", "")
    return "tenant_id" in node.get("Filter", "") and "tenant_id" not in condition
