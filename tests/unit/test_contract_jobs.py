"""What the harness hands every queue library and takes back, without a server: job
numbers that follow the workload whatever ids a library chooses, the one ledger from a
library's records and its task log, and what a manifest declares of a mapping (its
tuned settings as run.json records them, its worker processes, its sides)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from harness.queues.base import Site, TaskRun, WorkerReport
from harness.queues.contract import jobs
from harness.queues.contract.manifest import load_adapters
from harness.queues.contract.protocol import Record
from harness.queues.contract.queue import ContractQueue, worker_processes
from harness.results.document import (
    QueueProvenance,
    RunDocument,
    queue_settings,
    unlike_the_scenario,
)
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
                        "weight": 3,
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
        numbered = jobs.numbered_schedules(inputs, inputs.schedules)
        dealt = sorted(job for schedule in numbered for _, batch in schedule for job in batch)
        assert [n for n, _, _ in dealt] == list(range(1, inputs.total_jobs + 1))
        assert [t for _, t, _ in dealt] == inputs.workload.tenant_ids.tolist()
        assert [ms for _, _, ms in dealt] == inputs.workload.durations_ms


def test_every_tenant_is_named_with_its_groups_weight() -> None:
    inputs = _inputs(1)
    tenants = jobs.tenant_ids(inputs)
    assert tenants == [1, 2, 3, 4]
    assert jobs.tenant_weights(inputs, tenants, None) == [1, 1, 3, 1]


def _record(library_id: str, job: int | None, state: str, finished: bool = True) -> Record:
    return Record(
        event="record",
        id=library_id,
        job=job,
        tenant=None if job is None else 1,
        state=state,  # type: ignore[arg-type]
        enqueued_at=T0.isoformat(),  # type: ignore[arg-type]  # as an adapter writes it
        started_at=(T0 + timedelta(seconds=1)).isoformat(),  # type: ignore[arg-type]
        finished_at=(T0 + timedelta(seconds=2)).isoformat() if finished else None,  # type: ignore[arg-type]
    )


def test_ledger_takes_numbers_from_the_task_log_where_the_payload_is_gone() -> None:
    report = WorkerReport(worker=0, task_runs=[TaskRun(7, 1, "a"), TaskRun(8, 1, "b")])
    ledger = jobs.ledger_of([_record("a", None, "done"), _record("b", 8, "done")], [report])
    assert [(r.job_id, r.status, r.worker) for r in ledger.records] == [
        (7, "done", 0),
        (8, "done", 0),
    ]
    assert ledger.claims == [7, 8]


def test_ledger_keeps_a_job_the_library_deleted_from_its_task_record() -> None:
    finished = TaskRun(3, 2, "9", T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=2))
    ledger = jobs.ledger_of(
        [_record("4", 4, "waiting", finished=False)], [WorkerReport(1, task_runs=[finished])]
    )
    assert [(r.job_id, r.status) for r in ledger.records] == [
        (3, "done"),
        (4, "not finished (waiting)"),
    ]
    assert ledger.records[0].finished_at == T0 + timedelta(seconds=2)


def test_a_job_run_twice_is_two_claims() -> None:
    runs = [TaskRun(5, 1, "x"), TaskRun(5, 1, "x")]
    ledger = jobs.ledger_of([_record("x", 5, "done")], [WorkerReport(0, task_runs=runs)])
    assert ledger.claims == [5, 5]


def _document(queues: dict[str, QueueProvenance]) -> RunDocument:
    return RunDocument.model_validate(
        {
            "run_id": "r",
            "status": "complete",
            "started_at": "2026-12-01T00:00:00+00:00",
            "scenario": {"name": "s", "path": "s.yaml", "sha256": "0", "seed": 1},
            "queues": queues,
        }
    )


def test_a_queue_set_up_unlike_the_scenario_says_so_beside_its_figures() -> None:
    """What an adapter says it could not do as the scenario asks (its `versions` event's
    unlike_the_scenario: pg-boss cannot poll every 10 ms) is put above the waits."""
    said = "polls every 0.5 s, not every 10 ms as the scenario asks"
    entry = QueueProvenance(
        kind="adapter", library="pg-boss", language="Node", unlike_the_scenario=[said]
    )
    assert unlike_the_scenario(_document({"pgboss": entry})) == [
        f"pgboss {said}: compare its figures with that in mind"
    ]


def test_a_tuned_mapping_records_its_settings_and_shares_the_workers_out() -> None:
    """A tuned mapping's settings are its declared options (and processes), recorded as
    its tuned settings; its worker processes are as its manifest says."""
    adapters = load_adapters()
    graphile, pgboss = adapters["graphile"], adapters["pgboss"]
    tuned = graphile.declared("one_queue_tuned")
    assert tuned.tuned_settings()["local_queue_size"] == 500
    assert [worker_processes(tuned, count) for count in (4, 24, 25, 96)] == [1, 1, 2, 4]
    assert graphile.declared("one_queue").tuned_settings() == {}
    assert worker_processes(graphile.declared("one_queue"), 96) == 1
    assert pgboss.declared("one_queue_tuned").tuned_settings() == {
        "batch_size": 10,
        "burst_when_batch_full": True,
    }
    pgmq = adapters["pgmq"].declared("read")
    assert [worker_processes(pgmq, count) for count in (1, 4)] == [1, 4]


@pytest.mark.parametrize(
    ("workers", "cores", "shares"),
    [(4, 2, [2, 2]), (3, 2, [2, 1]), (1, 2, [1]), (4, 8, [1, 1, 1, 1]), (4, 1, [4])],
)
def test_a_process_per_core_deals_the_workers_among_the_cores(
    monkeypatch: pytest.MonkeyPatch, workers: int, cores: int, shares: list[int]
) -> None:
    declared = load_adapters()["pgmq"].declared("read").model_copy(update={"processes": "per_core"})
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert jobs.shares(workers, worker_processes(declared, workers)) == shares


def test_the_tables_read_each_queues_library_and_tuned_settings() -> None:
    settings = queue_settings(
        _document(
            {
                "p_t": QueueProvenance(
                    kind="adapter",
                    library="pgmq",
                    language="Python",
                    tuned={"qty": 10},
                    tuned_sources={"qty": "its benchmark"},
                ),
                "p": QueueProvenance(kind="adapter", library="pgmq", language="Python"),
                "fifo": QueueProvenance(kind="sql", library="harness", language="SQL"),
            }
        )
    )
    assert (settings["p"].library, settings["p"].label) == ("pgmq", "default")
    assert (settings["p_t"].label, settings["p_t"].named) == ("tuned", "qty=10")
    assert settings["fifo"].library == "harness"


def test_an_adapter_queue_says_its_sides_from_its_manifest_alone() -> None:
    """Its traits come from its manifest; its explainer is itself where the manifest says
    how its fetch is told; it has no recovery (faults are refused by its traits)."""
    adapter = load_adapters()["pgmq"]
    queue = ContractQueue("pgmq", adapter, "read", Site("", "s"), _inputs(1))
    assert queue.explainer() is queue and queue.recovery() is None
    assert queue.traits.faults is not None and queue.traits.explain is None
    assert queue.spec.tenants == (1, 2, 3, 4) and queue.spec.weights == (1, 1, 3, 1)
