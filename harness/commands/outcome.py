"""A run's tables on the console, as `harness run` and `harness report` show them."""

from __future__ import annotations

from rich.console import Console

from harness.report.tables import (
    FLAG_LEGEND,
    bloat_rows,
    console_table,
    fault_rows,
    ideal_rows,
    jain_rows,
    plans_rows,
    property_rows,
    reference_rows,
    summary_rows,
)
from harness.run.render import Rendered


def show_outcome(outcome: Rendered, console: Console) -> None:
    if outcome.reference is not None:
        title = f"Beside the reference ({outcome.tables.reference_source})"
        console.print(console_table(title, *reference_rows(outcome.reference)))
    if outcome.summary is not None:
        console.print(
            console_table(
                "Waits and last job done (seconds), range over repetitions",
                *summary_rows(outcome.summary),
            )
        )
    if outcome.tables.fairness is not None and len(outcome.tables.fairness):
        title = "Fairness: Jain's index over tenants' slowdowns (1 = all alike)"
        console.print(console_table(title, *jain_rows(outcome.tables.fairness)))
    ideal = outcome.tables.ideal
    if ideal is not None and len(ideal):
        main = ideal[ideal["figure"].isin(["wait_p50_s", "makespan_s"])]
        title = "Measured against the ideal schedule (seconds; all figures: ideal.csv)"
        console.print(console_table(title, *ideal_rows(main)))
    if outcome.tables.faults is not None:
        title = "Faults: lost, duplicated, stuck, dead-lettered, recovery (s) per repetition"
        console.print(console_table(title, *fault_rows(outcome.tables.faults)))
    if outcome.tables.bloat is not None:
        title = "Long transaction: claim latency and bloat before, during and after the hold"
        console.print(console_table(title, *bloat_rows(outcome.tables.bloat)))
    if outcome.plans is not None:
        title = f"Dequeue plans: EXPLAIN (ANALYZE, BUFFERS), medians. {FLAG_LEGEND}"
        console.print(console_table(title, *plans_rows(outcome.plans, compact=True)))
    if outcome.tables.properties is not None:
        console.print(
            console_table(
                "Properties checked from the recorded data",
                *property_rows(outcome.tables.properties),
            )
        )
    console.print(f"Results: {outcome.folder.path}", highlight=False)
    console.print(f"Report: {outcome.report}", highlight=False)
