"""`harness run` as a user runs it: external servers, interrupts, nothing left behind."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.etree import ElementTree

import pandas as pd
import psycopg
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.run import render
from harness.server.kinds import Server
from tests.conftest import SHORT_NOISY, harness_cli
from tests.integration.test_embedded import command_lines, postgres_processes

ONE_STRATEGY = SHORT_NOISY.replace("[fifo, round_robin]", "[fifo]")


def test_external_works_only_in_its_own_schema(server: Server, tmp_path: Path) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("create table public.precious (x int)")
        conn.execute("insert into public.precious values (42)")
    # The embedded server trusts local connections, so any password is accepted: it
    # stands for a real one that must not reach the results.
    done = harness_run(tmp_path, "--dsn", server.dsn + " password=s3cret-pw")
    assert done.returncode == 0, done.stderr
    assert "Results:" in done.stdout
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        assert conn.execute("select x from public.precious").fetchall() == [(42,)]
        schemas = conn.execute("select nspname from pg_namespace where nspname like 'harness%'")
        assert schemas.fetchall() == []
        conn.execute("drop table public.precious")
    run = json.loads((tmp_path / "results" / "latest" / "run.json").read_text())
    assert run["servers"][0]["provider"]["kind"] == "external"
    folder = (tmp_path / "results" / "latest").resolve()
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".html", ".csv", ".yaml"):
            assert "s3cret-pw" not in path.read_text(), path
    assert "s3cret-pw" not in done.stdout + done.stderr


def test_a_sql_ascii_database_runs_through_dsn(server: Server, tmp_path: Path) -> None:
    """A database that knows no encoding: psycopg would return its text as bytes."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("drop database if exists ascii_db")
        conn.execute("create database ascii_db encoding 'SQL_ASCII' template template0 locale 'C'")
    try:
        done = harness_run(tmp_path, "--dsn", server.dsn.replace("dbname=bench", "dbname=ascii_db"))
        assert done.returncode == 0, done.stderr
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("drop database ascii_db with (force)")
    run = json.loads((tmp_path / "results" / "latest" / "run.json").read_text())
    assert run["status"] == "complete"
    assert run["servers"][0]["postgres"]["key_settings"]["server_encoding"] == "SQL_ASCII"
    assert run["servers"][0]["postgres"]["version"].startswith("PostgreSQL 17.")
    assert [rep["books"] for rep in run["repetitions"]] == ["balanced"]


def harness_run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """`harness run` of the one-strategy scenario, to the end; no test of these looks at a
    figure, so none is drawn."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(ONE_STRATEGY)
    results = ("--results-dir", str(tmp_path / "results"), "--no-plots")
    return harness_cli("run", str(scenario), *results, *options, timeout=120)


# Set in the environment of every harness these tests start: its children inherit it, so a
# process left behind is found by it, not confused with other runs on a shared machine.
MARK = f"TQB_TEST_RUN={os.getpid()}"
# The temporary folder of these tests' harness runs: their servers' data directories are
# made there, so their postgres and initdb are told by their command line (they run in a
# minimal environment, without MARK). Root's and open to the run's user, who runs them.
RUNS_TMP = Path(tempfile.mkdtemp(prefix=f"tqb-tests-{os.getpid()}-"))
RUNS_TMP.chmod(0o755)
atexit.register(shutil.rmtree, RUNS_TMP, ignore_errors=True)


def marked_env() -> dict[str, str]:
    """The environment of a harness these tests start: MARK, and RUNS_TMP as TMPDIR."""
    name, _, value = MARK.partition("=")
    return {**os.environ, name: value, "TMPDIR": str(RUNS_TMP)}


def start_run(
    tmp_path: Path, text: str, command: str = "run", *options: str
) -> subprocess.Popen[str]:
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(text)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            command,
            str(scenario),
            "--results-dir",
            str(tmp_path / "results"),
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=marked_env(),
    )


def wait_for_line(run: subprocess.Popen[str], text: str) -> None:
    assert run.stdout is not None
    for line in run.stdout:
        if text in line:
            return
    raise AssertionError(f"the run ended without printing {text!r}")


def children_of(parent: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(proc.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(
    "sig",
    [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.thorough)],
    ids=["ctrl-c", "sigterm"],
)
def test_an_interrupted_run_stops_everything_and_keeps_what_was_measured(
    tmp_path: Path, sig: int
) -> None:
    # Two workers, 200 jobs of 20 ms: about 2 s a repetition.
    slow = ONE_STRATEGY.replace("duration_ms: 5\n  - name", "duration_ms: 20\n  - name")
    run = start_run(tmp_path, slow.replace("repetitions: 1", "repetitions: 3"))
    wait_for_line(run, "fifo x2 #1: 210 jobs, books balanced")
    time.sleep(0.5)  # repetition 2 is under way
    workers = children_of(run.pid)
    assert len(workers) >= 2, "the workers should be running now"
    run.send_signal(sig)
    _, stderr = run.communicate(timeout=90)
    assert run.returncode == 130, stderr
    assert stderr.strip().startswith("interrupted")
    assert "Traceback" not in stderr
    folder = tmp_path / "results" / "latest"
    document = json.loads((folder / "run.json").read_text())
    assert document["status"] == "interrupted"
    jobs = pd.read_csv(folder / "jobs.csv")
    assert set(jobs["repetition"]) == {1} and len(jobs) == 210
    data_dir = document["servers"][0]["provider"]["data_dir"]
    assert postgres_processes(data_dir) == []
    assert not Path(data_dir).exists()
    assert [pid for pid in workers if alive(pid)] == []


def test_a_users_schema_is_never_taken_over(server: Server, tmp_path: Path) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("create schema user_data")
        conn.execute("create table user_data.orders (x int)")
    try:
        plain = harness_run(tmp_path, "--dsn", server.dsn, "--schema", "user_data")
        assert plain.returncode == 2
        assert "schema user_data exists already" in plain.stderr
        forced = harness_run(
            tmp_path, "--dsn", server.dsn, "--schema", "user_data", "--reuse-schema"
        )
        assert forced.returncode == 2
        assert "was not created by the harness" in forced.stderr
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert conn.execute("select count(*) from user_data.orders").fetchone() == (0,)
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("drop schema user_data cascade")


def test_a_schema_left_behind_by_the_harness_can_be_reused(server: Server, tmp_path: Path) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("create schema bench_left")  # as a run killed outright leaves it
        conn.execute(
            "comment on schema bench_left is 'created by tenant-queue-bench run 0123456789abcdef'"
        )
        conn.execute("create table bench_left.jobs (id int)")
    done = harness_run(tmp_path, "--dsn", server.dsn, "--schema", "bench_left", "--reuse-schema")
    assert done.returncode == 0, done.stderr
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        gone = conn.execute("select 1 from pg_namespace where nspname = 'bench_left'")
        assert gone.fetchone() is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--schema", "Public; drop"], "--schema: 'Public; drop' is not allowed"),
        (["--schema", "pg_mine"], "--schema: 'pg_mine' is not allowed"),
        (["--reuse-schema"], "--reuse-schema needs --schema"),
    ],
)
def test_bad_schema_options_are_refused_before_connecting(
    server: Server, tmp_path: Path, options: list[str], message: str
) -> None:
    done = harness_run(tmp_path, "--dsn", server.dsn, *options)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {message}")


def server_programs() -> set[int]:
    """Pids of the postgres, initdb and harness worker processes that these tests' harness
    runs started (their environment carries MARK, or their command line RUNS_TMP)."""
    names = ("bin/postgres", "bin/initdb", "multiprocessing")
    return {
        pid
        for pid, cmdline in command_lines().items()
        if any(name in cmdline for name in names)
        and alive(pid)
        and (str(RUNS_TMP) in cmdline or _marked(pid))
    }


def left_behind(before: set[int], within_s: float = 30) -> set[int]:
    """The marked processes started since `before` still alive after at most `within_s`.
    A process killed outright takes its children with it by their parent-death signal,
    which the kernel delivers, and they act on, in their own time: a loaded machine took
    more than the 0.2-0.5 s the tests slept for it. A liveness bound, not a timing."""
    deadline = time.monotonic() + within_s
    while (left := server_programs() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _marked(pid: int) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return MARK.encode() in environ.split(b"\0")


BACKLOG_AND_RUN = (
    ONE_STRATEGY
    + """\
backlog:
  groups: [{name: old, tenants: 1, jobs_per_tenant: 300000, duration_ms: 0}]
explain:
  variants: [{name: deep}]
"""
)


# make test interrupts a run while its backlog loads and a plan capture; the other
# moments (initdb, the server's start, the drain) are make test-matrix's.
THOROUGH = pytest.mark.thorough


@pytest.mark.parametrize(
    ("command", "delay_s"),
    [
        pytest.param("run", 0.0, marks=THOROUGH),
        pytest.param("run", 0.4, marks=THOROUGH),
        ("run", 1.5),
        pytest.param("run", 3.0, marks=THOROUGH),
        ("explain", 2.0),
    ],
)
def test_an_interrupt_at_any_moment_leaves_no_process_behind(
    tmp_path: Path, command: str, delay_s: float
) -> None:
    """Ctrl-C while initdb or the server start, while the backlog loads or the workers
    drain it, or during a plan capture: whatever the moment, nothing outlives the harness."""
    before = server_programs()
    run = start_run(tmp_path, BACKLOG_AND_RUN, command)
    wait_for_line(run, "Starting PostgreSQL")
    time.sleep(delay_s)
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.communicate(timeout=90)
    shown = [line for line in stdout.splitlines() if line.strip()][-1:]
    print(f"{command} after {delay_s} s: exit {run.returncode}, last output {shown}")
    assert run.returncode in (130, 0), stderr  # 0: it finished before the signal came
    assert "Traceback" not in stderr
    assert left_behind(before) == set()
    document_path = tmp_path / "results" / "latest" / "run.json"
    if run.returncode == 130 and document_path.exists():
        status = json.loads(document_path.read_text())["status"]
        # complete: the signal came once the measurements were sealed, while the report was
        # written (the error line then names `harness report`) or after it
        report_done = (document_path.parent / "report.html").exists()
        assert status == "interrupted" or (
            status == "complete" and ("harness report" in stderr or report_done)
        ), (status, stderr)


def test_an_interrupt_while_the_report_is_written_keeps_a_complete_run(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C once the measurements are sealed, while the report is written (CI hit this
    window with `harness explain`): run.json says complete with its raw files, the error
    line says so rather than "interrupted", and `harness report` writes the rest."""

    def cut_short(folder: object, *, plots: bool) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(render, "render_run", cut_short)
    tmp_path.mkdir(parents=True, exist_ok=True)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(ONE_STRATEGY)
    options = ["--dsn", server.dsn, "--results-dir", str(tmp_path / "results")]
    run = CliRunner().invoke(app, ["run", str(scenario), *options])
    assert run.exit_code == 130, run.output
    folder = (tmp_path / "results" / "latest").resolve()
    assert f"its measurements are complete and kept: harness report {folder}" in run.stderr
    document = json.loads((folder / "run.json").read_text())
    assert (document["status"], document["files"]["jobs"]) == ("complete", "jobs.csv")
    assert not (folder / "report.html").exists()
    monkeypatch.undo()
    rendered = harness_cli("report", str(folder))
    assert rendered.returncode == 0, rendered.stderr
    assert (folder / "report.html").exists()


def test_a_threshold_not_kept_fails_the_run_naming_its_figure_and_value(tmp_path: Path) -> None:
    """Exit 1 with a line per threshold not kept, its measured value beside it, the run
    kept whole (thresholds.csv) and a JUnit test case per threshold; kept, exit 0; a
    figure the scenario does not measure, exit 2 in one line before any server starts."""
    failed, kept = "small.wait_p50_s{strategy=fifo} < 0", "small.wait_p50_s{strategy=fifo} < 1000"
    junit = tmp_path / "reports" / "thresholds.xml"
    done = harness_run(
        tmp_path / "a", "--threshold", failed, "--threshold", kept, "--junit", str(junit)
    )
    assert done.returncode == 1, done.stderr
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    (failure,) = suite.iter("failure")
    assert failure.get("message", "").startswith("measured ")
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("THRESHOLD")]
    assert line.startswith(f"THRESHOLD FAILED: {failed}: measured ") and "(median of 1)" in line
    table = pd.read_csv(tmp_path / "a" / "results" / "latest" / "thresholds.csv")
    assert table["kept"].tolist() == [False, True]
    assert harness_run(tmp_path / "b", "--threshold", kept).returncode == 0
    unknown = harness_run(tmp_path / "c", "--threshold", "tiny.wait_p50_s{strategy=fifo} < 1")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert (
        unknown.stderr.startswith("error: --threshold: ")
        and "tenant_class 'tiny' is not a tenant group" in unknown.stderr
    )
    assert not (tmp_path / "c" / "results").exists()
