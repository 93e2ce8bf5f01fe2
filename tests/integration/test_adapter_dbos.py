"""DBOS's adapter (harness/queues/adapters/dbos/): what is its own beside the conformance
kit's checks. Its worker reads only the JSON the harness enqueues: a workflow whose row is
rewritten to a pickle is refused, never unpickled (DBOS reads a row's inputs as its
`serialization` column says, whatever the process configured). Its fetch among a
capture's plans is the claim, but for the capped partitions at a cap of 1 (the sweep).
"""

from __future__ import annotations

import base64
import importlib.util
import pickle
import time
from pathlib import Path
from typing import Any

import pytest

from harness.queues.base import Site, WorkerReport
from harness.queues.contract.manifest import Adapter, load_adapters
from harness.queues.contract.process import AdapterProcess, run_role
from harness.queues.contract.protocol import (
    Installed,
    Ready,
    Versions,
)
from harness.queues.contract.queue import ContractSpec, enqueue_all, recorded
from harness.queues.contract.reader import WorkerEvents
from harness.server.connections import RUN_TOKEN, Connection, connect
from harness.server.kinds import Server
from harness.server.schema import own_schema

# Skipped without DBOS, which is imported only where a test runs (0.6 CPU-s with
# SQLAlchemy), not in every worker that collects the module.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("dbos") is None, reason="DBOS is the extra `libraries` (make venv)"
)

REWRITTEN = 2  # the job whose row is rewritten to a pickle
JOBS = [(1, 1, 5.0), (2, 2, 5.0), (3, 3, 5.0)]
SETTLED_BOUND_S = 60.0  # a bound on DBOS's claims, never a measure of speed
ROW = (  # DBOS keeps a workflow's outcome, its error among it, in workflow_output
    "select status.status, output.error from workflow_status as status"
    " left join workflow_output as output using (workflow_uuid)"
    " where workflow_uuid = %s"
)


class LeavesAMark:
    """An object whose unpickling touches a file: code run by whoever unpickles it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def as_dbos_pickle(thing: object) -> str:
    """As DBOS's py_pickle serializer writes a value: base64 of its pickle."""
    return base64.b64encode(pickle.dumps(thing)).decode()


def dbos() -> Adapter:
    return load_adapters()["dbos"]


def spec_of(server: Server, schema: str, mapping: str = "one_queue", cap: int = 1) -> ContractSpec:
    tenants = tuple(sorted({tenant for _, tenant, _ in JOBS}))
    site = Site(server.dsn, schema)
    return ContractSpec(dbos(), mapping, site, 10.0, cap=cap, concurrency=2, tenants=tenants)


def workflow_id(job: int, tenant: int) -> str:
    return f"{job:010d}:{tenant}"  # dbos.sql's dbos_enqueue


@pytest.mark.libraries
def test_a_row_rewritten_to_a_pickle_is_refused_not_run(server: Server, tmp_path: Path) -> None:
    """The harness's rows are JSON; one rewritten by another session to a pickle whose
    unpickling would touch a file: the worker never unpickles it (no file), never reports
    it done, and DBOS records it ERROR with the refusal; the others run."""
    mark = tmp_path / "unpickled"
    proof = tmp_path / "a pickle that leaves its mark"
    pickle.loads(pickle.dumps(LeavesAMark(proof)))
    assert proof.exists()  # the payload does what it says, where it is unpickled
    schema = f"tqb_dbos_pickle_{RUN_TOKEN[:8]}"
    with own_schema(server.dsn, schema):
        spec = spec_of(server, schema)
        run_role(spec.adapter, spec.config("install"), (Installed,))
        enqueue_all(spec, [(0.0, JOBS)])
        rewritten = workflow_id(REWRITTEN, 2)
        with connect(server.dsn, schema=schema) as conn:
            written = conn.execute("select distinct serialization from workflow_status")
            assert written.fetchall() == [("portable_json",)]  # what enqueue_workflow writes
            rewrite_to_a_pickle(conn, rewritten, LeavesAMark(mark))
        report = work_until_settled(spec, rewritten)
        records = recorded(spec)
        with connect(server.dsn, schema=schema) as conn:
            status, error = conn.execute(ROW, (rewritten,)).fetchone() or (None, None)
    assert not mark.exists(), "the worker unpickled the rewritten row's inputs"
    assert sorted(run.job for run in report.task_runs) == [1, 3]
    assert status == "ERROR"
    assert b"refused: a py_pickle row" in base64.b64decode(error)  # read, never unpickled
    assert {record.job: record.state for record in records} == {1: "done", 2: "failed", 3: "done"}


def rewrite_to_a_pickle(conn: Connection, workflow: str, thing: object) -> None:
    """A workflow's inputs (workflow_input, where enqueue_workflow writes them: DBOS reads
    them before workflow_status's own column) replaced by a pickle, and its row's
    serialization by the pickle's name."""
    conn.execute(
        "update workflow_input set inputs = %s where workflow_uuid = %s",
        (as_dbos_pickle(thing), workflow),
    )
    conn.execute(
        "update workflow_status set serialization = 'py_pickle' where workflow_uuid = %s",
        (workflow,),
    )


def work_until_settled(spec: ContractSpec, rewritten: str) -> WorkerReport:
    """A worker from start until the other jobs are reported and DBOS has settled the
    rewritten one (neither queued nor running), within a bound; then its stop."""
    worker = AdapterProcess(spec.adapter, spec.config("worker"))
    report = WorkerReport(worker=0)
    try:
        worker.expect(Ready)
        events = WorkerEvents.started(worker, report)
        events.wait_for(len(JOBS) - 1, SETTLED_BOUND_S)
        wait_for_status(spec, rewritten)
        events.stop()
    finally:
        worker.close(bound_s=5.0)
    return report


def wait_for_status(spec: ContractSpec, workflow: str) -> None:
    deadline = time.monotonic() + SETTLED_BOUND_S
    with connect(spec.site.dsn, schema=spec.site.schema) as conn:
        while time.monotonic() < deadline:
            found = conn.execute(ROW, (workflow,)).fetchone()
            if found is not None and found[0] not in ("ENQUEUED", "PENDING"):
                return
            time.sleep(0.1)


@pytest.mark.parametrize(
    ("mapping", "cap", "fetch"),
    [
        ("one_queue", 1, None),
        ("partitioned", 1, None),
        ("partitioned_capped", 2, None),
        ("partitioned_capped", 1, {"marker": "JOIN LATERAL", "locks": False, "rows": False}),
    ],
)
def test_its_fetch_is_the_sweep_only_for_capped_partitions_at_a_cap_of_one(
    server: Server, mapping: str, cap: int, fetch: dict[str, Any] | None
) -> None:
    """Its `versions` tells the sweep of partitions (which locks nothing itself) where
    DBOS runs it; elsewhere the manifest's claim (created_at ASC LIMIT, locking) stands."""
    spec = spec_of(server, "tqb_dbos_versions", mapping, cap)
    _, said = run_role(spec.adapter, spec.config("versions"), (Versions,))
    assert (said.fetch.model_dump() if said.fetch else None) == fetch
    claim = spec.adapter.manifest.fetch_of(spec.adapter.declared(mapping))
    assert claim is not None and (claim.marker, claim.locks) == ("created_at ASC LIMIT", True)


def test_dbos_migrates_through_a_url_of_the_connection() -> None:
    """DBOS.migrate takes a URL: the socket directory and the libpq keywords as query
    parameters, the password the connection has, the database where SQLAlchemy looks for
    it (DBOS creates a database of that name if it finds none)."""
    from sqlalchemy.engine import make_url

    from harness.queues.adapters.dbos.dbos_adapter import migration_url

    url = make_url(migration_url("host=/tmp/socket port=5432 user=postgres dbname=bench"))
    assert (url.drivername, url.database, url.username, url.port) == (
        "postgresql+psycopg",
        "bench",
        "postgres",
        5432,
    )
    assert url.host is None and url.query["host"] == "/tmp/socket"
    tcp = make_url(migration_url("postgresql://u:p%40ss@db.example.com/q?sslmode=verify-full"))
    assert (tcp.host, tcp.password, tcp.query["sslmode"]) == (
        "db.example.com",
        "p@ss",
        "verify-full",
    )
