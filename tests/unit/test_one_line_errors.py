"""Mistakes a user can make, each refused by the CLI in one line, exit 2, no traceback, and
before a server starts; and user or database text printed as it is, never as rich markup."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from harness.report.console import console_table
from tests.conftest import ROOT, SHORT_NOISY, harness_cli

LEGACY = ROOT / "tests/fixtures/runs-v1/legacy-mix"


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a refusal, without its `error: ` prefix."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Starting PostgreSQL" not in done.stdout
    return done.stderr.removeprefix("error: ").rstrip("\n")


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "short.yaml"
    path.write_text(SHORT_NOISY)
    return path


def test_a_results_dir_that_is_a_file_is_refused_before_the_server_starts(
    scenario: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    results.write_text("not a folder")
    done = harness_cli("run", str(scenario), "--results-dir", str(results / "deeper"))
    assert refused(done) == (
        f"--results-dir: {results} is a file; run folders go in a folder (made if missing)"
    )


def test_a_scenario_folder_that_is_a_file_is_refused_before_the_server_starts(
    scenario: Path, tmp_path: Path
) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "short-noisy").write_text("")
    done = harness_cli("run", str(scenario), "--results-dir", str(tmp_path / "results"))
    assert refused(done).startswith(f"--results-dir: {tmp_path / 'results' / 'short-noisy'} is")


@pytest.mark.parametrize("command", ["overhead", "isolation"])
def test_the_experiments_refuse_a_results_dir_that_is_a_file(command: str, tmp_path: Path) -> None:
    """overhead made its folder only once it had measured: the whole measurement was lost."""
    results = tmp_path / "results"
    results.write_text("")
    done = harness_cli(command, "--results-dir", str(results))
    assert refused(done).startswith(f"--results-dir: {results} is a file")


def test_a_real_latest_folder_is_refused_before_any_run_is_marked_running(
    scenario: Path, tmp_path: Path
) -> None:
    """The run could not point latest at itself and ended in a traceback, its run.json
    left `running`: now nothing starts."""
    latest = tmp_path / "results" / "latest"
    latest.mkdir(parents=True)
    done = harness_cli("run", str(scenario), "--results-dir", str(tmp_path / "results"))
    assert refused(done) == (
        f"--results-dir: {latest} is a folder, not the link the harness points at the newest "
        "run; move it away or give another --results-dir"
    )
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["latest"]


def strategies(tmp_path: Path, name: str, content: bytes | None) -> Path:
    folder = tmp_path / "strategies"
    folder.mkdir()
    if content is None:
        (folder / name).mkdir()
    else:
        (folder / name).write_bytes(content)
    return folder


@pytest.mark.parametrize(
    ("name", "content", "refusal"),
    [
        (
            "mine.sql",
            b"-- name: dequeue\nselect \xff;\n",
            "{path}: not UTF-8 (byte 24); a strategy is text",
        ),
        ("x.sql", None, "{path}: --strategies-dir holds a .sql that is not a file"),
        (
            "mine.sql",
            b"-- claim: hodl\n-- name: dequeue\nselect 1, 2;\n",
            "{path}:1: -- claim: 'hodl' is not allowed; it takes short or hold",
        ),
        (
            "[red]x.sql",
            b"-- name: dequeue\nselect 1, 2;\n",
            "{path}: a strategy is named by its file: lowercase letters, digits, _ and -, "
            "starting with a letter or digit, then .sql",
        ),
    ],
)
def test_a_strategy_file_that_cannot_be_taken_is_one_line_naming_it(
    scenario: Path, tmp_path: Path, name: str, content: bytes | None, refusal: str
) -> None:
    folder = strategies(tmp_path, name, content)
    done = harness_cli("validate", str(scenario), "--strategies-dir", str(folder))
    assert refused(done) == refusal.format(path=folder / name)


def test_claim_short_and_hold_are_still_taken(scenario: Path, tmp_path: Path) -> None:
    folder = strategies(tmp_path, "mine.sql", b"-- claim:  hold \n-- name: dequeue\nselect 1;\n")
    (folder / "other.sql").write_text("-- claim: short\n-- name: dequeue\nselect 1;\n")
    done = harness_cli("validate", str(scenario), "--strategies-dir", str(folder))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("content", "refusal"),
    [
        (b'{"format_version": 1, "probes": \xff}', "not UTF-8 (byte 32); not a baseline"),
        (b"[]", "not a baseline: a JSON object with its format_version"),
        (b'{"format_version": 1}', "pg_version: Field required; not a baseline this harness"),
    ],
)
def test_a_baseline_that_is_no_baseline_is_one_line_before_the_server_starts(
    tmp_path: Path, content: bytes, refusal: str
) -> None:
    bad = tmp_path / "dequeue.json"
    bad.write_bytes(content)
    done = harness_cli("check", "--baseline", str(bad), cwd=ROOT)
    assert refused(done).startswith(f"{bad}: {refusal}")


@pytest.mark.parametrize("name", ["../../../elsewhere", "skewed/../../x", "Skewed"])
def test_report_refuses_explain_names_that_are_not_the_contracts(tmp_path: Path, name: str) -> None:
    """run.json names each capture's files, explain/<variant>/<strategy>.json: a name
    with a separator or `..` would have the report read outside the run folder."""
    run = tmp_path / "run"
    shutil.copytree(LEGACY, run)
    document = json.loads((run / "run.json").read_text())
    document["plans"][0]["variant"] = name
    (run / "run.json").write_text(json.dumps(document))
    done = harness_cli("report", str(run), timeout=120)
    assert refused(done).startswith(
        f"{run / 'run.json'}: plans.0.variant: String should match pattern"
    )


def test_compare_of_two_scenarios_warns_above_its_table_everywhere(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(LEGACY, first)
    shutil.copytree(LEGACY, second)
    document = json.loads((second / "run.json").read_text())
    document["scenario"]["name"] = "other"
    (second / "run.json").write_text(json.dumps(document))
    out = tmp_path / "out"
    done = harness_cli("compare", str(first), str(second), "--out", str(out), timeout=120)
    assert done.returncode == 0, done.stderr
    warning = "WARNING: A and B ran different scenarios (A legacy-mix, B other)"
    assert done.stdout.index(warning) < done.stdout.index("Waits, A =")
    markdown = (out / "compare.md").read_text()
    assert markdown.index(warning) < markdown.index("| strategy | workers |")
    assert "different scenarios" in (out / "waits.svg").read_text()


def test_compare_of_two_versions_of_a_scenario_warns(tmp_path: Path) -> None:
    second = tmp_path / "b"
    shutil.copytree(LEGACY, second)
    document = json.loads((second / "run.json").read_text())
    document["scenario"]["sha256"] = "f" * 64
    (second / "run.json").write_text(json.dumps(document))
    out = tmp_path / "out"
    compare = ["compare", str(LEGACY), str(second), "--out", str(out), "--no-plots"]
    done = harness_cli(*compare, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ran different versions of scenario legacy-mix (sha256 A 067b6f6dc7ba, B ffff" in (
        done.stdout
    )
    assert "different versions" in (out / "compare.md").read_text()
    assert sorted(path.name for path in out.iterdir()) == ["compare.csv", "compare.md"]


def test_compare_of_one_scenario_gives_no_warning(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "o"), "--no-plots"]
    done = harness_cli("compare", str(LEGACY), str(LEGACY), *out)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stdout


def test_a_path_with_markup_is_printed_as_it_is(tmp_path: Path) -> None:
    """`[/x]` in a path stopped validate with rich's MarkupError; `[bold]` vanished."""
    for folder in ("a[/x]", "[bold]b"):
        path = tmp_path / folder / "s.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(SHORT_NOISY)
        done = harness_cli("validate", str(path))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{path}: ok")


def test_a_table_shows_names_and_server_words_as_they_are_on_any_console() -> None:
    console = Console(record=True, width=200)  # markup on, as rich has it by default
    console.print(console_table("t [/x]", ["h [bold]", "n"], [["[red]strategy", "a [/b] c"]]))
    shown = console.export_text()
    assert "t [/x]" in shown and "h [bold]" in shown
    assert "[red]strategy" in shown and "a [/b] c" in shown
