"""The library adapters' shared pieces that need no server: job numbers that follow the
workload whatever ids a library chooses, and the ledger from a library's rows and its
task log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from harness.queues.base import Site, TaskRun, WorkerReport
from harness.queues.libraries import common
from harness.queues.libraries.awa_queue import awa_url
from harness.queues.libraries.dbos_queue import migration_url
from harness.queues.libraries.notices import notice_message
from harness.queues.libraries.pgqueuer_queue import asyncpg_arguments
from harness.results.document import (
    TUNED,
    UNLIKE_THE_SCENARIO,
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
    """What an adapter says it could not do as the scenario asks (its `versions` event's
    unlike_the_scenario: pg-boss cannot poll every 10 ms) is put above the waits
    (tests/unit/test_analysis.py); the adapter's own saying is tested with it
    (tests/integration/test_adapters.py)."""
    said = "polls every 0.5 s, not every 10 ms as the scenario asks"
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
    """Adding a Python library is a module of its own and a line, an adapter a manifest:
    every mapping declared is a queue a scenario may name, each once, none twice."""
    from harness.queues.catalog import catalog
    from harness.queues.contract.manifest import load_adapters
    from harness.queues.libraries import (
        awa_queue,
        dbos_queue,
        pgmq_queue,
        pgqueuer_queue,
        procrastinate_queue,
        saq_queue,
    )
    from harness.queues.sql.strategies import load_strategies

    names = [name for name in catalog() if name not in load_strategies()]
    adapters = [m.strategy for a in load_adapters().values() for m in a.manifest.mappings]
    declared = [
        *procrastinate_queue.MAPPINGS,
        *procrastinate_queue.TUNED_MAPPINGS,
        *pgqueuer_queue.MAPPINGS,
        *pgqueuer_queue.TUNED_MAPPINGS,
        *dbos_queue.MAPPINGS,
        *awa_queue.MAPPINGS,
        *pgmq_queue.MAPPINGS,
        *saq_queue.MAPPINGS,
        *adapters,
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


def test_a_tuned_mapping_says_its_settings_and_shares_the_workers_out() -> None:
    """The tuned mappings record their library and settings (what the tables name), keep
    the scenario's workers as the jobs that may run at once, and split them over the
    processes or queue managers their library recommends."""
    from harness.queues.libraries import procrastinate_queue
    from harness.queues.libraries.pgqueuer_queue import PgqueuerQueue, Spec

    inputs, site = _inputs(1), Site("", "s")
    tuned = procrastinate_queue.ProcrastinateQueue("p_t", "one_queue", site, inputs, tuned=True)
    default = procrastinate_queue.ProcrastinateQueue("p", "one_queue", site, inputs)
    document = RunDocument.model_validate(
        {
            "run_id": "r",
            "status": "complete",
            "started_at": "2026-12-01T00:00:00+00:00",
            "scenario": {"name": "s", "path": "s.yaml", "sha256": "0", "seed": 1},
            "queues": {"p_t": tuned.provenance(), "p": default.provenance()},
        }
    )
    settings = queue_settings(document)
    assert (settings["p"].library, settings["p"].label) == ("procrastinate", "default")
    assert settings["p_t"].label == "tuned"
    assert settings["p_t"].tuned["processes"] == procrastinate_queue.processors()
    processes = tuned.workers(24)
    assert len(processes) == min(24, procrastinate_queue.processors())
    assert sum(program.spec.concurrency for program in processes) == 24
    assert [program.spec.concurrency for program in default.workers(24)] == [24]
    pgqueuer = PgqueuerQueue("q_t", "one_entrypoint", site, inputs, tuned=True)
    assert pgqueuer.provenance()[TUNED]["event_loop"] == "uvloop"
    spec = Spec(site=site, mapping="one_entrypoint", concurrency=100, tuned=True)
    assert spec.manager_caps == [20] * 5
    assert [spec.batch_size(cap) for cap in spec.manager_caps] == [10] * 5
    small = Spec(site=site, mapping="one_entrypoint", concurrency=4, tuned=True)
    assert small.manager_caps == [4] and small.batch_size(4) == 2  # its rule: tasks >= 2 x batch
    limited = Spec(site=site, mapping="concurrency_limit", concurrency=4, tuned=True)
    assert limited.batch_size(4) == 1


def test_a_tuned_adapter_mapping_says_its_settings_and_shares_the_workers_out() -> None:
    """pg-boss's and graphile-worker's tuned mappings are manifest mappings with options:
    recorded as their tuned settings, and graphile-worker's runs a process per 24 jobs as
    its perfTest does; their default mappings record none and run one process."""
    from harness.queues.contract.manifest import load_adapters
    from harness.queues.contract.queue import tuned_settings, worker_processes

    adapters = load_adapters()
    graphile, pgboss = adapters["graphile"], adapters["pgboss"]
    tuned = graphile.declared("one_queue_tuned")
    assert tuned_settings(tuned)[TUNED]["local_queue_size"] == 500
    assert [worker_processes(tuned, count) for count in (4, 24, 25, 96)] == [1, 1, 2, 4]
    assert tuned_settings(graphile.declared("one_queue")) == {}
    assert worker_processes(graphile.declared("one_queue"), 96) == 1
    assert tuned_settings(pgboss.declared("one_queue_tuned"))[TUNED] == {
        "batch_size": 10,
        "burst_when_batch_full": True,
    }


def test_awa_connects_as_the_dsn_says_sockets_tls_and_passwords_included() -> None:
    """awa's driver (sqlx) reads URLs: a socket directory goes as its host parameter, the
    password libpq would send and the sslmode go with it; a capture's relay replaces the
    server and adds auto_explain to the session's options."""
    secret = "s3cr:t/x"
    url = awa_url(
        f"host=db.example.com port=6543 user=bench password='{secret}' dbname=q sslmode=require"
    )
    assert url.startswith("postgres://bench:s3cr%3At%2Fx@db.example.com:6543/q?")
    assert "sslmode=require" in url and "application_name=tenant-queue-bench%20" in url
    socket = awa_url("host=/tmp/socket port=5432 user=postgres dbname=bench")
    assert socket.startswith("postgres://postgres@localhost/bench?")
    assert "host=%2Ftmp%2Fsocket" in socket and "port=5432" in socket
    relayed = awa_url("host=/tmp/socket user=postgres dbname=bench", relay="/tmp/relay")
    assert "host=%2Ftmp%2Frelay" in relayed and "sslmode=disable" in relayed
    assert "session_preload_libraries%3Dauto_explain" in relayed


def test_dbos_migrates_through_a_url_of_the_dsn() -> None:
    """DBOS.migrate takes a URL: the socket directory and the libpq keywords as query
    parameters, the database where SQLAlchemy looks for it (DBOS creates a database of
    that name if it finds none)."""
    from sqlalchemy.engine import make_url

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


def test_a_relayed_notice_is_read_from_its_fields() -> None:
    """A NoticeResponse's body: a type byte and a null-terminated string per field, a zero
    byte at the end; the message is field M."""
    body = b"SNOTICE\x00C00000\x00Mduration: 1.5 ms  plan: {}\x00Fexplain.c\x00\x00"
    assert notice_message(body) == "duration: 1.5 ms  plan: {}"
    assert notice_message(b"SNOTICE\x00\x00") == ""


def test_awa_says_when_a_queue_per_tenant_needs_more_connections_than_the_server_has() -> None:
    """Each of awa's dispatchers holds a connection for its LISTEN: 1,000 tenants' queues
    cannot run on a server with 100 connections, one queue can; the capture of such a
    backlog is skipped with this reason rather than left to time out."""
    from harness.queues.libraries.awa_queue import Spec

    tenants = tuple(range(1, 1001))
    weighted = Spec(Site("", "s"), "weighted_queues", tenants=tenants, weights=(1,) * 1000)
    refused = weighted.refused(97)
    assert refused is not None
    assert "1000 of them, needs about 1016 connections" in refused
    assert "its docs size the pool at 4020" in refused and "97 left" in refused
    assert Spec(Site("", "s"), "one_queue", tenants=tenants).refused(97) is None
    assert Spec(Site("", "s"), "weighted_queues", tenants=tenants[:11]).refused(97) is None
