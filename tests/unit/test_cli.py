"""The CLI as a user meets it: a subprocess, its exit code and what it prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.queues.catalog import catalog
from tests.conftest import SCENARIOS, SHORT_NOISY, harness_cli


def test_validate_accepts_the_shipped_scenarios() -> None:
    done = harness_cli("validate", *map(str, sorted(SCENARIOS.glob("*.yaml"))))
    assert done.returncode == 0, done.stderr
    assert "noisy-neighbour.yaml: ok (1,050 jobs per repetition" in done.stdout


def test_a_bad_scenario_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        SHORT_NOISY.replace("duration_ms: 5\n  - name: small", "duration_ms: -1\n  - name: small")
    )
    done = harness_cli("validate", str(path))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith(f"error: {path}:11: tenant_groups[0].duration_ms:")
    assert "Traceback" not in done.stderr


def test_run_refuses_a_bad_scenario_before_starting_anything(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(SHORT_NOISY)
    bad.write_text("name: x\n")
    done = harness_cli("run", str(good), str(bad), "--results-dir", str(tmp_path / "results"))
    assert done.returncode == 2
    assert "bad.yaml:1: strategies: required field is missing" in done.stderr
    assert not (tmp_path / "results").exists()


def test_sql_prints_the_blocks_as_run() -> None:
    done = harness_cli("sql", "fifo")
    assert done.returncode == 0
    assert "-- name: dequeue   (harness/queues/sql/strategies/fifo.sql)" in done.stdout
    assert "for update skip locked;" in done.stdout


def test_sql_of_an_unknown_strategy_is_exit_2() -> None:
    done = harness_cli("sql", "lifo")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: unknown strategy 'lifo'; available: {', '.join(sorted(catalog()))}"
    )


def test_simulate_prints_the_ideal_and_never_overwrites_its_csv(tmp_path: Path) -> None:
    out = tmp_path / "ideal.csv"
    scenario = str(SCENARIOS / "noisy-neighbour.yaml")
    done = harness_cli("simulate", scenario, "--workers", "4", "--workers", "8", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "1,050 jobs of 11 tenants, 4 schedules" in done.stdout
    lines = out.read_text().splitlines()
    assert len(lines) == 1 + 2 * 2 * 3  # header; 2 strategies x 2 counts x 3 classes
    again = harness_cli("simulate", scenario, "--out", str(out))
    assert again.returncode == 2
    assert again.stderr.strip() == f"error: {out} exists; results are never overwritten"


def test_simulate_names_the_library_strategies_it_cannot_schedule() -> None:
    """They are known strategies, not unknown ones: the one line says why it stops."""
    done = harness_cli("simulate", str(SCENARIOS / "real-queues.yaml"))
    assert done.returncode == 2
    assert "'pgboss'" in done.stderr and "have no simulation policy" in done.stderr
    assert "the queue libraries have none" in done.stderr and "unknown" not in done.stderr
    assert "Traceback" not in done.stderr


LEGACY_MIX = Path(__file__).resolve().parent.parent / "fixtures" / "runs-v1" / "legacy-mix"


def test_simulate_at_a_runs_costs_beside_what_a_run_measured(tmp_path: Path) -> None:
    scenario = str(LEGACY_MIX / "scenario.yaml")
    # The fixture was written before calibration.json existed: one line says how to get it.
    done = harness_cli("simulate", scenario, "--calibration", str(LEGACY_MIX))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: {LEGACY_MIX}/calibration.json: no such file; `harness report {LEGACY_MIX}` "
        "writes it for a run of a timed scenario whose strategies have simulation policies"
    )
    # Fitted afresh from the raw files; compared with its only repetition there is nothing
    # left, compared with a copy of the folder (another run, to the command) there is.
    fitted = ["--calibration", str(LEGACY_MIX), "--fit-repetition", "1"]
    done = harness_cli("simulate", scenario, *fitted, "--measured", str(LEGACY_MIX))
    assert done.returncode == 2
    assert "every repetition was used to fit; none is left to compare" in done.stderr
    other = shutil.copytree(LEGACY_MIX, tmp_path / "other")
    done = harness_cli("simulate", scenario, *fitted, "--measured", str(other))
    assert done.returncode == 0, done.stderr
    assert "Calibrated schedule: legacy-mix" in done.stdout
    assert f"Measured: {other}/summary.csv" in done.stdout
    assert "round_robin_active" in done.stdout.split("Measured / predicted")[1]


def test_overhead_refuses_an_unknown_strategy_before_starting_a_server(tmp_path: Path) -> None:
    done = harness_cli("overhead", "--strategy", "nope", "--results-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("error: --strategy: unknown strategy 'nope'")
    assert "Starting PostgreSQL" not in done.stdout


def test_importing_the_package_main_runs_no_command() -> None:
    """`harness.__main__:app` was one of the names a fleet row could resolve; importing
    the module must not run the CLI."""
    code = "import harness.__main__; print('imported')"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "imported\n"), done.stderr


def test_a_members_run_id_follows_the_coordinators_rule() -> None:
    """`--run 'x y'` was taken as it came and put into the fleet's schema name."""
    done = harness_cli("worker", "--run", "x y", "--dsn", "postgresql://nobody@127.0.0.1:1/none")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --run: 'x y' is not allowed; use lowercase letters, digits and -, at most 40 "
        "characters"
    )


@pytest.mark.parametrize(
    ("strategy", "faults"),
    [("fifo", "lease: {seconds: 1}"), ("procrastinate", "worker_kills: [{at_s: 1}]")],
)
def test_a_fleet_refuses_faults_before_a_server_starts(
    tmp_path: Path, strategy: str, faults: str
) -> None:
    scenario = tmp_path / "faults.yaml"
    text = SHORT_NOISY.replace("[fifo, round_robin]", f"[{strategy}]")
    scenario.write_text(text + f"faults:\n  {faults}\n")
    done = harness_cli("run", str(scenario), "--fleet", "1", "--results-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: {scenario}: faults run on local workers only, not with --fleet"
    )
    assert "Starting PostgreSQL" not in done.stdout


def test_a_ctrl_c_after_the_command_is_done_changes_nothing() -> None:
    """CI sent SIGINT to an `explain` just as it finished: the signal interrupted the
    interpreter's shutdown, which printed a KeyboardInterrupt traceback. Once `main` is
    done, a SIGINT is ignored: here one comes after the command, where the shutdown is."""
    code = (
        "import os, signal, sys, time\n"
        "from harness.cli import main\n"
        "sys.argv = ['harness', '--version']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.2)\n"
        "    print('exit', done.code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.splitlines()[-1:]) == (0, ["exit 0"]), done.stderr
    assert "KeyboardInterrupt" not in done.stderr


@pytest.mark.parametrize(
    ("called", "named"),
    [
        ("tenant-queue-bench", "tenant-queue-bench"),
        ("harness", "harness"),
        ("__main__.py", "harness"),
    ],
)
def test_the_program_is_named_as_it_was_called(called: str, named: str) -> None:
    """The two installed programs and `python -m harness` (whose argv[0] is __main__.py)
    go through main(); its usage line names the one called."""
    code = (
        "import sys\n"
        "from harness.cli import main\n"
        f"sys.argv = ['/somewhere/{called}', '--help']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert f"Usage: {named} [OPTIONS] COMMAND [ARGS]..." in done.stdout
