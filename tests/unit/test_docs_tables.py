"""`harness docs-tables`: the docs' tables are the site's tables of the run folders kept
under docs/results, never typed by hand; a table that differs from them is found, a
marker that cannot be read is one line, exit 2, and a kept run is never written over."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness.explore import RunData
from harness.site import markdown
from harness.site.markdown import BLOCK, CLOSE, FENCE, KEPT, OPEN, refreshed
from harness.site.runs import SiteRun
from tests.conftest import ROOT, harness_cli
from tests.unit.test_one_line_errors import refused

DOCS = ROOT / "docs"
KEPT_RUNS = sorted(path.parent for path in (DOCS / "results").glob("*/*/run.json"))


def _marked() -> list[Path]:
    return sorted(path for path in DOCS.rglob("*.md") if OPEN in path.read_text())


def test_every_docs_table_is_what_its_run_folders_give() -> None:
    """The drift test: every block in docs/ written anew from its run folders is the
    same text. A figure typed over, or a run folder changed, fails here."""
    files = _marked()
    assert files, "no docs page holds a harness-table block"
    for path in files:
        text, changed = refreshed(path)
        assert changed == [], f"{path}: {changed}: harness docs-tables {path.relative_to(ROOT)}"
        assert text == path.read_text()
    named = {
        (path.parent / word).resolve()
        for path in files
        for match in BLOCK.finditer(FENCE.sub("", path.read_text()))
        for word in match["spec"].split()[1:]
        if "=" not in word
    }
    assert named <= {run.resolve() for run in KEPT_RUNS}, "a block names a run not kept"


def test_every_kept_run_holds_only_documents_and_derived_tables() -> None:
    assert KEPT_RUNS
    for run in KEPT_RUNS:
        names = {path.name for path in run.iterdir()}
        assert "run.json" in names and names <= set(KEPT), (run, names - set(KEPT))
        assert json.loads((run / "run.json").read_text())["status"] == "complete"


def _page(tmp_path: Path, spec: str) -> Path:
    """A page in tmp_path with one block of `spec` (`RUN` for the first kept run's path
    relative to it), some text around it."""
    relative = os.path.relpath(KEPT_RUNS[0], tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        f"# A page\n\nBefore.\n\n{OPEN}{spec.replace('RUN', relative)} -->\n{CLOSE}\n\nAfter.\n"
    )
    return page


def _table_of(run: Path) -> str:
    """The table a kept run has: fairness if it ran small and large tenants, mappings for
    an adversarial mix, horizon for a long run."""
    summary = (run / "summary.csv").read_text() if (run / "summary.csv").is_file() else ""
    if ",small," in summary and ",large," in summary:
        return "fairness"
    return "mappings" if (run / "mappings.csv").is_file() else "horizon"


def test_a_table_is_written_checked_and_a_figure_typed_over_is_found(tmp_path: Path) -> None:
    table = _table_of(KEPT_RUNS[0])
    page = _page(tmp_path, f"{table} RUN")
    before = harness_cli("docs-tables", str(page), "--check")
    assert before.returncode == 1 and "Traceback" not in before.stderr
    assert f"{page}: {table} at line 5" in before.stderr
    assert harness_cli("docs-tables", str(page)).returncode == 0
    written = page.read_text()
    assert written.startswith("# A page\n\nBefore.\n\n") and written.endswith(
        f"{CLOSE}\n\nAfter.\n"
    )
    assert f"run [`{KEPT_RUNS[0].name}`]" in written and written.count("\n|") >= 3
    done = harness_cli("docs-tables", str(page), "--check")
    assert done.returncode == 0, done.stderr
    # a figure typed over: the first number of the first row
    typed = _typed_over(written)
    assert typed != written
    page.write_text(typed)
    found = harness_cli("docs-tables", str(page), "--check")
    assert found.returncode == 1 and f"{table} at line 5" in found.stderr
    assert page.read_text() == typed  # --check writes nothing


def _typed_over(text: str) -> str:
    """`text` with the first numeric cell of its table's first row typed over."""
    lines = text.split("\n")
    row = next(i for i, line in enumerate(lines) if line.startswith("|---")) + 1
    cells = lines[row].split(" | ")
    number = next(i for i, cell in enumerate(cells) if re.fullmatch(r"[0-9.,-]+", cell))
    cells[number] = "999999"
    lines[row] = " | ".join(cells)
    return "\n".join(lines)


def test_strategies_picks_the_rows_in_their_order(tmp_path: Path) -> None:
    run = KEPT_RUNS[0]
    strategies = list(dict.fromkeys(_strategies(run)))[:2][::-1]
    page = _page(tmp_path, f"{_table_of(run)} RUN strategies={','.join(strategies)}")
    assert harness_cli("docs-tables", str(page)).returncode == 0
    rows = [line.split(" | ")[0].lstrip("| ").strip("`") for line in page.read_text().splitlines()]
    assert [row for row in rows if row in _strategies(run)] == strategies


def _strategies(run: Path) -> list[str]:
    document = json.loads((run / "run.json").read_text())
    return [entry["strategy"] for entry in document["repetitions"]]


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("sizes RUN", "harness-table names no table (sizes); one of fairness, best, throughput"),
        ("fairness", "harness-table fairness names no run folder"),
        ("fairness RUN colour=red", "colour= is not an option; strategies="),
        ("fairness RUN strategies=", "strategies= names none"),
        ("fairness RUN strategies=nosuch", "nosuch not in the fairness table of"),
        ("fairness nowhere", "is not a run folder (no run.json)"),
    ],
)
def test_a_marker_that_cannot_be_read_is_one_line_naming_its_line(
    tmp_path: Path, spec: str, said: str
) -> None:
    if "RUN" in spec and "fairness" in spec and (table := _table_of(KEPT_RUNS[0])) != "fairness":
        spec = spec.replace("fairness", table)
        said = said.replace("fairness", table)
    page = _page(tmp_path, spec)
    line = refused(harness_cli("docs-tables", str(page)))
    assert line.startswith(f"{page}:5: ") and said in line, line
    assert OPEN in page.read_text() and "|" not in page.read_text()


def test_a_marker_in_a_fenced_example_is_left_as_it_is(tmp_path: Path) -> None:
    """docs/site.md shows the syntax in a code fence: an example, never a table."""
    page = tmp_path / "example.md"
    text = f"Write:\n\n```markdown\n{OPEN}fairness nowhere -->\n{CLOSE}\n```\n\n~~~\n{OPEN}x\n~~~\n"
    page.write_text(text)
    done = harness_cli("docs-tables", str(page), "--check")
    assert done.returncode == 0, done.stderr
    assert harness_cli("docs-tables", str(page)).returncode == 0 and page.read_text() == text
    page.write_text(text + f"\n{OPEN}nosuch -->\n{CLOSE}\n")  # outside a fence: read
    assert refused(harness_cli("docs-tables", str(page))).startswith(f"{page}:12: ")


def test_a_marker_never_closed_and_a_missing_page_are_refused(tmp_path: Path) -> None:
    page = tmp_path / "open.md"
    page.write_text(f"text\n{OPEN}fairness x -->\n| a |\n")
    assert refused(harness_cli("docs-tables", str(page))) == (
        f"{page}:2: a harness-table marker without {CLOSE} after it"
    )
    missing = tmp_path / "none.md"
    assert refused(harness_cli("docs-tables", str(missing))) == f"{missing}: no such markdown file"
    said = refused(harness_cli("docs-tables"))
    assert said == "docs-tables: name markdown files (their tables) or --keep RUN_DIR"


def test_keep_copies_once_and_never_writes_over(tmp_path: Path) -> None:
    """A kept run copied again is left as it is; one whose files differ is refused; a
    folder without run.json and a run not complete are refused."""
    source = tmp_path / "run"
    shutil.copytree(KEPT_RUNS[0], source)
    (source / "jobs.csv").write_text("raw\n")  # raw: never kept
    into = tmp_path / "kept"
    for _ in range(2):
        done = harness_cli("docs-tables", "--keep", str(source), "--into", str(into))
        assert done.returncode == 0, done.stderr
    (copy,) = into.glob("*/*")
    assert copy.name == KEPT_RUNS[0].name and not (copy / "jobs.csv").exists()
    assert sorted(p.name for p in copy.iterdir()) == sorted(p.name for p in KEPT_RUNS[0].iterdir())
    summary = source / "summary.csv"
    summary.write_text(summary.read_text().replace("1", "2", 1))
    line = refused(harness_cli("docs-tables", "--keep", str(source), "--into", str(into)))
    assert line == (
        f"{copy}: already holds another copy of run {copy.name}; remove it to keep this one"
    )
    line = refused(harness_cli("docs-tables", "--keep", str(tmp_path), "--into", str(into)))
    assert line == f"{tmp_path}: not a run folder (no run.json)"
    shutil.copytree(KEPT_RUNS[0], tmp_path / "cut")
    document = json.loads((tmp_path / "cut" / "run.json").read_text())
    document["status"] = "failed"
    (tmp_path / "cut" / "run.json").write_text(json.dumps(document))
    line = refused(harness_cli("docs-tables", "--keep", str(tmp_path / "cut"), "--into", str(into)))
    assert line == f"{tmp_path / 'cut'}: its run is failed; only a complete run is kept"


HORIZON_RUN = ROOT / "tests" / "fixtures" / "runs-horizon" / "real-queues-horizon-short"


def test_a_long_runs_table_is_its_reports_drift_table_and_its_largest_tables_dead_share(
    tmp_path: Path,
) -> None:
    """The horizon table: the run's own drift table (its report's) per strategy, and
    its largest table's dead percentage from pgstattuple at the held phase's end and
    the run's end."""
    (run,) = HORIZON_RUN.iterdir()
    page = tmp_path / "page.md"
    page.write_text(
        f"{OPEN}horizon {os.path.relpath(run, tmp_path)} strategies=pgqrs -->\n{CLOSE}\n"
    )
    assert harness_cli("docs-tables", str(page)).returncode == 0
    lines = page.read_text().splitlines()
    header, row = lines[1], lines[3]
    assert "largest table's dead %, held phase's end / run's end" in header
    assert row.startswith("| `pgqrs` | 2 | 2 | ") and row.endswith(" | growing (size) |")
    assert "`pgqrs_messages`: 19.1-21 / 2.51-3.32" in row
    assert lines[4] == "" and lines[5].startswith(
        f"*Generated by `harness docs-tables` from run [`{run.name}`]"
    )


def test_a_cell_with_a_pipe_or_a_line_break_keeps_its_row_whole() -> None:
    """A promise or a verdict's why may hold `|` or a line break: either would cut the
    markdown row; the one is escaped, the other a space."""
    assert markdown._cell("left | retried\nafter 1 s") == "left \\| retried after 1 s"


def test_a_block_of_several_runs_has_each_ones_rows_and_names_each(tmp_path: Path) -> None:
    """A comparison made a part at a time (`--strategy`, one run per part): one block
    over the parts' kept runs, a row per strategy of each, every run named."""
    (fixture,) = HORIZON_RUN.iterdir()
    kept = sorted((DOCS / "results" / "real-queues-horizon").iterdir())[0]
    page = tmp_path / "page.md"
    parts = " ".join(os.path.relpath(run, tmp_path) for run in (fixture, kept))
    page.write_text(f"{OPEN}horizon {parts} -->\n{CLOSE}\n")
    assert harness_cli("docs-tables", str(page)).returncode == 0
    text = page.read_text()
    for strategy in ("river", "dbscheduler", "pgqrs", "procrastinate", "pgboss"):
        assert f"\n| `{strategy}` |" in text
    assert f"run [`{fixture.name}`]" in text and f"run [`{kept.name}`]" in text


def _kept_with(name: str) -> list[Path]:
    found = [run for run in KEPT_RUNS if (run / name).is_file()]
    assert found, f"no kept run holds {name}: docs/real-queues.md's tables of it are made from one"
    return found


def _bounds(cell: str) -> tuple[float, float]:
    """A range cell's ends ("1.2", "1.2-1.5", "1,306")."""
    low, _, high = cell.replace(",", "").partition("-")
    return float(low), float(high or low)


def test_an_adversarial_mixs_table_is_over_its_runs_first_strategy() -> None:
    """The mappings table of each kept adversarial run: the flood named as mappings.csv
    names it, the run's first strategy's ratio over itself 1, every row's p50 wait at
    most its p95."""
    for run in _kept_with("mappings.csv"):
        table = markdown._mappings([SiteRun(RunData(run))])
        first = _strategies(run)[0]
        flood = pd.read_csv(run / "mappings.csv")["flood_class"].iloc[0]
        assert f"{flood} makespan (s)" in table.columns, (run, list(table.columns))
        assert list(table.loc[table["strategy"] == first, f"over {first}"]) == ["1"]
        for p50, p95 in table[["others' wait p50 (s)", "others' wait p95 (s)"]].to_numpy():
            assert _bounds(p50)[0] <= _bounds(p95)[1], (run, p50, p95)


def test_an_idle_windows_table_counts_fetches_among_the_statements() -> None:
    """The idle table of each kept run with an idle window: a fetch is one of the
    statements, so no row has more fetches than statements a second."""
    for run in _kept_with("idle.csv"):
        table = markdown._idle([SiteRun(RunData(run))])
        assert len(table) == len(set(_strategies(run)))
        for fetches, statements in table[["fetches/s", "statements/s"]].to_numpy():
            assert _bounds(fetches)[1] <= _bounds(statements)[1], (run, fetches, statements)


def test_a_backlog_grown_over_variants_is_one_row_per_strategy_in_the_variants_order() -> None:
    """The plans of a backlog grown from 10,000 to 1,000,000 jobs: each strategy's
    figures over the variants, in the order they ran, a variant not captured a `-`,
    and the flags of every variant, each once."""
    table = pd.DataFrame(
        {
            "strategy": ["fifo", "fifo", "lock", "lock", "lock"],
            "variant": ["jobs-10k", "jobs-100k", "jobs-10k", "jobs-100k", "jobs-1m"],
            "queued_jobs": [10_011, 100_011, 10_011, 100_011, 1_000_011],
            "shared_buffers": [5, 5, 30_288, 402_712, 40_214],
            "rows_read": [1, 1, 10_000, 100_000, 3_000_000],
            "execution_ms": [0.019, 0.018, 46.1, 417, 909],
            "flags": ["-", "-", "READS BACKLOG", "READS BACKLOG, GROWS WITH BACKLOG", "-"],
        }
    )
    frame = markdown._plans_by_variant(table)
    assert list(frame.columns) == [
        "strategy",
        "queued jobs (jobs-10k / jobs-100k / jobs-1m)",
        "shared buffers",
        "rows read by the busiest node",
        "execution (ms)",
        "flags",
    ]
    fifo, lock = frame.to_dict("records")
    assert fifo["shared buffers"] == "5 / 5 / -" and fifo["flags"] == "-"
    assert lock["shared buffers"] == "30,288 / 402,712 / 40,214"
    assert lock["rows read by the busiest node"] == "10,000 / 100,000 / 3,000,000"
    assert lock["flags"] == "READS BACKLOG, GROWS WITH BACKLOG"


def test_a_queue_that_ends_empty_names_the_table_that_grew(tmp_path: Path) -> None:
    """graphile-worker deletes its jobs: at the run's end each of its tables is one page
    (8 KB), and the largest then is a tie. The table named is the one that was largest
    at a boundary, its jobs table (600 KB at the held phase's end), not `migrations`."""
    kept = DOCS / "results" / "real-queues-horizon" / "20261205T230828Z-a0d8a4"
    page = tmp_path / "page.md"
    page.write_text(f"{OPEN}horizon {os.path.relpath(kept, tmp_path)} -->\n{CLOSE}\n")
    assert harness_cli("docs-tables", str(page)).returncode == 0
    row = page.read_text().splitlines()[3]
    assert row.startswith("| `graphile_worker` |")
    assert "| `_private_jobs`: 88.6 / 72.7 |" in row, row
