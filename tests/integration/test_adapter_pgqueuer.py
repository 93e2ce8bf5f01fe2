"""pgqueuer's adapter beyond what the catalog-wide tests check: how its options shape its
QueueManagers (the tuned mappings' managers, batches and event loop, a capture's tasks),
what reaches asyncpg of the connection, and its ledger, whose finished jobs have lost
their payload."""

from __future__ import annotations

from typing import Any

import pytest

from harness.queues.adapters.pgqueuer import pgqueuer_adapter as adapter
from harness.queues.adapters.pgqueuer.pgqueuer_adapter import Setup
from harness.queues.base import Site
from harness.queues.contract import jobs
from harness.queues.contract.manifest import load_adapters
from harness.queues.contract.protocol import (
    Connection,
)
from harness.queues.contract.queue import ContractSpec, recorded
from harness.server.connections import worker_session_name
from harness.server.kinds import Server
from harness.server.schema import own_schema
from tests.integration.conftest import worked

PGQUEUER = load_adapters()["pgqueuer"]


CONNECTION = Connection(host="/tmp", port=5432, user="u", password="p w", dbname="d")


def config(mapping: str, concurrency: int = 4, **more: Any) -> dict[str, Any]:
    """A config as the harness hands it to the adapter, with its mapping's options."""
    spec = ContractSpec(PGQUEUER, mapping, Site("", "tqb_test"), 10.0, concurrency=concurrency)
    return {**spec.config("worker", CONNECTION).model_dump(by_alias=True), **more}


def test_the_default_mappings_run_one_manager_with_half_its_tasks_a_batch() -> None:
    setup = Setup.of(config("one_entrypoint"))
    assert setup.manager_caps == [4]
    assert setup.batch_size(4) == 2
    assert setup.event_loop == "asyncio"


def test_tuned_managers_keep_twenty_tasks_each_up_to_five_of_them() -> None:
    """The old rule, workers // 20, 1 to 5 managers, from the mapping's options."""
    assert Setup.of(config("one_entrypoint_tuned", 4)).manager_caps == [4]
    assert Setup.of(config("one_entrypoint_tuned", 45)).manager_caps == [23, 22]
    assert Setup.of(config("one_entrypoint_tuned", 200)).manager_caps == [40] * 5
    assert Setup.of(config("one_entrypoint_tuned", 200)).batch_size(40) == 10
    assert Setup.of(config("one_entrypoint_tuned", 4)).batch_size(4) == 2  # twice fits


def test_the_tuned_concurrency_limit_takes_a_batch_of_one() -> None:
    setup = Setup.of(config("concurrency_limit_tuned", 40))
    assert setup.manager_caps == [20, 20]  # its managers follow the same rule
    assert setup.batch_size(20) == 1
    assert setup.limit == 1


def test_a_capture_runs_twice_as_many_tasks_as_fetches_one_job_a_fetch() -> None:
    """pgqueuer refuses max_concurrent_tasks below twice its batch."""
    setup = Setup.of(config("entrypoint_per_tenant", 4, hold=True))
    assert setup.manager_caps == [8]
    assert setup.batch_size(8) == 1


def test_the_tuned_worker_runs_on_uvloop_and_nothing_else_does() -> None:
    import uvloop

    assert adapter.event_loop(config("one_entrypoint_tuned")) is uvloop.new_event_loop
    assert adapter.event_loop(config("one_entrypoint")) is None
    assert adapter.event_loop(config("one_entrypoint_tuned", role="enqueuer")) is None


def test_libpq_options_and_the_capture_settings_reach_asyncpg() -> None:
    given = config("one_entrypoint", explain_options="-c auto_explain.log_min_duration=0")
    given["connection"]["options"] = "-c statement_timeout=5s --lock-timeout=1s"
    arguments = adapter.asyncpg_arguments(given)
    assert arguments["database"] == "d" and arguments["password"] == "p w"
    assert arguments["server_settings"] == {
        "statement_timeout": "5s",
        "lock_timeout": "1s",
        "auto_explain.log_min_duration": "0",
        "application_name": worker_session_name(),  # a worker's: what backend_kills cuts
    }


def test_options_that_are_no_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="no -c name=value"):
        adapter.server_settings("-c statement_timeout")


def test_its_finished_jobs_are_matched_to_their_runs_by_pgqueuer_id(server: Server) -> None:
    """pgqueuer deletes a finished job, payload and all: the ledger's records of done
    jobs name no job, and the books still find each job once, by pgqueuer's id."""
    schema = "tqb_test_pgqueuer_ledger"
    spec = ContractSpec(PGQUEUER, "one_entrypoint", Site(server.dsn, schema), 10.0, concurrency=2)
    batch = [(n, 1 + n % 2, 1.0) for n in range(1, 9)]
    with own_schema(server.dsn, schema):
        report, _ = worked(spec, batch)
        records = recorded(spec)
    assert {record.state for record in records} == {"done"}
    assert {record.job for record in records} == {None}
    ledger = jobs.ledger_of(records, [report])
    assert sorted(record.job_id for record in ledger.records) == list(range(1, 9))
    assert all(record.started_at and record.finished_at for record in ledger.records)
    assert sorted(record.tenant_id for record in ledger.records) == [1] * 4 + [2] * 4
