"""The docs' tables, made from committed run folders by the site's own tables
(harness/site/tables.py), so that a page and the site never disagree and no figure in
the docs is typed by hand.

A table in a markdown file is a block between two markers:

    <!-- harness-table fairness results/real-queues/<run id> strategies=fifo,river -->
    ... (written by `harness docs-tables`) ...
    <!-- /harness-table -->

The opening marker names the table (TABLES), one or more run folders (relative to the
markdown file: docs/results/<scenario>/<run id>/, as `harness docs-tables --keep`
copies them) and, optionally, `strategies=` (those rows, in that order). What is between
the markers is the table and a line saying where it came from; everything else in the
file is left as it is.

`refreshed` reads a page and the run folders it names and gives the page's new text;
the command (harness/commands/docs_tables.py) writes it, or compares it (`--check`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.analysis.horizon import DRIFT_FIGURES, DRIFT_KEYS
from harness.errors import HarnessError
from harness.explore import RunData
from harness.report.cells import number, span
from harness.results.document import HARNESS
from harness.site import tables
from harness.site.runs import SiteRun

OPEN, CLOSE = "<!-- harness-table ", "<!-- /harness-table -->"
BLOCK = re.compile(
    re.escape(OPEN) + r"(?P<spec>[^\n]*?) -->\n(?P<body>.*?)" + re.escape(CLOSE), re.S
)

# What `--keep` copies of a run folder: its documents and the derived tables the docs
# read, never its raw files (jobs.csv, the samplers' series, the plans' raw captures),
# which stay in the user's results folder and are reproduced by the run's command.
KEPT = (
    "run.json",
    "results.json",
    "scenario.yaml",
    "summary.csv",
    "fairness.csv",
    "throughput.csv",
    "plans.csv",
    "library-faults.csv",
    "faults.csv",
    "horizon-drift.csv",
    "horizon-pgstattuple.csv",
    "mappings.csv",
    "idle.csv",
)


@dataclass(frozen=True)
class Spec:
    """One block's opening marker, read."""

    table: str
    runs: tuple[str, ...]
    strategies: tuple[str, ...] | None = None


def parse_spec(text: str, where: str) -> Spec:
    """A marker's words: the table's name, its run folders, `strategies=`; one line
    naming `where` (the file and line) and what is allowed otherwise."""
    words = text.split()
    if not words or words[0] not in TABLES:
        raise HarnessError(
            f"{where}: harness-table names no table ({words[0] if words else 'nothing'}); "
            f"one of {', '.join(TABLES)}"
        )
    runs: list[str] = []
    strategies: tuple[str, ...] | None = None
    for word in words[1:]:
        if word.startswith("strategies="):
            strategies = tuple(name for name in word.split("=", 1)[1].split(",") if name)
            if not strategies:
                raise HarnessError(f"{where}: strategies= names none; a comma-separated list")
        elif "=" in word:
            raise HarnessError(f"{where}: {word.split('=')[0]}= is not an option; strategies=")
        else:
            runs.append(word)
    if not runs:
        raise HarnessError(f"{where}: harness-table {words[0]} names no run folder")
    return Spec(words[0], tuple(runs), strategies)


def refreshed(path: Path) -> tuple[str, list[str]]:
    """`path`'s text with every block written anew from its run folders, and the blocks
    that changed (`table at line N`). A marker in a fenced code block is an example,
    left as it is; one opened and never closed is refused."""
    text = path.read_text()
    changed: list[str] = []
    parts, done = [], 0
    for fence in FENCE.finditer(text):
        parts += [_written(text, done, fence.start(), path, changed), fence.group(0)]
        done = fence.end()
    parts.append(_written(text, done, len(text), path, changed))
    return "".join(parts), changed


FENCE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)


def _written(text: str, start: int, end: int, path: Path, changed: list[str]) -> str:
    """text[start:end], outside any fence, its blocks written anew."""
    part = text[start:end]
    if part.count(OPEN) != len(BLOCK.findall(part)):
        line = text.count("\n", 0, start + part.rfind(OPEN)) + 1
        raise HarnessError(f"{path}:{line}: a harness-table marker without {CLOSE} after it")

    def written(match: re.Match[str]) -> str:
        line = text.count("\n", 0, start + match.start()) + 1
        spec = parse_spec(match["spec"], f"{path}:{line}")
        body = render(spec, path.parent, f"{path}:{line}")
        if body != match["body"]:
            changed.append(f"{spec.table} at line {line}")
        return f"{OPEN}{match['spec']} -->\n{body}{CLOSE}"

    return BLOCK.sub(written, part)


def render(spec: Spec, base: Path, where: str) -> str:
    """The block's body: its table and the line naming where it came from."""
    runs = [_run(base / relative, where) for relative in spec.runs]
    frame = TABLES[spec.table](runs)
    if frame.empty:
        raise HarnessError(f"{where}: {', '.join(spec.runs)} hold no {spec.table} table")
    if spec.strategies is not None:
        missing = [name for name in spec.strategies if name not in set(frame["strategy"])]
        if missing:
            raise HarnessError(
                f"{where}: {', '.join(missing)} not in the {spec.table} table of "
                f"{', '.join(spec.runs)}"
            )
        order = {name: rank for rank, name in enumerate(spec.strategies)}
        frame = frame[frame["strategy"].isin(order)]
    else:  # as the runs ran them: their scenarios' order
        ran = [entry.strategy for run in runs for entry in run.document.repetitions]
        order = {name: rank for rank, name in enumerate(dict.fromkeys(ran))}
    if spec.table != "best":  # the best mapping's table is in its own order
        rank = frame["strategy"].map(lambda name: order.get(name, len(order)))
        frame = frame.iloc[rank.argsort(kind="stable")]
    frame = frame.assign(strategy=[f"`{name}`" for name in frame["strategy"]])
    return _markdown(frame) + "\n" + _source(runs, spec) + "\n"


def _run(folder: Path, where: str) -> SiteRun:
    if not (folder / "run.json").is_file():
        raise HarnessError(f"{where}: {folder} is not a run folder (no run.json)")
    return SiteRun(RunData(folder.resolve()))


def _markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in frame.to_numpy()]
    return "\n".join([header, rule, *rows]) + "\n"


def _cell(value: object) -> str:
    """A table cell's text: a `|` in it escaped, a line break a space (a verdict's why)."""
    return " ".join(str(value).split("\n")).replace("|", "\\|")


def _source(runs: list[SiteRun], spec: Spec) -> str:
    """Where the table came from: each run's id, commit, start and command."""
    said = []
    for run, relative in zip(runs, spec.runs, strict=True):
        started = run.document.started_at[:16].replace("T", " ")
        said.append(
            f"run [`{run.run_id}`]({relative}/) (commit {run.short_commit}, "
            f"{started} UTC: `{run.command()}`)"
        )
    return f"*Generated by `harness docs-tables` from {'; '.join(said)}.*"


# -- the tables --------------------------------------------------------------------------


def _fairness(runs: list[SiteRun]) -> pd.DataFrame:
    table = tables.fairness(runs)
    if table.empty:
        return table
    return pd.DataFrame(
        {
            "strategy": table["strategy"],
            "small tenants' median wait (s)": _spans(table, "small_p50"),
            "small tenants' p95 wait (s)": _spans(table, "small_p95"),
            "large tenant's makespan (s)": _spans(table, "makespan"),
            "x FIFO": _spans(table, "x_fifo"),
            "throughput (jobs/s)": _spans(table, "throughput"),
            "Jain's index": _spans(table, "jain"),
        }
    )


def _best(runs: list[SiteRun]) -> pd.DataFrame:
    """Per library, its mapping whose large tenant finished nearest FIFO's (the lowest
    highest ratio over the repetitions), and whether that is within 2x of FIFO's."""
    table = tables.fairness(runs)
    table = table[table["library"] != HARNESS] if not table.empty else table
    if table.empty:
        return table
    best = table.sort_values(["x_fifo_high", "x_fifo_low"], kind="stable").groupby(
        "library", sort=False
    )
    rows = best.head(1).sort_values(["x_fifo_high", "x_fifo_low"], kind="stable")
    within = [
        "yes" if high <= WITHIN else "no" if low > WITHIN else "in some repetitions"
        for low, high in rows[["x_fifo_low", "x_fifo_high"]].to_numpy()
    ]
    return pd.DataFrame(
        {
            "library": rows["library"],
            "strategy": rows["strategy"],
            "setting": rows["setting"],
            "x FIFO": _spans(rows, "x_fifo"),
            f"within {WITHIN:g}x?": within,
        }
    )


WITHIN = 2.0  # issue 31's bar: a library's best mapping within 2x of FIFO's makespan


def _throughput(runs: list[SiteRun]) -> pd.DataFrame:
    table = tables.throughput(runs)
    if table.empty:
        return table
    return pd.DataFrame(
        {
            "strategy": table["strategy"],
            "library": table["library"],
            "setting": table["setting"],
            "workers": table["workers"].astype(str),
            "jobs/s": _spans(table, "jobs_s"),
            "claim p50 (ms)": _spans(table, "claim_p50_ms"),
            "drain (s)": _spans(table, "drain_s"),
            "jobs": _spans(table, "jobs"),
        }
    )


def _plans(runs: list[SiteRun]) -> pd.DataFrame:
    """A row per strategy and plan variant; where the runs captured several variants
    (a backlog grown), a row per strategy with each figure's values over the variants
    in their order ("5 / 5 / 6"), as a reader follows a curve."""
    table = tables.plans(runs)
    if table.empty:
        return table
    if table["variant"].nunique() > 1:
        return _plans_by_variant(table)
    return pd.DataFrame(
        {
            "strategy": table["strategy"],
            "variant": table["variant"],
            "queued jobs": [number(value) for value in table["queued_jobs"]],
            "shared buffers": [number(value) for value in table["shared_buffers"]],
            "execution (ms)": [number(value) for value in table["execution_ms"]],
            "flags": table["flags"],
        }
    )


def _plans_by_variant(table: pd.DataFrame) -> pd.DataFrame:
    variants = list(dict.fromkeys(table["variant"]))
    rows = []
    for strategy, group in table.groupby("strategy", sort=False):

        def over(column: str, group: pd.DataFrame = group) -> str:
            values = dict(zip(group["variant"], pd.to_numeric(group[column]), strict=True))
            return " / ".join(
                number(float(values[name])) if name in values else "-" for name in variants
            )

        flags = [flag for cell in group["flags"] for flag in str(cell).split(", ")]
        said = [flag for flag in dict.fromkeys(flags) if flag and flag != "-"]
        rows.append(
            {
                "strategy": strategy,
                "queued jobs": over("queued_jobs"),
                "shared buffers": over("shared_buffers"),
                "rows read by the busiest node": over("rows_read"),
                "execution (ms)": over("execution_ms"),
                "flags": ", ".join(said) or "-",
            }
        )
    frame = pd.DataFrame(rows)
    return frame.rename(columns={"queued jobs": f"queued jobs ({' / '.join(variants)})"})


def _faults(runs: list[SiteRun]) -> pd.DataFrame:
    table = tables.faults(runs)
    if table.empty:
        return table
    counts = {outcome: table[outcome].astype(int).astype(str) for outcome in tables.OUTCOMES}
    return pd.DataFrame(
        {
            "strategy": table["strategy"],
            **counts,
            "recovery max (s)": [number(value) for value in table["recovery_max_s"]],
            "promise": table["promise"],
            "verdict": table["verdict"],
        }
    )


def _horizon(runs: list[SiteRun]) -> pd.DataFrame:
    found = tables.horizon_rows(runs)  # the site's rows: each run's own drift table
    if found.empty:
        return found
    frame = found[[*DRIFT_KEYS, *DRIFT_FIGURES]].reset_index(drop=True)
    dead = tables.horizon_dead_percent(runs).set_index("strategy")
    said = []
    for strategy in frame["strategy"]:
        if strategy not in dead.index:
            said.append("-")
            continue
        row = dead.loc[strategy]
        said.append(f"`{row['relation']}`: {span(*row['held_end'])} / {span(*row['run_end'])}")
    verdict = frame.pop("verdict")
    frame["largest table's dead %, held phase's end / run's end"] = said
    frame["verdict"] = verdict
    return frame


def _mappings(runs: list[SiteRun]) -> pd.DataFrame:
    """An adversarial mix's table: the others' waits beside the flood's price, the
    run's report's own rows ("Per strategy", harness/analysis/mappings.py)."""
    return tables.mappings(runs)


def _idle(runs: list[SiteRun]) -> pd.DataFrame:
    """An idle window's table: each mapping's polls on the empty queue and the server's
    CPU meanwhile, the run's report's own rows (harness/analysis/idle.py)."""
    return tables.idle(runs)


def _spans(table: pd.DataFrame, name: str) -> list[str]:
    return [span(low, high) for low, high in table[[f"{name}_low", f"{name}_high"]].to_numpy()]


TABLES: dict[str, Callable[[list[SiteRun]], pd.DataFrame]] = {
    "fairness": _fairness,
    "best": _best,
    "throughput": _throughput,
    "plans": _plans,
    "faults": _faults,
    "horizon": _horizon,
    "mappings": _mappings,
    "idle": _idle,
}
