"""Help that shows what each command does: one-line summaries, defaults visible, metavars
that name what they take, and shell completion of scenario and strategy names."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from harness.cli import app
from harness.shipped import shipped_scenarios
from tests.conftest import harness_cli

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def help_of(command: str) -> str:
    done = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    return done.output


@pytest.mark.parametrize("command", COMMANDS)
def test_no_python_type_stands_for_what_an_option_takes(command: str) -> None:
    shown = help_of(command)
    types = re.findall(r"<[a-z][\w\[\], ]*>", shown)  # <bool>, <list[Path]>, <str>
    assert [name for name in types if name != "<run id>"] == []


@pytest.mark.parametrize("command", COMMANDS)
def test_no_default_vanished_into_markup(command: str) -> None:
    """rich reads `[default: x]` in a help string as a tag and drops it, leaving ' .'."""
    assert not re.search(r"\w \.(\s|$)", help_of(command))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_with_a_default_shows_it(command: str) -> None:
    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    shown = help_of(command)
    for param in click_command.params:
        valued = param.default not in (None, False, ()) and not getattr(param, "is_flag", False)
        if valued and param.name != "help":
            label = param.metavar if param.param_type_name == "argument" else param.opts[0]
            row = next(line for line in shown.splitlines() if line.split()[1:2] == [label])
            after = shown[shown.index(row) :].split("\n│ -", 1)[0].split("╰", 1)[0]
            assert "[default:" in after, f"{command} {label}"


def test_every_command_has_a_one_line_summary_in_the_list() -> None:
    listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    for command in COMMANDS:
        row = next(line for line in listed.splitlines() if f"│ {command} " in line)
        summary = row.split(command, 1)[1].strip(" │")
        assert summary.endswith(".") and len(summary) <= 90, (command, summary)


def complete(*words: str) -> list[str]:
    line = " ".join(["harness", *words])
    done = harness_cli(
        env={
            "_HARNESS_COMPLETE": "complete_bash",
            "COMP_WORDS": line,
            "COMP_CWORD": str(len(words)),
        }
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_scenario_names_complete() -> None:
    assert complete("run", "noisy") == ["noisy-neighbour"]
    assert set(complete("validate", "")) == set(shipped_scenarios())
    assert complete("run", "./noi") == []  # a path: the shell completes files


def test_strategy_names_complete() -> None:
    assert "round_robin_active" in complete("sql", "round")
    assert "pgboss_group_concurrency" in complete("explain", "x", "--strategy", "pgb")
