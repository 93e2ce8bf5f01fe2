"""The queue libraries through their own code, on a small noisy neighbour: the books
balance from the library's tables and the task log, every job has the contract's times
in order, and nothing of the library is left on the server afterwards."""

from __future__ import annotations

import shutil

import pytest

from harness.queues import libraries
from harness.queues.base import Site
from harness.run.repetition import Repetition, run_repetition
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.server.connections import connect
from harness.server.kinds import Server
from harness.server.schema import own_schema
from tests.integration.conftest import Quiet

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
NODE = {"pgboss", "pgboss_group_concurrency", "graphile_worker", "graphile_worker_queue_per_tenant"}
NO_NPM = "pg-boss and graphile-worker need npm to install their Node runner"


LIBRARY_OBJECTS = r"^(procrastinate_|pgqueuer|_private_job|job_common$|job$)"


def _entry(name: str) -> libraries.QueueEntry:
    return next(entry for entry in libraries.entries() if entry.name == name)


def _schemas_like(server: Server, prefix: str) -> list[str]:
    with connect(server.dsn) as conn:
        rows = conn.execute(
            "select nspname from pg_namespace where nspname like %s", (prefix + "%",)
        ).fetchall()
    return [row[0] for row in rows]


def _library_objects(server: Server) -> list[str]:
    """Tables and types of any of the libraries, in any schema of the server."""
    with connect(server.dsn) as conn:
        rows = conn.execute(
            "select relname from pg_class where relname ~ %(names)s"
            " union all select typname from pg_type where typname ~ %(names)s",
            {"names": LIBRARY_OBJECTS},
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize("name", sorted(libraries.MAPPINGS))
def test_library_runs_through_the_repetition_with_balanced_books(server: Server, name: str) -> None:
    """The repetition's own path (install, crew, ledger, books); nothing left afterwards."""
    if name in NODE and shutil.which("npm") is None:
        pytest.skip(NO_NPM)
    inputs = RunInputs.of(Scenario.model_validate({**SMALL, "strategies": [name]}))
    site = Site(server.dsn, f"lib_{name}")
    with own_schema(site.dsn, site.schema):
        queue = _entry(name).make(site, inputs)
        result = run_repetition(queue, site, inputs, Repetition(name, 2, 1), Quiet())
    assert result.books == "balanced"
    assert sorted(row["job_id"] for row in result.jobs) == list(range(1, inputs.total_jobs + 1))
    for row in result.jobs:
        assert row["tenant_id"] == inputs.workload.tenant_ids[row["job_id"] - 1]
        assert row["enqueued_at"] <= row["started_at"] <= row["finished_at"]
        assert row["duration_ms"] == inputs.workload.duration_ms(row["job_id"])
    assert _schemas_like(server, site.schema) == []
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
    [
        "procrastinate_lock_per_tenant",
        "pgqueuer_entrypoint_per_tenant",
        "pgboss_group_concurrency",
        "graphile_worker_queue_per_tenant",
    ],
)
def test_plan_capture_is_the_library_fetch_as_it_ran(server: Server, name: str) -> None:
    """auto_explain's plans of the library's own fetch: each locks a row of the library's
    table, the later ones run with the earlier jobs still held."""
    if name in NODE and shutil.which("npm") is None:
        pytest.skip(NO_NPM)
    from tests.integration.capture_driver import capture_variant

    scenario = Scenario.model_validate(PLANS)
    result = capture_variant(server.dsn, scenario, name, "backlog", fetches=3)
    assert len(result.plans) == 3
    assert result.backlog == {"registered_tenants": 24, "queued_jobs": 203}
    tables = {
        "procrastinate": "procrastinate_jobs",
        "pgqueuer": "pgqueuer",
        "pgboss": "job_common",
        "graphile": "_private_jobs",
    }
    table = next(table for library, table in tables.items() if name.startswith(library))
    for plan in result.plans:
        figures = plan.figures()
        assert figures["shared_buffers"] > 0
        assert any(scan.endswith(f" on {table}") for scan in figures["scans"])
    assert _schemas_like(server, "real_queue_plans") == []
    assert _library_objects(server) == []
