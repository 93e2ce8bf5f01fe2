"""One run on several PostgreSQL majors (pure): each figure per major, side by side.

The tables are each feature's own, derived per major and stacked with a `pg_version`
column (harness/run/render.py); here they are turned so that the majors are columns:
the reference figures, the dequeue plans (time, buffers, shape) and the waits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.analysis.plans import SHORT_FLAGS, index_name
from harness.report.cells import span, whole
from harness.report.sections import Section, Table
from harness.results.jobs import PG

MAJORS_INTRO = (
    "The same scenario on a fresh server of each PostgreSQL major, one after the other, "
    "in one run; each major's own tables follow. Ranges over repetitions (plans: over the "
    "JSON executions)."
)


def stack(parts: list[tuple[str, pd.DataFrame | None]]) -> pd.DataFrame | None:
    """Each major's table, one after the other, each row naming its major first."""
    given = [(version, table) for version, table in parts if table is not None]
    if not given:
        return None
    # An empty table (no row on one major) adds nothing: pandas warns of concatenating it.
    frames = [table.assign(**{PG: version}) for version, table in given if len(table)]
    stacked = pd.concat(frames, ignore_index=True) if frames else given[0][1].assign(**{PG: ""})
    return stacked[[PG, *(column for column in stacked.columns if column != PG)]]


def majors_section(
    versions: list[str],
    reference: pd.DataFrame | None,
    runs: pd.DataFrame | None,
    plans: pd.DataFrame | None,
    summary: pd.DataFrame | None,
) -> Section:
    """The run's figures with a column per major: reference, plans, waits, as it has them."""
    tables = []
    if reference is not None and len(reference):
        tables.append(reference_table(versions, reference))
    if plans is not None and len(plans):
        tables += plan_tables(versions, runs, plans)
    if summary is not None and len(summary):
        tables += wait_tables(versions, summary)
    return Section(
        "majors",
        "Across PostgreSQL majors",
        MAJORS_INTRO,
        tables=tables,
        console=tables,
        titled=True,
    )


def _headers(versions: list[str]) -> list[str]:
    return [f"PostgreSQL {version}" for version in versions]


def reference_table(versions: list[str], reference: pd.DataFrame) -> Table:
    """The source's figures, and the measured range on each major."""
    rows = []
    for figure, group in reference.groupby("figure", sort=False):
        first = group.iloc[0]
        by_version = {record[PG]: record for record in group.to_dict("records")}
        measured = [
            span(by_version[v]["measured_low"], by_version[v]["measured_high"])
            if v in by_version
            else "-"
            for v in versions
        ]
        reference_span = span(first["reference_low"], first["reference_high"])
        rows.append([str(figure), reference_span, *measured, str(first["unit"])])
    headers = ["figure", "reference", *_headers(versions), "unit"]
    return Table(headers, rows, "Beside the reference, per major")


Cell = Callable[[pd.DataFrame | None, dict[str, Any] | None], str]


@dataclass(frozen=True)
class _Captures:
    """Each capture (variant, strategy) with its executions and its shape, per major."""

    versions: list[str]
    keys: list[tuple[str, str]]
    executions: dict[tuple[str, str, str], pd.DataFrame]
    shapes: dict[tuple[str, str, str], dict[str, Any]]

    @classmethod
    def of(cls, versions: list[str], runs: pd.DataFrame | None, plans: pd.DataFrame) -> _Captures:
        keys = ["variant", "strategy"]
        executions = runs if runs is not None else pd.DataFrame(columns=[*keys, PG])
        return cls(
            versions,
            [(c["variant"], c["strategy"]) for c in plans.drop_duplicates(keys).to_dict("records")],
            {
                (str(variant), str(strategy), str(version)): group
                for (variant, strategy, version), group in executions.groupby(
                    [*keys, PG], sort=False
                )
            },
            {
                (r["variant"], r["strategy"], r[PG]): {str(k): v for k, v in r.items()}
                for r in plans.to_dict("records")
            },
        )

    def cells(self, cell: Cell) -> list[list[str]]:
        """A row per capture: its variant, strategy, and `cell` on each major."""
        return [
            [
                *key,
                *(
                    cell(self.executions.get((*key, v)), self.shapes.get((*key, v)))
                    for v in self.versions
                ),
            ]
            for key in self.keys
        ]


def plan_tables(versions: list[str], runs: pd.DataFrame | None, plans: pd.DataFrame) -> list[Table]:
    """Per capture: planning + execution ms and shared buffers (ranges over executions),
    and the plan's shape (how each job is reached, how often, dangerous shapes): the
    first major's, and each other major's where it differs."""
    captures = _Captures.of(versions, runs, plans)
    headers = ["variant", "strategy", *_headers(versions)]
    shapes = [[*row[:3], _other_majors(versions, row[2:])] for row in captures.cells(_shape)]
    return [
        Table(headers, captures.cells(_ms), "Dequeue, planning + execution (ms), per major"),
        Table(headers, captures.cells(_buffers), "Dequeue, shared buffers, per major"),
        Table(
            ["variant", "strategy", f"plan on PostgreSQL {versions[0]}", "on the other majors"],
            shapes,
            "Dequeue plan: jobs scan x loops, flags",
        ),
    ]


def _other_majors(versions: list[str], shapes: list[str]) -> str:
    """Where another major's plan differs from the first's: each such major's; else same."""
    others = [
        f"{v}: {shape}"
        for v, shape in zip(versions[1:], shapes[1:], strict=True)
        if shape != shapes[0]
    ]
    return "; ".join(others) if others else "the same"


def _ms(executions: pd.DataFrame | None, shape: dict[str, Any] | None) -> str:
    if executions is None or executions.empty:
        return _skipped(shape)
    return span(executions["total_ms"].min(), executions["total_ms"].max())


def _buffers(executions: pd.DataFrame | None, shape: dict[str, Any] | None) -> str:
    if executions is None or executions.empty:
        return _skipped(shape)
    low, high = executions["shared_buffers"].min(), executions["shared_buffers"].max()
    return whole(low) if low == high else f"{whole(low)}-{whole(high)}"


def _shape(executions: pd.DataFrame | None, shape: dict[str, Any] | None) -> str:
    if shape is None or shape.get("skipped"):
        return _skipped(shape)
    counted = shape["jobs_scan"] != "-" and not pd.isna(shape["jobs_loops"])
    loops = f" x{int(shape['jobs_loops'])}" if counted else ""  # '-': no jobs table (a library)
    path = f"{index_name(shape['jobs_scan'])}{loops}"
    flags = [SHORT_FLAGS.get(flag, flag) for flag in str(shape["flags"] or "").split("; ")]
    return "; ".join([path, *filter(None, flags)])


def _skipped(shape: dict[str, Any] | None) -> str:
    if shape is None:
        return "-"
    reason = str(shape.get("skipped") or "")
    return f"skipped ({reason.partition(':')[0]})" if reason else "-"


def wait_tables(versions: list[str], summary: pd.DataFrame) -> list[Table]:
    """Per strategy, workers and tenant class: the median wait and the last job done."""
    keys = ["strategy", "workers", "tenant_class"]
    groups = summary.groupby([*keys, PG], sort=False)
    rows = summary.drop_duplicates(keys)[keys].to_dict("records")

    def table(metric: str, title: str) -> Table:
        cells = [
            [
                r["strategy"],
                str(r["workers"]),
                r["tenant_class"],
                *(
                    _range(groups, (r["strategy"], r["workers"], r["tenant_class"], v), metric)
                    for v in versions
                ),
            ]
            for r in rows
        ]
        return Table(["strategy", "workers", "tenants", *_headers(versions)], cells, title)

    return [
        table("wait_p50_s", "Median wait (s), per major"),
        table("makespan_s", "Last job done (s), per major"),
    ]


def _range(groups: Any, key: tuple[Any, ...], metric: str) -> str:
    try:
        values = groups.get_group(key)[metric]
    except KeyError:
        return "-"
    return span(values.min(), values.max())
