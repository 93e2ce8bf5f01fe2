"""The library adapters' shared pieces that need no server: job numbers that follow the
workload whatever ids a library chooses, and the ledger from a library's rows and its
task log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from harness.queues.base import Site, TaskRun, WorkerReport
from harness.queues.libraries import common
from harness.queues.libraries.node_queue import (
    NodeQueue,
    NodeSpec,
    connection_config,
    departures_from_scenario,
)
from harness.queues.libraries.pgqueuer_queue import asyncpg_arguments
from harness.results.document import UNLIKE_THE_SCENARIO, RunDocument, unlike_the_scenario
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _inputs(enqueuers: int) -> RunInputs:
    return RunInputs.of(
        Scenario.model_validate(
            {
                "name": "numbers",
                "workers": 2,
                "strategies": ["fifo"],
                "enqueuers": enqueuers,
                "tenant_groups": [
                    {"name": "a", "tenants": 2, "jobs_per_tenant": 2, "duration_ms": 3},
                    {
                        "name": "b",
                        "tenants": 1,
                        "jobs_per_tenant": 1,
                        "duration_ms": 7,
                        "enqueue_at_s": 0.5,
                    },
                    {
                        "name": "c",
                        "tenants": 1,
                        "jobs_per_tenant": 2,
                        "duration_ms": 9,
                        "enqueue_at_s": 1.0,
                    },
                ],
            }
        )
    )


def test_numbers_follow_the_workload_however_the_batches_are_dealt() -> None:
    for enqueuers in (1, 2, 3):
        inputs = _inputs(enqueuers)
        numbered = common.numbered_schedules(inputs, inputs.schedules)
        jobs = sorted(job for schedule in numbered for _, batch in schedule for job in batch)
        assert [n for n, _, _ in jobs] == list(range(1, inputs.total_jobs + 1))
        assert [t for _, t, _ in jobs] == inputs.workload.tenant_ids.tolist()
        assert [ms for _, _, ms in jobs] == inputs.workload.durations_ms


def _row(library_id: str, job: int | None, done: bool, finished: bool = True) -> common.LibraryRow:
    return common.LibraryRow(
        library_id,
        job,
        None if job is None else 1,
        done,
        T0,
        T0 + timedelta(seconds=1),
        T0 + timedelta(seconds=2) if finished else None,
    )


def test_ledger_takes_numbers_from_the_task_log_where_the_payload_is_gone() -> None:
    report = WorkerReport(worker=0, task_runs=[TaskRun(7, 1, "a"), TaskRun(8, 1, "b")])
    ledger = common.ledger_of([_row("a", None, True), _row("b", 8, True)], [report])
    assert [(r.job_id, r.status, r.worker) for r in ledger.records] == [
        (7, "done", 0),
        (8, "done", 0),
    ]
    assert ledger.claims == [7, 8]


def test_ledger_keeps_a_job_the_library_deleted_from_its_task_record() -> None:
    finished = TaskRun(3, 2, "9", T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=2))
    ledger = common.ledger_of(
        [_row("4", 4, False, finished=False)], [WorkerReport(1, task_runs=[finished])]
    )
    assert [(r.job_id, r.status) for r in ledger.records] == [(3, "done"), (4, "not finished")]
    assert ledger.records[0].finished_at == T0 + timedelta(seconds=2)


def test_a_job_run_twice_is_two_claims() -> None:
    runs = [TaskRun(5, 1, "x"), TaskRun(5, 1, "x")]
    ledger = common.ledger_of([_row("x", 5, True)], [WorkerReport(0, task_runs=runs)])
    assert ledger.claims == [5, 5]


def test_the_node_runner_connects_as_the_dsn_says_tls_included() -> None:
    """node-postgres reads no libpq DSN: the harness hands it the DSN's parts, and the
    sslmode a managed server needs as node-postgres's ssl."""
    url = "postgresql://bench:secret@db.example.com:6543/queue?sslmode=require"
    assert connection_config(url) == {
        "host": "db.example.com",
        "port": 6543,
        "user": "bench",
        "password": "secret",
        "database": "queue",
        "ssl": {"rejectUnauthorized": False},
    }
    verified = connection_config("host=db.example.com dbname=queue sslmode=verify-full")
    assert verified["ssl"] == {"rejectUnauthorized": True}
    assert "ssl" not in connection_config("host=/tmp/socket port=5432 dbname=bench")


def test_asyncpg_connects_as_the_dsn_says_tls_included() -> None:
    """pgqueuer's asyncpg takes keywords, and libpq's sslmode names as its ssl."""
    arguments = asyncpg_arguments("host=db.example.com port=6543 dbname=queue sslmode=require")
    assert arguments == {
        "host": "db.example.com",
        "port": 6543,
        "database": "queue",
        "ssl": "require",
    }
    assert asyncpg_arguments("host=/tmp/socket")["database"] is None


def test_a_queue_set_up_unlike_the_scenario_says_so_beside_its_figures() -> None:
    """pg-boss cannot poll every 10 ms: its run.json entry says so, in a sentence that the
    render puts above the waits (tests/unit/test_analysis.py)."""
    inputs = _inputs(1)
    assert inputs.scenario.poll_interval_ms < 500
    pgboss = NodeSpec(
        "pgboss", "one_queue", Site("", "s"), NodeQueue.poll_interval_ms("pgboss", 10)
    )
    graphile = NodeSpec("graphile", "one_queue", Site("", "s"), 10)
    [said] = departures_from_scenario(pgboss, inputs)
    assert said.startswith("polls every 0.5 s, not every")
    assert departures_from_scenario(graphile, inputs) == []
    document = RunDocument.model_validate(
        {
            "run_id": "r",
            "status": "complete",
            "started_at": "2026-12-01T00:00:00+00:00",
            "scenario": {"name": "s", "path": "s.yaml", "sha256": "0", "seed": 1},
            "queues": {"pgboss": {UNLIKE_THE_SCENARIO: [said]}},
        }
    )
    assert unlike_the_scenario(document) == [
        f"pgboss {said}: compare its figures with that in mind"
    ]


def test_each_library_declares_its_own_mappings_and_the_catalog_takes_them_all() -> None:
    """Adding a library is a module of its own and a line: every mapping a module declares
    is a queue a scenario may name, each once, none declared twice."""
    from harness.queues import libraries
    from harness.queues.libraries import (
        node_queue,
        pgmq_queue,
        pgqueuer_queue,
        procrastinate_queue,
        saq_queue,
    )

    names = [entry.name for entry in libraries.entries()]
    declared = [
        *procrastinate_queue.MAPPINGS,
        *pgqueuer_queue.MAPPINGS,
        *node_queue.MAPPINGS,
        *pgmq_queue.MAPPINGS,
        *saq_queue.MAPPINGS,
    ]
    assert sorted(names) == sorted(declared) and len(set(names)) == len(names)


def test_a_library_queue_says_its_sides_a_sql_queue_the_others() -> None:
    """Optional sides are said by the queue (recovery, explainer), not guessed from traits."""
    from harness.queues.libraries.procrastinate_queue import ProcrastinateQueue
    from harness.queues.sql.queue import SqlQueue
    from harness.queues.sql.strategies import load_strategies

    inputs, site = _inputs(1), Site("", "s")
    library = ProcrastinateQueue("procrastinate", "one_queue", site, inputs)
    assert library.recovery() is None and library.explainer() is library
    sql = SqlQueue(load_strategies(None)["round_robin"], site, inputs)
    assert sql.recovery() is sql and sql.explainer() is None
