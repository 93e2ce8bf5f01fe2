"""A worker fleet on this host: `harness run --fleet 3` and three `harness worker`
processes joining it over TCP (the embedded server listening on 127.0.0.1)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg
import pytest
from psycopg import sql

from harness import __version__
from harness.server.kinds import Server
from tests.integration.test_cli_runs import left_behind, marked_env, server_programs

FLEET = """\
name: fleet-test
workers: 6
strategies: [fifo, round_robin]
repetitions: 1
poll_interval_ms: 5
timeout_s: 60
tenant_groups:
  - {name: large, tenants: 1, jobs_per_tenant: 300, duration_ms: 5}
  - {name: small, tenants: 5, jobs_per_tenant: 2, duration_ms: 5, enqueue_at_s: 0.2}
"""
WAITING = re.compile(r"harness worker --dsn (?P<dsn>\S+) --run (?P<run>\S+)")


STARTED: list[subprocess.Popen[str]] = []


def harness(*args: str, stdout: int = subprocess.PIPE) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=marked_env(),
    )
    STARTED.append(process)
    return process


@pytest.fixture(autouse=True)
def none_left_running() -> Iterator[None]:
    """Every harness a test started ended, its pipes closed, even when the test failed
    before it waited for them: left to the garbage collector, their ResourceWarnings
    failed a later test (unraisable exceptions, under filterwarnings = error)."""
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=60)


def coordinator(
    tmp_path: Path, text: str, *options: str, server: tuple[str, ...] = ("--listen", "127.0.0.1:0")
) -> tuple[subprocess.Popen[str], str]:
    """`harness run --fleet` started (by default on an embedded server that members reach
    over loopback TCP); its line that tells the members how to join."""
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(text)
    run = harness(
        "run", str(scenario), "--results-dir", str(tmp_path / "results"), *server, *options
    )
    assert run.stdout is not None
    for line in run.stdout:
        if line.startswith("fleet: waiting for"):
            return run, line
    raise AssertionError(f"no fleet line: {run.communicate(timeout=60)}")


def members(line: str, count: int) -> list[subprocess.Popen[str]]:
    found = WAITING.search(line)
    assert found is not None
    return [harness("worker", "--dsn", found["dsn"], "--run", found["run"]) for _ in range(count)]


@pytest.mark.fleets
def test_three_members_run_a_scenario_and_jobs_csv_names_each(tmp_path: Path) -> None:
    run, line = coordinator(tmp_path, FLEET, "--fleet", "3", "--fleet-id", f"t{os.getpid()}")
    workers = members(line, 3)
    _, stderr = run.communicate(timeout=180)
    assert run.returncode == 0, stderr
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        assert "the run is done" in out
    folder = tmp_path / "results" / "latest"
    jobs = pd.read_csv(folder / "jobs.csv")
    assert len(jobs) == 2 * 310  # the books balanced: every job once, in each repetition
    assert set(jobs["member"]) == {1, 2, 3}  # --local-workers 0: every worker on a member
    assert jobs["host"].notna().all()
    document = json.loads((folder / "run.json").read_text())
    for entry in document["repetitions"]:
        shares = entry["fleet"]
        assert [(share["workers"], share["processes"]) for share in shares] == [(2, 2)] * 3
        assert len({share["pid"] for share in shares}) == 3
    assert document["options"]["fleet"] == 3


@pytest.mark.fleets
def test_a_killed_member_fails_the_run_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """A member killed outright (its own workers die with it) goes silent; the
    coordinator fails the run naming it, the other members stop, no process is left."""
    before = server_programs()
    slow = FLEET.replace(
        "jobs_per_tenant: 300, duration_ms: 5", "jobs_per_tenant: 600, duration_ms: 20"
    )
    run, line = coordinator(tmp_path, slow, "--fleet", "3", "--local-workers", "1")
    workers = members(line, 3)
    assert run.stdout is not None
    for line in run.stdout:  # every member joined, the first repetition under way
        if "fleet-test: 2 steps" in line:
            break
    time.sleep(2)
    workers[1].send_signal(signal.SIGKILL)
    workers[1].communicate(timeout=10)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 1, stderr
    assert re.search(r"run failed: fleet member \d \(host .*, pid \d+\) stopped answering", stderr)
    for worker in (workers[0], workers[2]):
        worker.communicate(timeout=60)
        assert worker.returncode == 1
    assert left_behind(before) == set()
    document = json.loads((tmp_path / "results" / "latest" / "run.json").read_text())
    assert document["status"] == "failed" and "stopped answering" in document["error"]


@pytest.mark.fleets
def test_a_member_of_another_run_or_version_is_refused(tmp_path: Path) -> None:
    """Wrong run id: refused (at once with --join-timeout 0). Another version (its row
    says so): refused. The coordinator waits far longer than the two members take to
    start and be refused (it waited 8 s, and on a busy machine had given up and stopped
    its server before the second member connected); a Ctrl-C ends it."""
    run, line = coordinator(tmp_path, FLEET, "--fleet", "1", "--fleet-timeout", "300")
    found = WAITING.search(line)
    assert found is not None
    wrong = harness("worker", "--dsn", found["dsn"], "--run", "no-such-run", "--join-timeout", "0")
    _, err = wrong.communicate(timeout=60)
    assert wrong.returncode == 2 and "no fleet run no-such-run on this server" in err
    schema = "harness_fleet_" + found["run"].replace("-", "_")
    with psycopg.connect(found["dsn"], autocommit=True) as conn:
        conn.execute(f"update {schema}.fleet_run set harness_version = '0.0.1'")  # type: ignore[arg-type]
    other = harness("worker", "--dsn", found["dsn"], "--run", found["run"])
    _, err = other.communicate(timeout=60)
    assert other.returncode == 2 and "coordinated by harness 0.0.1" in err
    assert run.poll() is None  # still waiting for a member that never came
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode != 0 and "Traceback" not in stderr


@pytest.mark.fleets
def test_a_coordinator_whose_members_never_come_fails_at_its_join_timeout(
    tmp_path: Path,
) -> None:
    run, _ = coordinator(tmp_path, FLEET, "--fleet", "1", "--fleet-timeout", "2")
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 1
    assert "only 0 of 1 fleet members joined within 2 s" in stderr


@pytest.mark.fleets
def test_a_member_whose_host_name_is_markup_is_named_as_it_is(tmp_path: Path) -> None:
    """A host name is the member's own text: `[/oops]` crashed the coordinator's console
    (rich markup). A member row written by hand joins and never speaks: the run fails
    naming it, in one line."""
    run, line = coordinator(tmp_path, FLEET, "--fleet", "1")
    found = WAITING.search(line)
    assert found is not None
    members_table = sql.Identifier(
        "harness_fleet_" + found["run"].replace("-", "_"), "fleet_members"
    )
    with psycopg.connect(found["dsn"], autocommit=True) as conn:
        conn.execute(
            sql.SQL("insert into {} (host, pid, harness_version) values (%s, 4711, %s)").format(
                members_table
            ),
            ("[/oops]", __version__),
        )
    out, err = run.communicate(timeout=120)
    assert "fleet: fleet member 1 (host [/oops], pid 4711) joined" in out
    assert run.returncode == 1, err
    assert "Traceback" not in err
    assert "run failed: fleet member 1 (host [/oops], pid 4711) stopped answering" in err


LIBRARY_FLEET = FLEET.replace("workers: 6", "workers: 4").replace(
    "strategies: [fifo, round_robin]", "strategies: [round_robin, procrastinate]"
)
PASSWORD = "fleet-Sekr3t-47"


@pytest.mark.fleets
def test_the_fleet_tables_hold_no_password_and_a_library_fleet_balances_its_books(
    server: Server, tmp_path: Path
) -> None:
    """The coordinator connects with a password (ignored by the test server's trust):
    nothing it writes for the members carries it, nor any DSN, and so neither does the
    server's statement log (every statement logged for the run); the members run SQL and
    library workers with their own, and the books balance."""
    dsn = psycopg.conninfo.make_conninfo(server.dsn, password=PASSWORD)
    fleet_id = f"nopw{os.getpid()}"
    log = Path(psycopg.conninfo.conninfo_to_dict(server.dsn)["host"]) / "postgres.log"
    logged_before = log.stat().st_size
    with statements_logged(server.dsn):
        run, _ = coordinator(
            tmp_path, LIBRARY_FLEET, "--fleet", "2", "--fleet-id", fleet_id, server=("--dsn", dsn)
        )
        seen = FleetTables(dsn, "harness_fleet_" + fleet_id)
        seen.start()
        workers = [harness("worker", "--dsn", dsn, "--run", fleet_id) for _ in range(2)]
        _, stderr = run.communicate(timeout=240)
        seen.stop.set()
        seen.join()
    with log.open("rb") as file:
        file.seek(logged_before)
        statements = file.read().decode(errors="replace")
    assert "insert into fleet_assignments" in statements  # the log did see the run
    assert PASSWORD not in statements
    assert run.returncode == 0, stderr
    for worker in workers:
        _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
    written = "\n".join(seen.rows)
    assert PASSWORD not in written and '"dsn"' not in written and "password" not in written
    rows = [row for text in seen.rows for row in _programs(text)]
    assert {row["program"] for row in rows} == {"sql.worker", "adapter.worker"}
    adapters = {row["spec"]["adapter"] for row in rows if row["program"] == "adapter.worker"}
    assert adapters == {"procrastinate"}
    jobs = pd.read_csv(tmp_path / "results" / "latest" / "jobs.csv")
    assert len(jobs) == 2 * 310  # every job once, for each queue
    assert set(jobs["member"]) == {1, 2}


@contextlib.contextmanager
def statements_logged(dsn: str) -> Iterator[None]:
    """Every statement of every new session in the server's log, for as long as it lasts."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("alter role current_user set log_statement = 'all'")
        try:
            yield
        finally:
            conn.execute("alter role current_user reset log_statement")


def _programs(text: str) -> list[dict[str, Any]]:
    row = json.loads(text)
    return list(row.get("programs", []))


class FleetTables(threading.Thread):
    """Every row of the fleet's tables while the run lasts, as JSON text."""

    TABLES = ("fleet_run", "fleet_members", "fleet_assignments", "fleet_reports")

    def __init__(self, dsn: str, schema: str) -> None:
        super().__init__(daemon=True)
        self.dsn, self.schema = dsn, schema
        self.rows: set[str] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.wait(0.05):
                for table in self.TABLES:
                    select = sql.SQL("select to_jsonb(t)::text from {} t")
                    try:
                        found = conn.execute(select.format(sql.Identifier(self.schema, table)))
                    except psycopg.errors.UndefinedTable:
                        continue
                    self.rows.update(text for (text,) in found)
