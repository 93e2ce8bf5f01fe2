"""The conformance kit: a declared adapter run through a small noisy neighbour, mapping by
mapping, and checked for what a user would otherwise find the hard way
(`harness adapter-test`, docs/adapters.md).

The kit drives the adapter with the harness's own pieces (the adapter's process, its
events validated as they arrive, the ledger, the books), in this process: each check's
failure is caught where it happens and named, rather than read back from a crew's
tracebacks. The checks:

  protocol    every line it writes is an event of protocol 1, in its place
  books       every job enqueued is reported run exactly once, and its library agrees
  timestamps  every job's three moments present, enqueued <= started <= finished
  schema      nothing created outside the run's schema (and the schemas its manifest
              declares), nothing left once it is dropped
  stop        a `stop` honoured within STOP_BOUND_S, as in a run: `stopped`, then its exit
  error       a database it cannot reach is an `error` event and an exit, not a hang
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.queues.base import Site, WorkerReport
from harness.queues.contract import jobs
from harness.queues.contract.manifest import Adapter
from harness.queues.contract.process import STOP_BOUND_S, AdapterProcess, run_role
from harness.queues.contract.protocol import (
    AdapterExited,
    AdapterFailed,
    Installed,
    ProtocolError,
    Ready,
    Record,
    Recorded,
    Refused,
    Versions,
)
from harness.queues.contract.queue import ContractSpec, connection_of, enqueue_all
from harness.queues.contract.reader import WorkerEvents
from harness.run.books import check_books
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.server.connections import RUN_TOKEN, connect
from harness.server.schema import own_schema, recreate
from harness.sqlfiles import builtin_blocks

MOMENTS = ("enqueued_at", "started_at", "finished_at")
CHECKS = ("protocol", "books", "timestamps", "schema", "stop", "error")
DONE_BOUND_S = 60.0  # every job reported within this of the last enqueue
ERROR_BOUND_S = 30.0  # an unreachable database said within this
POLL_MS = 10.0
SCENARIO = {
    "name": "adapter-test",
    "workers": 2,
    "strategies": ["fifo"],
    "repetitions": 1,
    "poll_interval_ms": POLL_MS,
    "tenant_cap": 1,
    "tenant_groups": [
        {"name": "large", "tenants": 1, "jobs_per_tenant": 10, "duration_ms": 5},
        {
            "name": "small",
            "tenants": 2,
            "jobs_per_tenant": 2,
            "duration_ms": 5,
            "enqueue_at_s": 0.2,
        },
    ],
}
Say = Callable[[str], None]


@dataclass
class Verdict:
    """What the kit found of one adapter: per check, the problems (none: it passed)."""

    adapter: str
    problems: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CHECKS})

    def fail(self, check: str, problem: str) -> None:
        if problem not in self.problems[check]:
            self.problems[check].append(problem)

    @property
    def passed(self) -> bool:
        return not any(self.problems.values())

    def lines(self) -> list[str]:
        """One line per check: `ok CHECK`, or `FAIL CHECK: what` for each problem."""
        shown = []
        for check in CHECKS:
            found = self.problems[check]
            shown += [f"FAIL {check}: {problem}" for problem in found] or [f"ok   {check}"]
        return shown


def conformance(adapter: Adapter, dsn: str, say: Say = lambda line: None) -> Verdict:
    """Every mapping of `adapter` through the small scenario, then the error probe."""
    verdict = Verdict(adapter.name)
    inputs = RunInputs.of(Scenario.model_validate(SCENARIO))
    for declared in adapter.manifest.mappings:
        say(f"{adapter.name}: mapping {declared.mapping} ({declared.strategy})")
        _mapping(verdict, adapter, declared.mapping, dsn, inputs)
    say(f"{adapter.name}: a database that does not exist")
    _error_probe(verdict, adapter, dsn)
    return verdict


def _mapping(verdict: Verdict, adapter: Adapter, mapping: str, dsn: str, inputs: RunInputs) -> None:
    schema = f"tqb_kit_{RUN_TOKEN[:8]}_{mapping}"[:63]
    outside = tuple(adapter.manifest.outside_schemas)
    before = _outside(dsn, schema, outside)
    site = Site(dsn, schema)
    tenants = jobs.tenant_ids(inputs)
    spec = ContractSpec(
        adapter=adapter,
        mapping=mapping,
        site=site,
        poll_interval_ms=POLL_MS,
        cap=1,
        concurrency=2,
        tenants=tuple(tenants),
        weights=tuple(jobs.tenant_weights(inputs, tenants, None)),
        timeout_s=DONE_BOUND_S,
    )
    with own_schema(dsn, schema, outside=outside):
        with connect(dsn) as conn:  # the schemas its library insists on, made as a run does
            recreate(conn, schema, outside)
        _run(verdict, spec, inputs, mapping)
        after = _outside(dsn, schema, outside)
        _compare(verdict, "created outside the run's schema", before, after)
    after = _outside(dsn, schema, ())
    _compare(verdict, "left after the run's schema was dropped", before, after)


def _run(verdict: Verdict, spec: ContractSpec, inputs: RunInputs, mapping: str) -> None:
    where = f"mapping {mapping}"
    try:
        _, installed = run_role(spec.adapter, spec.config("install"), (Installed, Refused))
        if isinstance(installed, Refused):
            return verdict.fail("books", f"{where}: it refused to install: {installed.reason}")
        run_role(spec.adapter, spec.config("versions"), (Versions,))
        report = _work(verdict, spec, inputs, where)
        records, _ = run_role(spec.adapter, spec.config("ledger"), (Recorded,), (Record,))
    except ProtocolError as error:
        check = "timestamps" if error.field in MOMENTS else "protocol"
        return verdict.fail(check, f"{where}: {error}")
    except AdapterFailed as error:
        return verdict.fail("books", f"{where}: {error}")
    _books(verdict, records, report, inputs, where)


def _work(verdict: Verdict, spec: ContractSpec, inputs: RunInputs, where: str) -> WorkerReport:
    """A worker and an enqueuer through the small scenario, then a stop, timed."""
    worker = AdapterProcess(spec.adapter, spec.config("worker"))
    report = WorkerReport(worker=0)
    try:
        worker.expect(Ready)
        events = WorkerEvents.started(worker, report)
        _enqueue_all(spec, inputs)
        events.wait_for(inputs.total_jobs, DONE_BOUND_S)
        _stop(verdict, worker, events, where)
    finally:
        worker.close(bound_s=1.0)
        if worker.stopped_in_time is False and not verdict.problems["stop"]:
            verdict.fail("stop", f"{where}: it did not exit once its stdin closed")
    return report


def _enqueue_all(spec: ContractSpec, inputs: RunInputs) -> None:
    """The scenario's batches at their offsets, through one enqueuer."""
    numbered = jobs.numbered_schedules(inputs, inputs.schedules)
    merged = sorted((batch for schedule in numbered for batch in schedule), key=lambda b: b[0])
    enqueue_all(spec, merged)


def _stop(verdict: Verdict, worker: AdapterProcess, events: WorkerEvents, where: str) -> None:
    began = time.monotonic()
    try:
        events.stop()
    except AdapterFailed as error:
        if events.is_alive():  # no `stopped` in time: the kit's finding, not the run's
            verdict.fail("stop", f"{where}: no `stopped` within {STOP_BOUND_S:g} s of `stop`")
            return
        raise error
    left = STOP_BOUND_S - (time.monotonic() - began)
    try:
        worker.process.wait(timeout=max(left, 0.1))
    except Exception:
        verdict.fail("stop", f"{where}: `stopped` said, but no exit within {STOP_BOUND_S:g} s")


def _books(
    verdict: Verdict, records: list[Record], report: WorkerReport, inputs: RunInputs, where: str
) -> None:
    books = check_books(inputs.total_jobs, jobs.ledger_of(records, [report]))
    for problem in books.problems:
        check = "timestamps" if "timestamps" in problem else "books"
        verdict.fail(check, f"{where}: {problem}")
    expected = {job: inputs.workload.tenant_ids[job - 1] for job in range(1, inputs.total_jobs + 1)}
    wrong = sorted(run.job for run in report.task_runs if expected.get(run.job) != run.tenant)
    if wrong:
        verdict.fail("books", f"{where}: job(s) reported with another tenant: {wrong[:5]}")
    # `started` is optional; an adapter that says it says it for every job it runs
    started = {job for job, *_ in report.starts}
    unsaid = sorted(run.job for run in report.task_runs if started and run.job not in started)
    if unsaid:
        verdict.fail("books", f"{where}: job(s) done without their `started`: {unsaid[:5]}")


def _outside(dsn: str, schema: str, declared: tuple[str, ...]) -> set[str]:
    """Every object outside the run's schema and those its manifest declares."""
    statement = builtin_blocks("harness.run", "conformance.sql")["objects_outside"].sql
    with connect(dsn) as conn:
        rows = conn.execute(statement, {"schema": schema, "declared": list(declared)}).fetchall()  # type: ignore[call-overload]
    return {row[0] for row in rows}


def _compare(verdict: Verdict, what: str, before: set[str], after: set[str]) -> None:
    new = sorted(after - before)
    if new:
        shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        verdict.fail("schema", f"{what}: {shown}")


def _error_probe(verdict: Verdict, adapter: Adapter, dsn: str) -> None:
    """Its worker given a database that does not exist: an `error` event, then an exit."""
    mapping = adapter.manifest.mappings[0].mapping
    spec = ContractSpec(adapter, mapping, Site(dsn, "tqb_kit_no_database"), POLL_MS)
    parts = connection_of(dsn).model_copy(update={"dbname": f"tqb_kit_missing_{RUN_TOKEN}"})
    worker = AdapterProcess(adapter, spec.config("worker", parts))
    outcome: list[Any] = []
    thread = threading.Thread(target=_first_event, args=(worker, outcome), daemon=True)
    thread.start()
    thread.join(timeout=ERROR_BOUND_S)
    try:
        if thread.is_alive():
            verdict.fail("error", f"no `error` event within {ERROR_BOUND_S:g} s (it hangs)")
        elif outcome and isinstance(outcome[0], AdapterExited):
            verdict.fail("error", f"it exited without an `error` event: {outcome[0]}")
        elif not (outcome and isinstance(outcome[0], AdapterFailed)):
            said = outcome[0] if outcome else "nothing"
            verdict.fail("error", f"with a database that does not exist it said: {said}")
    finally:
        worker.close(bound_s=5.0)
    if worker.process.returncode == 0 and not verdict.problems["error"]:
        verdict.fail("error", "it failed with exit code 0")


def _first_event(worker: AdapterProcess, outcome: list[Any]) -> None:
    try:
        outcome.append(worker.next_event())
    except (AdapterFailed, ProtocolError) as error:
        outcome.append(error)
