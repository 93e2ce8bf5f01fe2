"""The site's tables, made from the run folders' derived CSVs (summary.csv, fairness.csv,
throughput.csv, plans.csv, library-faults.csv, faults.csv), never from their raw files
again: each row names its run (`run_id`, `href`) so that every number links to the
report it came from.

Each figure is a range over the run's repetitions (`<figure>_low`, `<figure>_high`), as
the run's own report gives it. Where a scenario ran more than once, the front page takes
each strategy's newest run (`newest`); the per-library pages and the trends keep all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd

from harness.analysis.horizon import drift_rows
from harness.analysis.idle import idle_rows
from harness.analysis.mappings import mapping_rows
from harness.analysis.plans import SHORT_FLAGS, with_growth
from harness.results.document import HARNESS, QueueSetting, queue_settings
from harness.results.jobs import PG, RUN_ID
from harness.site.runs import SiteRun

SMALL, LARGE, ALL = "small", "large", "all"  # the noisy neighbour's tenant classes
FIFO = "fifo"  # the reference a makespan is compared with, where the run has it
KEYS = [RUN_ID, "href", "scenario", PG, "strategy", "workers"]


def _ranges(frame: pd.DataFrame, keys: list[str], figures: dict[str, str]) -> pd.DataFrame:
    """Per `keys`, each figure's lowest and highest value over the rows (repetitions)."""
    grouped = frame.groupby(keys, sort=False)
    parts = {}
    for name, column in figures.items():
        parts[f"{name}_low"] = grouped[column].min()
        parts[f"{name}_high"] = grouped[column].max()
    return pd.DataFrame(parts).reset_index()


def _with_settings(frame: pd.DataFrame, runs: Iterable[SiteRun]) -> pd.DataFrame:
    """Each row's library and setting (default, tuned), from its run's run.json."""
    settings = {run.run_id: run.settings() for run in runs}

    def of(row: pd.Series, part: int) -> str:
        found = settings.get(row[RUN_ID], {}).get(row["strategy"])
        return found[part] if found else (HARNESS, "default")[part]

    frame = frame.copy()
    frame["library"] = [of(row, 0) for _, row in frame.iterrows()]
    frame["setting"] = [of(row, 1) for _, row in frame.iterrows()]
    return frame


def stacked(runs: Iterable[SiteRun], name: str) -> pd.DataFrame:
    """A derived CSV of every complete run, concatenated, each row naming its run."""
    frames = [frame for run in runs if run.complete and (frame := run.table(name)) is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fairness(runs: list[SiteRun]) -> pd.DataFrame:
    """Per run, server, strategy and workers of a run with small and large tenants and
    no fault or held transaction beside its workers: the small tenants' median and p95
    wait, the large tenant's makespan and its ratio to FIFO's in the same repetition, the
    throughput and Jain's index."""
    summary = stacked([run for run in runs if not run.disturbed], "summary.csv")
    if summary.empty or not {SMALL, LARGE} <= set(summary["tenant_class"]):
        return pd.DataFrame()
    repetition = [*KEYS, "repetition"]
    by_class = summary.pivot_table(
        index=repetition,
        columns="tenant_class",
        values=["wait_p50_s", "wait_p95_s", "makespan_s", "throughput_jobs_s"],
        aggfunc="first",
    )
    wide = pd.DataFrame(
        {
            "small_p50": by_class[("wait_p50_s", SMALL)],
            "small_p95": by_class[("wait_p95_s", SMALL)],
            "makespan": by_class[("makespan_s", LARGE)],
            "throughput": by_class[("throughput_jobs_s", ALL)]
            if ("throughput_jobs_s", ALL) in by_class
            else float("nan"),
        }
    ).reset_index()
    wide = wide.dropna(subset=["small_p50", "makespan"])
    wide["x_fifo"] = wide["makespan"] / _fifo_makespan(wide)
    wide = wide.merge(_jain(runs), on=[RUN_ID, PG, "strategy", "workers", "repetition"], how="left")
    figures = {f: f for f in ["small_p50", "small_p95", "makespan", "x_fifo", "throughput", "jain"]}
    table = _ranges(wide, KEYS, figures)
    table["repetitions"] = wide.groupby(KEYS, sort=False).size().to_numpy()
    return _with_settings(table, runs)


def _fifo_makespan(wide: pd.DataFrame) -> pd.Series:
    """Each row's FIFO makespan: the same run, server, workers and repetition's."""
    same = [RUN_ID, PG, "workers", "repetition"]
    fifo = wide[wide["strategy"] == FIFO].set_index(same)["makespan"]
    return pd.Series(
        [fifo.get(key, float("nan")) for key in wide[same].itertuples(index=False, name=None)],
        index=wide.index,
    )


def _jain(runs: list[SiteRun]) -> pd.DataFrame:
    keys = [RUN_ID, PG, "strategy", "workers", "repetition"]
    found = stacked(runs, "fairness.csv")
    if found.empty:
        return pd.DataFrame(columns=[*keys, "jain"])
    return found.rename(columns={"jain_index": "jain"})[[*keys, "jain"]]


def throughput(runs: list[SiteRun]) -> pd.DataFrame:
    """Per run, server, strategy and workers of a drained backlog: jobs/s, claim latency
    and the drain's length, over repetitions."""
    found = stacked(runs, "throughput.csv")
    if found.empty:
        return found
    figures = {
        "jobs_s": "jobs_s",
        "claim_p50_ms": "claim_p50_ms",
        "drain_s": "drain_s",
        "jobs": "jobs",
    }
    found["scenario"] = [_scenario(runs, run_id) for run_id in found[RUN_ID]]
    return _with_settings(_ranges(found, KEYS, figures), runs)


def mappings(runs: list[SiteRun]) -> pd.DataFrame:
    """Per adversarial run, its report's "Per strategy" rows (mappings.csv through
    harness/analysis/mappings.py mapping_rows: the others' waits, the flood's makespan and
    that over the run's first strategy's, Jain's index, ranges over repetitions). Runs
    whose flood or first strategy differ name those two columns generally."""
    return _report_rows(runs, "mappings.csv", mapping_rows)


def idle(runs: list[SiteRun]) -> pd.DataFrame:
    """Per run with an idle window, its report's rows of that window (idle.csv through
    harness/analysis/idle.py idle_rows: fetches and statements a second, the server's CPU,
    the jobs done in it, ranges over repetitions, and the fetch marker)."""
    return _report_rows(runs, "idle.csv", idle_rows)


RowMaker = Callable[[pd.DataFrame, dict[str, QueueSetting]], tuple[list[str], list[list[str]]]]
FLOOD_MAKESPAN, OVER_FIRST = "flood makespan (s)", "over the run's first strategy"


def _report_rows(runs: list[SiteRun], name: str, rows_of: RowMaker) -> pd.DataFrame:
    """Each complete run's table `name` as its report's rows, one frame."""
    frames = []
    for run in runs:
        found = run.table(name) if run.complete else None
        if found is not None:
            headers, rows = rows_of(found, queue_settings(run.document))
            frames.append(pd.DataFrame(rows, columns=headers))
    if len({tuple(frame.columns) for frame in frames}) > 1:
        frames = [frame.rename(columns=_general) for frame in frames]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _general(column: str) -> str:
    """A mappings column named for one run's flood or first strategy, named for any."""
    if column.endswith(" makespan (s)"):
        return FLOOD_MAKESPAN
    return OVER_FIRST if column.startswith("over ") else column


def plans(runs: list[SiteRun]) -> pd.DataFrame:
    """Per run, server, plan variant and strategy: one dequeue's time (planning and
    execution where the harness EXPLAINs it; execution alone, `execution_ms`, for every
    capture, auto_explain's of a library's fetch too) and shared buffers (medians over
    the captured executions), the backlog it ran on, and its flags (the
    plan's dangerous shapes, the backlog read, the cost growing with the backlog)."""
    found = stacked(runs, "plans.csv")
    if found.empty:
        return found
    keys = [RUN_ID, "href", PG, "variant", "strategy"]
    for column in ("rows_read", "execution_ms"):  # plans.csv of an older harness
        if column not in found:
            found[column] = float("nan")
    medians = (
        found.groupby(keys, sort=False)
        .agg(
            total_ms=("total_ms", "median"),
            execution_ms=("execution_ms", "median"),
            shared_buffers=("shared_buffers", "median"),
            rows_read=("rows_read", "max"),
            queued_jobs=("queued_jobs", "max"),
            executions=("repetition", "size"),
            flags=("flags", "last"),
        )
        .reset_index()
    )
    grown = pd.concat(
        [with_growth(group) for _, group in medians.groupby([RUN_ID, PG], sort=False)],
        ignore_index=True,
    )
    grown["flags"] = grown["flags"].map(short_flags)
    grown["scenario"] = [_scenario(runs, run_id) for run_id in grown[RUN_ID]]
    return _with_settings(grown, runs)


def short_flags(flags: object) -> str:
    """A plan's flags as the report's tables write them short; '-' for none."""
    present = [flag for flag in str(flags if isinstance(flags, str) else "").split("; ") if flag]
    return ", ".join(SHORT_FLAGS.get(flag, flag) for flag in present) or "-"


OUTCOMES = ["ok", "duplicated", "stranded", "abandoned", "waiting", "lost"]


def faults(runs: list[SiteRun]) -> pd.DataFrame:
    """Per fault run and strategy of a library's fault scenario: the jobs in each outcome
    (summed over repetitions), the time until a killed worker's jobs started again, and
    the verdicts against the library's promise (library-faults.csv)."""
    found = stacked(runs, "library-faults.csv")
    if found.empty:
        return found
    found["scenario"] = [_scenario(runs, run_id) for run_id in found[RUN_ID]]
    keys = [RUN_ID, "href", "scenario", PG, "strategy"]
    grouped = found.groupby(keys, sort=False)
    table = grouped[OUTCOMES].sum()
    table["repetitions"] = grouped.size()
    table["recovery_max_s"] = grouped["recovery_max_s"].max()
    table["promise"] = grouped["promise"].agg(_joined)
    table["verdict"] = grouped["verdict"].agg(_joined)
    return _with_settings(table.reset_index(), runs)


def _joined(values: pd.Series) -> str:
    return "; ".join(dict.fromkeys(str(v) for v in values.dropna() if str(v))) or "-"


def sql_faults(runs: list[SiteRun]) -> pd.DataFrame:
    """Per fault run and strategy of the harness's own fault scenarios (faults.csv): each
    count summed over repetitions."""
    found = stacked(runs, "faults.csv")
    if found.empty:
        return found
    found["scenario"] = [_scenario(runs, run_id) for run_id in found[RUN_ID]]
    keys = [RUN_ID, "href", "scenario", PG, "strategy"]
    counts = [c for c in ("crashes", "lost", "duplicates", "stuck", "retried") if c in found]
    table = found.groupby(keys, sort=False)[counts].sum()
    table["repetitions"] = found.groupby(keys, sort=False).size()
    return table.reset_index()


def majors(runs: list[SiteRun]) -> pd.DataFrame:
    """The small tenants' median wait and the large tenant's makespan per strategy, a
    row per PostgreSQL major it ran on: a scenario's newest run on each major."""
    table = fairness(runs)
    if table.empty:
        return table
    newest = newest_rows(table, ["scenario", PG, "strategy", "workers"])
    several = newest.groupby(["scenario", "strategy", "workers"])[PG].transform("nunique") > 1
    return newest[several].sort_values(["scenario", "strategy", "workers", PG])


def newest_rows(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per `keys`, the row of the newest run (run ids begin with their UTC start)."""
    if table.empty:
        return table
    ordered = table.sort_values(RUN_ID, kind="stable")
    return ordered.groupby(keys, sort=False).tail(1).sort_index()


def _scenario(runs: list[SiteRun], run_id: str) -> str:
    return next(run.scenario for run in runs if run.run_id == run_id)


def horizon_rows(runs: list[SiteRun]) -> pd.DataFrame:
    """Per long run, server and strategy: the run's own drift table's row (its report's,
    harness/analysis/horizon.py drift_rows: ranges over the repetitions, the verdicts),
    with the run's keys and the library's setting."""
    frames = []
    for run in runs:
        drift = run.table("horizon-drift.csv") if run.complete else None
        if drift is None:
            continue
        for pg, part in drift.groupby(PG, sort=False):
            headers, rows = drift_rows(part)
            frame = pd.DataFrame(rows, columns=headers)
            keys = {RUN_ID: run.run_id, "href": run.href, "scenario": run.scenario, PG: pg}
            frames.append(frame.assign(**keys))
    if not frames:
        return pd.DataFrame()
    return _with_settings(pd.concat(frames, ignore_index=True), runs)


HELD_END, RUN_END = "held->recovery", "recovery->end"  # pgstattuple's phase boundaries


def horizon_dead_percent(runs: list[SiteRun]) -> pd.DataFrame:
    """Per strategy, the queue's largest table at the run's end (by pgstattuple's
    table_len; among tables of one size then, the largest at any boundary: a queue that
    deletes its jobs ends with every table a page or two) and its dead percentage at the
    held phase's end and the run's end, each a range over the repetitions
    (horizon-pgstattuple.csv); none where pgstattuple was not on the server."""
    found = stacked(runs, "horizon-pgstattuple.csv")
    if found.empty:
        return pd.DataFrame(columns=["strategy", "relation", "held_end", "run_end"])
    rows = []
    for strategy, part in found.groupby("strategy", sort=False):
        ended = part[part["boundary"] == RUN_END]
        if ended.empty:
            continue
        peak = part.groupby("relation")["table_len"].max().rename("peak")
        ranked = ended.join(peak, on="relation").sort_values(["table_len", "peak", "relation"])
        relation = ranked.iloc[-1]["relation"]
        mine = part[part["relation"] == relation]
        held = mine[mine["boundary"] == HELD_END]["dead_percent"]
        end = mine[mine["boundary"] == RUN_END]["dead_percent"]
        rows.append(
            {
                "strategy": strategy,
                "relation": relation,
                "held_end": (held.min(), held.max()),
                "run_end": (end.min(), end.max()),
            }
        )
    return pd.DataFrame(rows, columns=["strategy", "relation", "held_end", "run_end"])
