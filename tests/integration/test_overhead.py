"""harness overhead on the real server: both arms drain the queue, the books balance,
the generated scripts run, the results are written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from rich.console import Console

from harness.commands.overhead import overhead_command
from harness.experiments.overhead import Load, OverheadSettings, measure
from harness.queues.sql.strategies import Strategy
from harness.results.contract import OTHER_FOLDERS
from harness.server.kinds import Server, ServerOptions
from harness.server.providers import choose_provider
from harness.server.schema import own_schema

SCHEMA = "overhead_test"


@pytest.fixture
def schema(server: Server) -> Iterator[str]:
    with own_schema(server.dsn, SCHEMA):
        yield SCHEMA


def done_jobs(server: Server) -> int:
    with psycopg.connect(server.dsn, options=f"-c search_path={SCHEMA}") as conn:
        row = conn.execute("select count(*) from jobs where status = 'done'").fetchone()
    assert row is not None
    return int(row[0])


def test_both_arms_do_every_job_once(
    server: Server, schema: str, strategies: dict[str, Strategy]
) -> None:
    """Every job once in each arm, and a rate from each (printed, with their ratio: how
    near the harness comes to pgbench is a figure of the machine, judged on a quiet one
    by test_the_harness_drains_within_the_order_of_pgbench, `make throughput`)."""
    load = Load(work_ms=0, jobs=400)
    rates = {}
    for arm in ("pgbench", "harness"):
        measured = measure(server.dsn, schema, strategies["fifo"], arm, load, 4, 1)
        assert done_jobs(server) == load.jobs, arm
        assert measured.throughput > 0 and measured.claim_ms > 0, arm
        rates[arm] = measured.throughput
    print(f"harness / pgbench: {rates['harness'] / rates['pgbench']:.2f} ({rates})")


@pytest.mark.throughput
def test_the_harness_drains_within_the_order_of_pgbench(
    server: Server, schema: str, strategies: dict[str, Strategy]
) -> None:
    """The harness's rate within the same order of magnitude as pgbench's. A throughput
    benchmark: the arms run one after the other and load the CPU unlike each other (a
    Python worker per client against pgbench's C), so load that comes or goes between
    them moves the ratio (0.24 seen under load 4-12 while other checkouts ran their
    suites). It runs in `make throughput` (and `make test-matrix`), not beside make test's
    other tests; the pair is measured up to three times and judged on the best ratio."""
    load = Load(work_ms=0, jobs=400)
    ratios = []
    for _ in range(3):
        rates = {}
        for arm in ("pgbench", "harness"):
            measured = measure(server.dsn, schema, strategies["fifo"], arm, load, 4, 1)
            assert done_jobs(server) == load.jobs, arm
            rates[arm] = measured.throughput
        ratios.append(rates["harness"] / rates["pgbench"])
        if ratios[-1] >= 0.3:
            break
    assert max(ratios) >= 0.3, ratios


@pytest.mark.parametrize("name", ["round_robin_active", "capped", "fifo_hold"])
def test_the_generated_script_runs_for_strategies_with_more_statements(
    server: Server, schema: str, strategies: dict[str, Strategy], name: str
) -> None:
    """served and retire in the claim, a guard on tenant_cap, the lock held for the work."""
    measured = measure(server.dsn, schema, strategies[name], "pgbench", Load(2, 40), 2, 1)
    assert done_jobs(server) == 40
    assert measured.makespan_s > 0


def test_the_command_prints_the_table_and_writes_the_results(
    server: Server, tmp_path: Path
) -> None:
    console = Console(record=True, width=160)
    settings = OverheadSettings(jobs=200, work_jobs=40, work_ms=5, clients=2, rounds=1)
    choice = choose_provider(ServerOptions(dsn=server.dsn), {})
    code = overhead_command(settings, choice, tmp_path, None, False, console)
    assert code == 0  # a missed goal fails only with --strict
    shown = console.export_text()
    assert "harness / pgbench" in shown and "Results:" in shown
    (folder,) = (tmp_path / "overhead").iterdir()
    document = json.loads((folder / "overhead.json").read_text())
    assert document["format_version"] == 1
    assert [entry["work_ms"] for entry in document["summary"]] == [0, 5]
    assert len(document["measurements"]) == 4  # 2 loads x 2 arms x 1 round
    assert document["metadata"]["postgres"]["server_version_num"] >= 170000
    assert r"\gset" in document["pgbench"]["scripts"]["5"]
    assert "| harness / pgbench |" in (folder / "overhead.md").read_text()
    written = {path.name for path in folder.iterdir()}
    assert written == {entry.pattern for entry in OTHER_FOLDERS["overhead"]}
    results = json.loads((folder / "results.json").read_text())
    assert (results["kind"], results["run_id"]) == ("overhead", folder.name)
    names = [figure["name"] for figure in results["figures"]]
    assert len(names) == len(set(names)) == 2 * 3 * 3  # loads x metrics x (2 arms + ratio)
    throughput = next(f for f in results["figures"] if f["name"].endswith("pgbench: throughput"))
    assert throughput["unit"] == "jobs/s" and throughput["lower_is_better"] is False
