"""Queues in any language through the adapter contract (docs/adapters.md): the conformance
kit passes on every shipped adapter and fails, naming the check, on each broken fixture
(tests/fixtures/adapters/); every mapping runs through the repetition with balanced books
and leaves nothing on the server; their fetches are captured; a fleet member runs them.

Every language and every adapter is slow: those tests are marked `adapters` and run by
`make test-adapters` (.ci/run runs it after `make test`). `make test` keeps one quick
smoke test: the kit on the small Python fixture adapter, through the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.analysis.plans import nodes
from harness.queues.base import QueueEntry, Site
from harness.queues.catalog import catalog
from harness.queues.contract import runtime
from harness.queues.contract.manifest import Adapter, load_adapters
from harness.queues.contract.process import run_role
from harness.queues.contract.protocol import Versions
from harness.queues.contract.queue import ContractSpec, connection_of
from harness.run.conformance import CHECKS, conformance
from harness.run.repetition import Repetition, run_repetition
from harness.run.scenario_run import RunOptions
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.server.connections import connect
from harness.server.kinds import Server
from harness.server.schema import own_schema
from tests.conftest import ROOT, harness_cli
from tests.integration.conftest import Quiet, run_yaml
from tests.integration.test_fleet import FLEET, coordinator, members
from tests.integration.test_libraries import (
    PLANS,
    SMALL,
    _library_objects,
    _schemas_like,
)

slow = pytest.mark.adapters
FIXTURES = ROOT / "tests" / "fixtures" / "adapters"
SHIPPED = ("pgboss", "graphile", "minion", "delayed_job", "river", "dbscheduler")
ADAPTER_TABLES = {  # the table each adapter's library locks a row of in its fetch
    "pgboss": "job_common",
    "graphile": "_private_jobs",
    "minion": "minion_jobs",
    "delayed_job": "delayed_jobs",
    "river": "river_job",
    "dbscheduler": "scheduled_tasks",
}
# The fixtures are Python with psycopg: the harness's own interpreter first on PATH.
ON_PATH = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def shipped(name: str) -> Adapter:
    """A shipped adapter, its runtime checked: a test of it skips, saying what to install."""
    adapter = load_adapters()[name]
    problem = runtime.missing(adapter)
    if problem is not None:
        pytest.skip(problem)
    return adapter


def strategies_of(*names: str) -> list[str]:
    adapters = load_adapters()
    return [m.strategy for name in names for m in adapters[name].manifest.mappings]


def entry(strategy: str) -> QueueEntry:
    return catalog()[strategy]


def adapter_of(strategy: str) -> Adapter:
    return next(a for a in load_adapters().values() if strategy.startswith(a.name))


def test_the_kit_passes_on_a_small_python_adapter_through_the_cli(server: Server) -> None:
    """The smoke test `make test` keeps: `harness adapter-test` on the fixture that
    conforms, as a library's CI would run it: exit 0, every check ok."""
    done = harness_cli(
        "adapter-test",
        "pyqueue",
        "--adapters-dir",
        str(FIXTURES),
        "--dsn",
        server.dsn,
        timeout=240,
        env=ON_PATH,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-len(CHECKS) :] == [f"ok   {check}" for check in CHECKS]


@slow
@pytest.mark.parametrize("name", SHIPPED)
def test_the_kit_passes_on_every_shipped_adapter(server: Server, name: str) -> None:
    verdict = conformance(shipped(name), server.dsn)
    assert verdict.problems == {check: [] for check in CHECKS}


BROKEN = {  # fixture -> the check it fails, and how the line starts
    "twice": ("books", "mapping one_queue: 2 job(s) claimed more than once: 1, 2"),
    "junk": ("protocol", "mapping one_queue: adapter junk: protocol: stdout line 2 is not a JSON"),
    "never_stops": ("stop", "mapping one_queue: no `stopped` within 30 s of `stop`"),
    "leaves_table": (
        "schema",
        "created outside the run's schema: relation public.pyqueue_tqb_kit_",
    ),
}


@slow
@pytest.mark.parametrize("name", BROKEN)
def test_the_kit_fails_a_broken_adapter_naming_its_check(server: Server, name: str) -> None:
    """Exit 1, and a FAIL line for its check alone; every other check ok; no traceback."""
    check, start = BROKEN[name]
    try:
        done = harness_cli(
            "adapter-test",
            name,
            "--adapters-dir",
            str(FIXTURES),
            "--dsn",
            server.dsn,
            timeout=240,
            env=ON_PATH,
        )
    finally:
        _drop_leftovers(server)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert failed and all(line.startswith(f"FAIL {check}: ") for line in failed), failed
    assert failed[0].startswith(f"FAIL {check}: {start}"), failed
    assert "Traceback" not in done.stdout + done.stderr


def _drop_leftovers(server: Server) -> None:
    """What `leaves_table` leaves behind, which the kit is there to find."""
    with connect(server.dsn) as conn:
        rows = conn.execute(
            "select format('drop table public.%I', relname) from pg_class"
            " where relnamespace = 'public'::regnamespace and relname like 'pyqueue\\_%'"
            " and relkind = 'r'"
        ).fetchall()
        for (statement,) in rows:
            conn.execute(statement)


@slow
@pytest.mark.parametrize("strategy", strategies_of(*SHIPPED))
def test_every_adapter_mapping_runs_through_the_repetition_with_balanced_books(
    server: Server, strategy: str
) -> None:
    """The repetition's own path (install, crew, ledger, books) through ContractQueue; every
    job once with its tenant, its duration and the contract's times in order; nothing of
    the library left on the server afterwards."""
    shipped(adapter_of(strategy).name)
    inputs = RunInputs.of(Scenario.model_validate({**SMALL, "strategies": [strategy]}))
    site = Site(server.dsn, f"adapter_{strategy}")
    with own_schema(site.dsn, site.schema):
        queue = entry(strategy).make(site, inputs)
        result = run_repetition(queue, site, inputs, Repetition(strategy, 2, 1), Quiet())
        provenance = queue.provenance()
    assert result.books == "balanced"
    assert sorted(row["job_id"] for row in result.jobs) == list(range(1, inputs.total_jobs + 1))
    for row in result.jobs:
        assert row["tenant_id"] == inputs.workload.tenant_ids[row["job_id"] - 1]
        assert row["enqueued_at"] <= row["started_at"] <= row["finished_at"]
        assert row["duration_ms"] == inputs.workload.duration_ms(row["job_id"])
    assert provenance.protocol == adapter_of(strategy).manifest.protocol and provenance.versions
    assert _schemas_like(server, site.schema) == []
    assert _library_objects(server) == []


@slow
@pytest.mark.parametrize(
    "strategy",
    [
        "pgboss_group_concurrency",
        "graphile_worker_queue_per_tenant",
        "minion_lock_per_tenant",
        "delayed_job_priority_per_tenant",
        "river",
        "river_queue_per_tenant",
        "dbscheduler_lock_and_fetch",
    ],
)
def test_an_adapters_plan_capture_is_its_fetch_as_it_ran(
    server: Server, tmp_path: Path, strategy: str
) -> None:
    """`harness explain` on an adapter: auto_explain's plans of its own fetch, sent as
    `plan` events, each locking a row of its library's table."""
    shipped(adapter_of(strategy).name)
    text = yaml.safe_dump({**PLANS, "strategies": [strategy]})
    outcome = run_yaml(server, tmp_path, text, RunOptions(timed=False, plots=False))
    plans = outcome.tables.runs
    assert plans is not None and len(plans) == 2  # repeat 2: the fetches after the first
    assert (plans["queued_jobs"] == 203).all() and (plans["shared_buffers"] > 0).all()
    table = next(table for name, table in ADAPTER_TABLES.items() if strategy.startswith(name))
    saved = json.loads(
        (outcome.folder.path / "explain" / "backlog" / f"{strategy}.json").read_text()
    )
    scans = {
        node.get("Relation Name") for plan in saved["plans"] for node in nodes(plan[0]["Plan"])
    }
    assert table in scans
    assert _library_objects(server) == []


@slow
def test_pgboss_says_where_it_cannot_do_as_the_scenario_asks(server: Server) -> None:
    """pg-boss refuses a poll below 0.5 s: its `versions` event says so, which run.json
    keeps and the report puts above its waits (tests/unit/test_library_common.py)."""
    adapter = shipped("pgboss")
    graphile = shipped("graphile")
    site = Site(server.dsn, "unused")
    _, said = run_role(
        adapter, ContractSpec(adapter, "one_queue", site, 10).config("versions"), Versions
    )
    assert said.unlike_the_scenario[0].startswith("polls every 0.5 s, not every 10 ms")
    _, other = run_role(
        graphile, ContractSpec(graphile, "one_queue", site, 10).config("versions"), Versions
    )
    assert other.unlike_the_scenario == []


@slow
def test_the_node_adapters_connect_as_the_config_says_tls_included(server: Server) -> None:
    """node-postgres reads no libpq DSN: the runner maps the config's libpq parts onto its
    own, the sslmode a managed server needs as its ssl."""
    adapter = shipped("pgboss")
    folder = runtime.run_dir(adapter)
    parts = connection_of(server.dsn).model_copy(update={"sslmode": "require"})
    config = {"connection": parts.model_dump(), "explain_options": None}
    verify = {**config, "connection": {**config["connection"], "sslmode": "verify-full"}}
    script = (
        "import('./common.mjs').then((m) => console.log(JSON.stringify("
        f"[m.pgConfig({json.dumps(config)}, 5), m.pgConfig({json.dumps(verify)}, 5)])))"
    )
    node = str(folder / "node_modules" / ".bin" / "node")
    done = subprocess.run(
        [node, "--input-type=module", "-e", script], cwd=folder, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    required, verified = json.loads(done.stdout)
    assert required["ssl"] == {"rejectUnauthorized": False}
    assert verified["ssl"] == {"rejectUnauthorized": True}
    assert required["database"] == parts.dbname and required["max"] == 5
    assert "dbname" not in required and "sslmode" not in required


@slow
def test_fleet_members_run_an_adapters_workers(tmp_path: Path) -> None:
    """`harness run --fleet 2` on Minion: each member runs its share of the workers
    through its own install's adapter (sent by name and digest), and the books balance."""
    shipped("minion")
    text = FLEET.replace("workers: 6", "workers: 4").replace(
        "strategies: [fifo, round_robin]", "strategies: [minion]"
    )
    run, line = coordinator(tmp_path, text, "--fleet", "2")
    workers = members(line, 2)
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    for worker in workers:
        _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
    jobs = pd.read_csv(tmp_path / "results" / "latest" / "jobs.csv")
    assert sorted(jobs["job_id"]) == list(range(1, 311))
    assert set(jobs["member"]) == {1, 2}


def test_an_adapter_replacing_a_shipped_one_is_said_and_recorded(
    server: Server, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """An --adapters-dir adapter of a shipped adapter's name runs in its place: the run
    says so before it starts, and run.json records the folder it replaced. (Its folder is
    one the run's own user can read, as a root run's adapters must be.)"""
    readable = Path(tempfile.mkdtemp(prefix="tqb-replacing-"))
    readable.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(readable, ignore_errors=True))
    folder = readable / "adapters" / "minion"
    folder.mkdir(parents=True)
    folder.parent.chmod(0o755)
    folder.chmod(0o755)
    (folder / "pyqueue.py").write_text((FIXTURES / "pyqueue" / "pyqueue.py").read_text())
    manifest = (FIXTURES / "pyqueue" / "pyqueue.toml").read_text()
    (folder / "minion.toml").write_text(manifest.replace('"pyqueue"', '"minion"'))
    scenario = tmp_path / "replaced.yaml"
    scenario.write_text(yaml.safe_dump({**SMALL, "strategies": ["minion"]}))
    done = harness_cli(
        "run",
        str(scenario),
        "--adapters-dir",
        str(readable / "adapters"),
        "--dsn",
        server.dsn,
        "--results-dir",
        str(tmp_path / "results"),
        "--no-plots",
        timeout=240,
        env=ON_PATH,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shipped_folder = load_adapters()["minion"].folder
    said = f"Note: adapter minion of {folder} replaces the shipped one ({shipped_folder})"
    assert said in " ".join(done.stdout.split())
    (run_json,) = (tmp_path / "results").glob("*/*/run.json")
    recorded = json.loads(run_json.read_text())["queues"]["minion"]
    assert recorded["replaces"] == str(shipped_folder)
    assert recorded["language"] == "Python 3 (psycopg)"  # the fixture's, not Perl
