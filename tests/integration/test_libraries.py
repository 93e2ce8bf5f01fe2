"""The Python queue libraries through their own code, as adapters of the contract run by
the harness's own interpreter, on a small noisy neighbour: the books balance from the
library's tables and the task log, every job has the contract's times in order, and
nothing of the library is left on the server afterwards. (The adapters of every other
language: tests/integration/test_adapters.py; each library's own: test_adapter_<lib>.py.)"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.analysis.plans import nodes
from harness.queues.base import QueueEntry, Site
from harness.queues.catalog import catalog
from harness.queues.contract.manifest import HARNESS_PYTHON, load_adapters
from harness.run.repetition import Repetition, run_repetition
from harness.run.scenario_run import RunOptions
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.server.connections import connect
from harness.server.kinds import Server
from harness.server.schema import own_schema
from tests.integration.conftest import Quiet, run_yaml

pytestmark = pytest.mark.integration

SMALL = {
    "name": "library-small",
    "workers": 2,
    "strategies": ["fifo"],
    "repetitions": 1,
    "poll_interval_ms": 10,
    "timeout_s": 20,
    "tenant_cap": 1,
    "tenant_groups": [
        {"name": "large", "tenants": 1, "jobs_per_tenant": 12, "duration_ms": 5},
        {
            "name": "small",
            "tenants": 3,
            "jobs_per_tenant": 2,
            "duration_ms": 5,
            "enqueue_at_s": 0.1,
        },
    ],
}
# Each Python library's mappings, by its adapter (run by the harness's interpreter).
PYTHON = {
    adapter.name: [m.strategy for m in adapter.manifest.mappings]
    for adapter in load_adapters().values()
    if adapter.manifest.command[0] == HARNESS_PYTHON
}
AWA = set(PYTHON.get("awa", []))
NO_AWA = (
    "awa-pg ships wheels only (Linux x86_64/aarch64 with glibc, macOS) and none is "
    "installed here: pip install 'tenant-queue-bench[libraries]' where one exists"
)


LIBRARY_OBJECTS = (
    r"^(procrastinate_|pgqueuer|_private_job|job_common$|job$|minion_|mojo_migrations$"
    r"|delayed_jobs"  # the four before, and the adapters' (tests/integration/test_adapters.py)
    r"|workflow_status$|dbos_migrations$"  # DBOS, in the run's schema
    r"|ready_entries|queue_claim_heads$|jobs_hot$"  # awa, in its schema awa
    r"|[qa]_harness$|message_record$|saq_"  # pgmq (its script moved into the run's schema), saq
    r"|_?pgqrs_|_?worker_status$|_sqlx_migrations$"  # pgqrs, in the run's schema
    r"|river_)"  # River, in the run's schema
)


# make test runs one mapping of each Python library (a few seconds each: awa installs
# some 400 relations per repetition); make test-libraries runs them all.
SMOKE = {
    "procrastinate_lock_per_tenant",
    "pgqueuer_concurrency_limit",
    "dbos_partitioned_capped",
    "awa",
    "pgmq_round_robin",
    "saq_group_key",
    "pgqrs",
}


def marked(names: list[str]) -> list[Any]:
    """The mappings as parameters, those beyond the smoke ones marked `libraries` (make
    test-libraries)."""
    return [n if n in SMOKE else pytest.param(n, marks=pytest.mark.libraries) for n in names]


def skip_unless_installed(name: str) -> None:
    """awa needs its wheel."""
    if name in AWA and importlib.util.find_spec("awa") is None:
        pytest.skip(NO_AWA)


def _entry(name: str) -> QueueEntry:
    return catalog()[name]


def _schemas_like(server: Server, prefix: str) -> list[str]:
    with connect(server.dsn) as conn:
        rows = conn.execute(
            "select nspname from pg_namespace where nspname like %s", (prefix + "%",)
        ).fetchall()
    return [row[0] for row in rows]


def _library_objects(server: Server) -> list[str]:
    """Tables and types of any of the libraries in any schema of the server, pgmq's own
    schema, and default privileges of a schema (pgmq's install grants pg_monitor some)."""
    with connect(server.dsn) as conn:
        rows = conn.execute(
            "select relname from pg_class where relname ~ %(names)s"
            " union all select typname from pg_type where typname ~ %(names)s"
            " union all select nspname from pg_namespace where nspname = 'pgmq'"
            " union all select defaclobjtype::text from pg_default_acl",
            {"names": LIBRARY_OBJECTS},
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize("name", marked(sorted(n for names in PYTHON.values() for n in names)))
def test_library_runs_through_the_repetition_with_balanced_books(server: Server, name: str) -> None:
    """The repetition's own path (install, crew, ledger, books); nothing left afterwards."""
    skip_unless_installed(name)
    inputs = RunInputs.of(Scenario.model_validate({**SMALL, "strategies": [name]}))
    site = Site(server.dsn, f"lib_{name}")
    queue = _entry(name).make(site, inputs)
    with own_schema(site.dsn, site.schema, outside=queue.outside_schemas()):
        result = run_repetition(queue, site, inputs, Repetition(name, 2, 1), Quiet())
    assert result.books == "balanced"
    assert sorted(row["job_id"] for row in result.jobs) == list(range(1, inputs.total_jobs + 1))
    for row in result.jobs:
        assert row["tenant_id"] == inputs.workload.tenant_ids[row["job_id"] - 1]
        assert row["enqueued_at"] <= row["started_at"] <= row["finished_at"]
        assert row["duration_ms"] == inputs.workload.duration_ms(row["job_id"])
    assert _schemas_like(server, site.schema) == []
    assert _schemas_like(server, "awa") == []
    assert _library_objects(server) == []


PLANS = {
    **SMALL,
    "name": "library-plans",
    "tenant_groups": [],
    "backlog": {
        "groups": [
            {"name": "large", "tenants": 1, "jobs_per_tenant": 200},
            {"name": "small", "tenants": 3, "jobs_per_tenant": 1},
            {"name": "idle", "tenants": 20, "jobs_per_tenant": 0},
        ]
    },
    "explain": {"repeat": 2},
}


@pytest.mark.parametrize(
    "name",
    marked(
        [
            "procrastinate_lock_per_tenant",
            "pgqueuer_entrypoint_per_tenant",
            *sorted(PYTHON.get("dbos", [])),
            *sorted(AWA),
            "pgmq_round_robin",
            "saq_group_key",
            "pgqrs",
            "pgqrs_tuned",
        ]
    ),
)
def test_plan_capture_is_the_library_fetch_as_it_ran(
    server: Server, tmp_path: Path, name: str
) -> None:
    """`harness explain` on a library: auto_explain's plans of its own fetch, from its own
    worker; each reads the library's table (awa's is a function whose plan counts the
    statements inside it), each found a job, the later ones with the earlier jobs still
    held; nothing of the library left behind."""
    skip_unless_installed(name)
    text = yaml.safe_dump({**PLANS, "strategies": [name]})
    outcome = run_yaml(server, tmp_path, text, RunOptions(timed=False, plots=False))
    plans = outcome.tables.runs
    assert plans is not None and len(plans) == 2  # repeat 2: the fetches after the first
    assert (plans["registered_tenants"] == 24).all() and (plans["queued_jobs"] == 203).all()
    assert (plans["shared_buffers"] > 0).all() and plans["planning_ms"].isna().all()
    read = {
        "procrastinate": "procrastinate_jobs",
        "pgqueuer": "pgqueuer",
        "dbos": "workflow_status",
        "awa": "claim_ready_runtime",
        "pgmq": "q_harness",
        "saq": "saq_jobs",
        "pgqrs": "pgqrs_messages",
    }
    table = next(table for library, table in read.items() if name.startswith(library))
    saved = json.loads((outcome.folder.path / "explain" / "backlog" / f"{name}.json").read_text())
    for plan in saved["plans"]:
        every = list(nodes(plan[0]["Plan"]))
        assert table in {node.get("Relation Name") or node.get("Function Name") for node in every}
        assert plan[0]["Plan"]["Actual Rows"] >= 1
    assert _library_objects(server) == []
    assert _schemas_like(server, "awa") == []


@pytest.mark.thorough  # make test captures each library's fetch once, on its own backlog
def test_a_variant_capture_names_the_variant_tenants(server: Server, tmp_path: Path) -> None:
    """pgqueuer's entrypoint per tenant probes every registered entrypoint at each fetch,
    so a variant with 2,000 idle tenants must cost at least a buffer per tenant: its
    worker names the variant's tenants, not those of the scenario's own backlog."""
    variants = [{"name": "few"}, {"name": "many", "tenants": {"idle": 2000}}]
    scenario = {**PLANS, "strategies": ["pgqueuer_entrypoint_per_tenant"]}
    scenario["explain"] = {"repeat": 1, "variants": variants}
    outcome = run_yaml(
        server, tmp_path, yaml.safe_dump(scenario), RunOptions(timed=False, plots=False)
    )
    plans = outcome.tables.runs
    assert plans is not None
    by_variant = plans.set_index("variant")
    assert list(by_variant["registered_tenants"]) == [24, 2004]
    assert by_variant.loc["many", "shared_buffers"] >= 2004
    assert by_variant.loc["few", "shared_buffers"] < 2004


def test_without_a_superuser_a_library_capture_is_skipped_saying_why(
    server: Server, tmp_path: Path
) -> None:
    """On a server where the harness is no superuser (a managed one), auto_explain cannot
    be loaded in a library's sessions: its capture is skipped with the reason, and the
    strategies the harness explains itself are captured as always."""
    with connect(server.dsn) as conn:
        conn.execute("drop role if exists tqb_plain")
        conn.execute("create role tqb_plain login nosuperuser")
        database = conn.execute("select current_database()").fetchone()
        assert database is not None
        conn.execute(f"grant create on database {database[0]} to tqb_plain")
    plain = replace(server, dsn=f"{server.dsn} user=tqb_plain")
    scenario = {**PLANS, "strategies": ["fifo", "pgqueuer"], "explain": {"repeat": 1}}
    try:
        outcome = run_yaml(
            plain, tmp_path, yaml.safe_dump(scenario), RunOptions(timed=False, plots=False)
        )
    finally:
        with connect(server.dsn) as conn:
            conn.execute(f"revoke create on database {database[0]} from tqb_plain")
            conn.execute("drop role tqb_plain")
    plans = outcome.tables.plans  # per capture, skipped ones too
    assert plans is not None
    by_strategy = plans.set_index("strategy")
    assert by_strategy.loc["fifo", "skipped"] == ""
    assert by_strategy.loc["fifo", "shared_buffers"] > 0
    assert str(by_strategy.loc["pgqueuer", "skipped"]).startswith("no superuser:")
    assert not (outcome.folder.path / "explain" / "backlog" / "pgqueuer.json").exists()


def test_a_queue_per_tenant_beyond_the_servers_connections_is_skipped_saying_why(
    server: Server, tmp_path: Path
) -> None:
    """awa's runtime holds a connection per queue: 200 idle tenants' queues cannot run on
    a server of 100 connections, so that capture is skipped with the reason (the others
    are captured); nothing of awa is made."""
    skip_unless_installed("awa_weighted_queues")
    scenario = {**PLANS, "strategies": ["fifo", "awa_weighted_queues"], "explain": {"repeat": 1}}
    scenario["backlog"] = {
        "groups": [
            *PLANS["backlog"]["groups"][:2],
            {"name": "idle", "tenants": 200, "jobs_per_tenant": 0},
        ]
    }
    outcome = run_yaml(
        server, tmp_path, yaml.safe_dump(scenario), RunOptions(timed=False, plots=False)
    )
    plans = outcome.tables.plans
    assert plans is not None
    by_strategy = plans.set_index("strategy")
    assert by_strategy.loc["fifo", "skipped"] == ""
    skipped = str(by_strategy.loc["awa_weighted_queues", "skipped"])
    assert skipped.startswith("awa's runtime holds a connection per queue")
    assert "a queue per tenant, 204 of them, needs about 220 connections" in skipped
    assert _schemas_like(server, "awa") == []
