"""EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) output as data: figures and dangerous shapes,
per execution and per capture, and the plans' section of the report.

Pure functions over the JSON PostgreSQL returns; harness/run/captures.py captures it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from harness.report.cells import number, whole
from harness.report.sections import Section, Table

if TYPE_CHECKING:  # pandas only where a table is made: validate and the catalog go without
    import pandas as pd

QUEUE_TABLE = "jobs"
TENANT_TABLE = "queue_tenants"
SORTS_TENANTS = "sorts all tenants before the Limit (locks one job per tenant)"
WALKS_GLOBAL_INDEX = "walks all queued jobs (a global index or the table) filtering on tenant_id"
# A fetch whose cost follows the backlog, whatever the queue's tables are called: one plan
# node reads at least half the queued jobs (a scan, a sort, an aggregate, a filter that
# throws them away), or, across the variants of a growing backlog, its buffers or the rows
# its busiest node reads grow with the queued jobs at least as fast as their square root
# (both: a plan that turns from an index walk into a sequential scan as the backlog grows
# reads fewer buffers, each holding more rows).
READS_BACKLOG = "a node reads at least half the queued jobs: the fetch's cost follows the backlog"
GROWS_WITH_BACKLOG = "its buffers or rows read grow with the queued jobs across the variants"
BACKLOG_SHARE = 0.5
BACKLOG_FLOOR = 1000  # below it, reading half the queue is no sign of anything
GROWTH_EXPONENT = 0.5  # buffers ~ jobs^k, k at least this: it grows with the backlog


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
    pg_version: str = ""  # the server it ran on, major.minor

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
        # auto_explain (a library's fetch captured from its own worker) has no planning time
        planning_ms=float(document.get("Planning Time", "nan")),
        execution_ms=float(document["Execution Time"]),
        shared_hit=int(root.get("Shared Hit Blocks", 0)),
        shared_read=int(root.get("Shared Read Blocks", 0)),
        outer_scan=describe(_first_scan(root)),
        jobs_scan=describe(jobs[0]) if jobs else "-",
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


def describe(node: dict[str, Any] | None) -> str:
    """A plan node as the tables show it: its type, the index it uses and the relation it
    reads, where it has them ("Index Scan using jobs_queued_tenant on jobs")."""
    if node is None:
        return "-"
    index, relation = node.get("Index Name"), node.get("Relation Name")
    using = f" using {index}" if index else ""
    return f"{node['Node Type']}{using}{f' on {relation}' if relation else ''}"


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


def reads_backlog(root: dict[str, Any], queued_jobs: int) -> bool:
    """Whether one node of the plan reads at least half the queued jobs."""
    if queued_jobs < BACKLOG_FLOOR:
        return False
    return any(rows_read(node) >= BACKLOG_SHARE * queued_jobs for node in nodes(root))


def rows_read(node: dict[str, Any]) -> int:
    """Rows a node produced and threw away, over all its loops."""
    per_loop = sum(
        float(node.get(key, 0))
        for key in ("Actual Rows", "Rows Removed by Filter", "Rows Removed by Join Filter")
    )
    return round(per_loop * int(node.get("Actual Loops", 1)))


def _scans(node: dict[str, Any], relation: str) -> bool:
    return any(child.get("Relation Name") == relation for child in nodes(node))


def _filters_tenant_on_global_scan(node: dict[str, Any]) -> bool:
    if node.get("Relation Name") != QUEUE_TABLE:
        return False
    condition = node.get("Index Cond", "")
    return "tenant_id" in node.get("Filter", "") and "tenant_id" not in condition


PLAN_KEYS = ["variant", "strategy"]


def plan_runs(captures: list[Capture]) -> pd.DataFrame:
    """One row per captured execution: the figures of each JSON plan, and the backlog."""
    import pandas as pd

    rows = [
        {
            "variant": capture.variant,
            "strategy": capture.strategy,
            "repetition": index,
            **capture.backlog,
            "load_s": capture.load_s,
            **figures.as_dict(),
            "rows_read": max(rows_read(node) for node in nodes(plan[0]["Plan"])),
            "flags": "; ".join(_flags(figures, plan, capture.backlog)),
        }
        for capture in captures
        for index, (figures, plan) in enumerate(
            zip(capture.figures, capture.plans, strict=True), start=1
        )
    ]
    return pd.DataFrame(rows)


def _flags(figures: PlanFigures, plan: list[dict[str, Any]], backlog: dict[str, int]) -> list[str]:
    """The plan's shapes, and whether it reads the backlog it ran on."""
    reads = reads_backlog(plan[0]["Plan"], backlog.get("queued_jobs", 0))
    return [*figures.flags, *([READS_BACKLOG] if reads else [])]


def plans_summary(runs: pd.DataFrame, captures: list[Capture]) -> pd.DataFrame:
    """Per variant and strategy: median times, buffers and the plan's shape; skips kept."""
    import pandas as pd

    if len(runs):
        medians = (
            runs.groupby(PLAN_KEYS, sort=False)
            .agg(
                repetitions=("repetition", "size"),
                planning_ms=("planning_ms", "median"),
                execution_ms=("execution_ms", "median"),
                total_ms=("total_ms", "median"),
                shared_hit=("shared_hit", "median"),
                shared_read=("shared_read", "median"),
                shared_buffers=("shared_buffers", "median"),
                outer_scan=("outer_scan", "last"),
                jobs_scan=("jobs_scan", "last"),
                jobs_loops=("jobs_loops", "max"),
                rows_removed=("rows_removed", "max"),
                rows_read=("rows_read", "max"),
                flags=("flags", "last"),
            )
            .reset_index()
        )
    else:
        medians = pd.DataFrame(columns=PLAN_KEYS)
    shapes = pd.DataFrame(
        [
            {"variant": c.variant, "strategy": c.strategy, **c.backlog, "skipped": c.skipped or ""}
            for c in captures
        ]
    )
    return with_growth(shapes.merge(medians, on=PLAN_KEYS, how="left"))


def with_growth(plans: pd.DataFrame) -> pd.DataFrame:
    """Each strategy captured on backlogs of different sizes, flagged where its buffers or
    rows read grow with the queued jobs (GROWTH_EXPONENT): a curve, not a guess."""

    if "queued_jobs" not in plans or "shared_buffers" not in plans:
        return plans
    plans = plans.copy()
    for strategy in plans["strategy"].unique():
        mine = plans["strategy"] == strategy
        growth = max(growth_exponent(plans[mine], figure) for figure in GROWING_FIGURES)
        if growth >= GROWTH_EXPONENT:
            plans.loc[mine, "flags"] = plans.loc[mine, "flags"].map(_and_growing)
    return plans


GROWING_FIGURES = ("shared_buffers", "rows_read")


def growth_exponent(captures: pd.DataFrame, figure: str = "shared_buffers") -> float:
    """k in figure ~ queued_jobs^k, from the smallest and the largest backlog captured;
    0 with fewer than two backlog sizes."""

    measured = captures.dropna(subset=[figure])
    measured = measured[(measured[figure] > 0) & (measured["queued_jobs"] > 0)]
    if measured["queued_jobs"].nunique() < 2:
        return 0.0
    ordered = measured.sort_values("queued_jobs")
    least, most = ordered.iloc[0], ordered.iloc[-1]
    jobs = math.log(most["queued_jobs"] / least["queued_jobs"])
    return math.log(most[figure] / least[figure]) / jobs


def _and_growing(flags: Any) -> str:
    present = [flag for flag in str(flags if isinstance(flags, str) else "").split("; ") if flag]
    return "; ".join([*present, GROWS_WITH_BACKLOG])


SHORT_FLAGS = {
    SORTS_TENANTS: "SORTS TENANTS",
    WALKS_GLOBAL_INDEX: "GLOBAL WALK",
    READS_BACKLOG: "READS BACKLOG",
    GROWS_WITH_BACKLOG: "GROWS WITH BACKLOG",
    "-": "-",
}


_COMPACT_PLAN_COLUMNS = [
    "variant",
    "strategy",
    "tenants (idle)",
    "planning ms",
    "execution ms",
    "total ms",
    "shared buffers",
    "jobs scan",
    "loops",
    "flags",
]


def plans_rows(
    plans: pd.DataFrame, compact: bool = False, short_flags: bool | None = None
) -> tuple[list[str], list[list[str]]]:
    """Per variant and strategy: medians over repetitions, the plan's shape, its flags.

    `compact` (for terminals) keeps the columns that fit; `short_flags` (default: as
    compact) names flags by their short names (SHORT_FLAGS, with a legend beside).
    """
    short = compact if short_flags is None else short_flags
    records = [_plan_cells(record, short) for record in plans.to_dict("records")]
    headers = _COMPACT_PLAN_COLUMNS if compact else list(records[0]) if records else []
    return headers, [[record[column] for column in headers] for record in records]


def _plan_cells(r: dict[Any, Any], short: bool) -> dict[str, str]:
    cells = {
        "variant": r["variant"],
        "strategy": r["strategy"],
        "tenants (idle)": f"{r['registered_tenants']:,} ({r['idle_tenants']:,})",
    }
    if r["skipped"]:
        # A reason reads "<why in a word>: <what to do>"; the compact table keeps the word.
        skipped = f"skipped ({r['skipped'].partition(':')[0]})" if short else r["skipped"]
        return {**cells, **dict.fromkeys(_FIGURE_COLUMNS, "-"), "flags": skipped}
    flags = r["flags"] or "-"
    if short:
        flags = ", ".join(SHORT_FLAGS.get(flag, flag) for flag in flags.split("; "))
    return {
        **cells,
        "planning ms": number(r["planning_ms"]),
        "execution ms": number(r["execution_ms"]),
        "total ms": number(r["total_ms"]),
        "shared buffers": whole(r["shared_buffers"]),
        "shared hit": whole(r["shared_hit"]),
        "shared read": whole(r["shared_read"]),
        "index under the Limit": index_name(r["outer_scan"]),
        "jobs scan": index_name(r["jobs_scan"]),
        "loops": whole(r["jobs_loops"]),
        "rows removed": whole(r["rows_removed"]),
        "rows read": whole(r.get("rows_read", float("nan"))),
        "flags": flags,
    }


FLAG_LEGEND = "; ".join(f"{short}: {flag}" for flag, short in SHORT_FLAGS.items() if flag != "-")


_FIGURE_COLUMNS = [
    "planning ms",
    "execution ms",
    "total ms",
    "shared buffers",
    "shared hit",
    "shared read",
    "index under the Limit",
    "jobs scan",
    "loops",
    "rows removed",
    "rows read",
]


def index_name(scan: str) -> str:
    """'Index Scan using x on jobs' -> 'x'; other scans as they are."""
    return scan.split(" using ", 1)[1].split(" on ", 1)[0] if " using " in scan else scan


PLANS_INTRO = (
    "EXPLAIN (ANALYZE, BUFFERS) of each strategy's dequeue on the backlog, inside BEGIN ... "
    "ROLLBACK; medians over the JSON repetitions (plans.csv has each). Total = planning + "
    "execution. Raw plans: explain/."
)


def plans_section(plans: pd.DataFrame) -> Section:
    console = Table.of(
        plans_rows(plans, compact=True),
        f"Dequeue plans: EXPLAIN (ANALYZE, BUFFERS), medians. {FLAG_LEGEND}",
    )
    return Section(
        "plans",
        "Dequeue plans",
        PLANS_INTRO,
        tables=[Table.of(plans_rows(plans))],
        console=[console],
        html_tables=[Table.of(plans_rows(plans, short_flags=True))],
    )
