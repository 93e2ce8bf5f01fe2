"""The jobs as the harness hands them to any queue library, and the books' side of what
comes back: the numbered batches of each enqueuer, the backlog's jobs, the tenants a
worker must name, the task log, and the one ledger built from a library's records and
its task log (harness/queues/contract/queue.py).

A library chooses its own job ids (a uuid in pg-boss), so every job carries the harness's
number for it in its payload, with its tenant and its duration: `{"n": 17, "t": 3, "ms":
20.0}`. The numbers are the workload's (backlog first, then the batches in the order the
scenario builds them), so the durations are the ones the SQL strategies draw for the same
job, and jobs.csv joins up with the workload whatever ids the library chose.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from harness.errors import RunFailed
from harness.queues.base import JobRecord, Ledger, Signals, TaskRun, WorkerReport
from harness.queues.contract.protocol import JobDone, Record
from harness.scenario.arrivals import Arrivals
from harness.scenario.distributions import job_duration_ms
from harness.scenario.inputs import RunInputs
from harness.scenario.workload import BacklogRows, tenant_ranges
from harness.sqlfiles import builtin_blocks

Job = tuple[int, int, float]  # the harness's number, the tenant, the duration in ms
Schedule = list[tuple[float, list[Job]]]  # (offset in s, the batch's jobs), by offset
NO_CLAIM_MS = float("nan")  # a fetch the library did not time


def numbered_schedules(inputs: RunInputs, schedules: list[Arrivals]) -> list[Schedule]:
    """Each enqueuer's batches with their jobs' numbers, tenants and durations.

    The schedules deal the scenario's batches round-robin (schedule i holds batches i,
    i + n, ...); the numbers follow the batches in that dealt order, after the backlog."""
    count = len(schedules)
    ordered = sorted(
        (index + position * count, index, position)
        for index, schedule in enumerate(schedules)
        for position in range(len(schedule))
    )
    numbered: list[Schedule] = [[] for _ in schedules]
    first = (inputs.backlog.total_jobs if inputs.backlog else 0) + 1
    for _, index, position in ordered:
        batch = schedules[index][position]
        jobs = [_job(inputs, first + k, tenant) for k, tenant in enumerate(batch.tenant_ids)]
        numbered[index].append((batch.at_s, jobs))
        first += batch.size
    return numbered


def backlog_jobs(inputs: RunInputs, rows: BacklogRows) -> list[Job]:
    """The backlog's jobs, numbered from 1 tenant by tenant, as the SQL strategies load it."""
    tenants = [t for t, jobs in zip(rows.tenant_ids, rows.jobs, strict=True) for _ in range(jobs)]
    return [_job(inputs, number, tenant) for number, tenant in enumerate(tenants, start=1)]


def _job(inputs: RunInputs, number: int, tenant: int) -> Job:
    return (number, tenant, job_duration_ms(inputs.seed, number, inputs.durations[tenant]))


def tenant_ids(inputs: RunInputs, rows: BacklogRows | None = None) -> list[int]:
    """Every tenant a worker serving all of them must name (queue or entrypoint per tenant)."""
    backlog = rows.tenant_ids if rows is not None else []
    return sorted(set(backlog) | set(inputs.durations))


def tenant_weights(inputs: RunInputs, tenants: list[int], rows: BacklogRows | None) -> list[int]:
    """Each tenant's weight, in the order of `tenants`: its group's, or its backlog row's."""
    weights = {t: r.group.weight for r in tenant_ranges(inputs.scenario) for t in r.ids}
    if rows is not None:
        weights |= dict(zip(rows.tenant_ids, rows.weights, strict=True))
    return [weights.get(tenant, 1) for tenant in tenants]


def shares(total: int, parts: int) -> list[int]:
    """`total` workers over `parts` processes, as evenly as they go (the first take the
    remainder), none empty."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if index < total % parts else 0) for index in range(parts)]


def task_run(event: JobDone) -> TaskRun:
    """A `job` event as the task log keeps it."""
    return TaskRun(
        job=event.job,
        tenant=event.tenant,
        library_id=event.id,
        enqueued_at=event.enqueued_at,
        started_at=event.started_at,
        finished_at=event.finished_at,
        claim_ms=event.claim_ms,
    )


def record_run(report: WorkerReport, signals: Signals | None, index: int, run: TaskRun) -> None:
    """The task log: one entry per run of the task, and the process's done count."""
    report.task_runs.append(run)
    claim_ms = run.claim_ms if run.claim_ms is not None else NO_CLAIM_MS
    report.claims.append((run.job, run.tenant, claim_ms))
    if signals is not None:
        signals.done[index] += 1


def analyze(conn: psycopg.Connection[Any], schema: str | None = None) -> None:
    """Every table of the run's schema analyzed, or of `schema` (a library's own)."""
    statement = builtin_blocks("harness.queues.contract", "contract.sql")["analyze_tables"].sql
    found = conn.execute(statement, {"schema": schema}).fetchall()  # type: ignore[call-overload]
    for (analyze_one,) in found:
        conn.execute(analyze_one)


def ledger_of(
    records: list[Record], reports: list[WorkerReport], unrecorded_ok: bool = False
) -> Ledger:
    """Every job, from its library's records (by the library's id) completed by the task
    log: a record says whether its library has it done, a run of the task says it was
    done where the library no longer holds it (deleted when finished); each moment from
    whichever side has it, the record's first. Every run of the task is a claim.
    `unrecorded_ok` (a library's faults): a run of a job its library holds no record of,
    and that says no moments, is done, `unrecorded`; else the run fails."""
    runs = {run.library_id: (report.worker, run) for report in reports for run in report.task_runs}
    held = {record.id: record for record in records}
    ledger = [_from_record(record, runs.get(record.id)) for record in records]
    orphans = [(worker, run) for key, (worker, run) in runs.items() if key not in held]
    ledger += [_from_run(worker, run, unrecorded_ok) for worker, run in orphans]
    unrecorded = sorted(run.job for _, run in orphans if run.enqueued_at is None)
    claims = [run.job for report in reports for run in report.task_runs]
    return Ledger(sorted(ledger, key=lambda record: record.job_id), claims, unrecorded)


def _from_record(record: Record, seen: tuple[int, TaskRun] | None) -> JobRecord:
    worker, run = seen if seen is not None else (None, None)
    job = record.job if record.job is not None else (run.job if run else None)
    tenant = record.tenant if record.tenant is not None else (run.tenant if run else None)
    if job is None or tenant is None:
        raise RunFailed(f"library id {record.id}: its payload is gone and no task ran it")
    # Not done: with the library's own state (running, locked, failed, ...), what a
    # killed worker's job was left as is the library's recovery, counted by state.
    status = "done" if record.state == "done" else JobRecord.unfinished(record.state)
    return JobRecord(
        job_id=job,
        tenant_id=tenant,
        status=status,
        enqueued_at=record.enqueued_at,
        started_at=_first(record.started_at, run.started_at if run else None),
        finished_at=_first(record.finished_at, run.finished_at if run else None),
        worker=worker,
        claim_ms=run.claim_ms if run else None,
    )


def _from_run(worker: int, run: TaskRun, unrecorded_ok: bool = False) -> JobRecord:
    if run.enqueued_at is None and not unrecorded_ok:
        raise RunFailed(  # the harness cannot place the job: the books fail, in one line
            f"job {run.job} (library id {run.library_id}): its library holds no record of it "
            "and its `job` event gave no moments"
        )
    return JobRecord(
        job_id=run.job,
        tenant_id=run.tenant,
        status="done",
        enqueued_at=run.enqueued_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        worker=worker,
        claim_ms=run.claim_ms,
    )


def _first(*moments: datetime | None) -> datetime | None:
    return next((moment for moment in moments if moment is not None), None)
