"""The adapter contract without a server (docs/adapters.md): manifests validated where
they are read, every event an adapter writes validated where it enters, commands resolved
without a shell inside the adapter's folder, the ledger from the task log and the
library's records, and an adapter of --adapters-dir travelling to a fleet member; a
queue declared once: its tuned settings with their sources, its worker processes, its
fetch, its requirements, the shipped adapter it replaces."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.errors import HarnessError, RunFailed
from harness.queues.base import Program, Site, TaskRun, WorkerReport
from harness.queues.catalog import catalog
from harness.queues.contract import protocol, runtime
from harness.queues.contract.jobs import ledger_of
from harness.queues.contract.manifest import load_adapters, read_manifest, replacements
from harness.queues.contract.process import last_line
from harness.queues.contract.protocol import JobDone, ProtocolError, Record, parse_event
from harness.queues.contract.queue import ContractSpec, worker_main
from harness.queues.programs import Local, Refused
from harness.queues.sql.strategies import load_strategies
from harness.queues.wire import program_from_wire, program_to_wire

MANIFEST = """\
protocol = 1
name = "river"
library = "River"
language = "Go"
command = ["bin/river-adapter", "--quiet"]
fetch_marker = "FROM river_job"

[[requires]]
command = ["go", "version"]
install = "Go is needed"

[[mappings]]
strategy = "river"
mapping = "one_queue"
promises = "one global order"

[[mappings]]
strategy = "river_queue_per_tenant"
mapping = "queue_per_tenant"
promises = "one running job per tenant"
[mappings.options]
max_workers = 1
"""
T = "2026-12-01 10:00:00.123456+00"
SHIPPED = {
    "river",
    "pgboss",
    "graphile",
    "minion",
    "delayed_job",
    "procrastinate",
    "pgqueuer",
    "dbos",
    "awa",
    "pgmq",
    "saq",
    "pgqrs",
    "dbscheduler",
}


def write(folder: Path, text: str, name: str = "river.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_a_manifest_declares_its_command_mappings_and_options(tmp_path: Path) -> None:
    manifest = read_manifest(write(tmp_path / "river", MANIFEST))
    assert manifest.command == ["bin/river-adapter", "--quiet"]
    assert [m.strategy for m in manifest.mappings] == ["river", "river_queue_per_tenant"]
    assert manifest.mappings[1].options == {"max_workers": 1}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ("protocol = 1", "protocol = 3"),
            "protocol: the adapter speaks protocol 3; this harness speaks 1 and 2",
        ),
        (
            ('"bin/river-adapter"', '"/usr/bin/env"'),
            "command: Value error, '/usr/bin/env': a program is",
        ),
        (
            ('"bin/river-adapter"', '"../../bin/sh"'),
            "command: Value error, '../../bin/sh': a program is",
        ),
        (
            ('strategy = "river_queue', 'strategy = "fifo_queue'),
            "must be the adapter's name or start with 'river_'",
        ),
        (
            ('strategy = "river_queue_per_tenant"', 'strategy = "river"'),
            "a strategy is declared twice",
        ),
        (('language = "Go"', 'language = "Go"\nshell = true'), "shell: not a field of a manifest"),
        (('name = "river"', 'name = "River; rm -rf /"'), "name: String should match pattern"),
        (("protocol = 1", "protocol = 1\n[oops"), "not TOML"),
        (
            (
                "max_workers = 1",
                'max_workers = 1\n[recovery]\nthen = "left"\nafter_s = 6\nsays = "x"\nsource = "y"',
            ),
            "a job left has none",
        ),
        (
            (
                "max_workers = 1",
                'max_workers = 1\n[recovery]\nthen = "lost"\nsays = "x"\nsource = "y"',
            ),
            "recovery.then: Input should be 'retried', 'failed' or 'left'",
        ),
    ],
)
def test_a_bad_manifest_is_one_line_naming_the_file_and_field(
    tmp_path: Path, change: tuple[str, str], said: str
) -> None:
    path = write(tmp_path / "river", MANIFEST.replace(*change, 1))
    with pytest.raises(HarnessError) as refused:
        read_manifest(path)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(str(path)) and said in line


def test_the_shipped_adapters_and_another_folder_that_replaces_one(tmp_path: Path) -> None:
    assert set(load_adapters()) == SHIPPED
    mine = MANIFEST.replace('name = "river"', 'name = "minion"').replace("river", "minion")
    write(tmp_path / "minion", mine, "minion.toml")
    adapters = load_adapters(tmp_path)
    replaced = adapters["minion"]
    assert replaced.folder == tmp_path / "minion" and replaced.manifest.language == "Go"
    assert replaced.replaces is not None and replaced.replaces.name == "minion"
    assert replacements(adapters) == [
        f"adapter minion of {tmp_path / 'minion'} replaces the shipped one ({replaced.replaces})"
    ]
    assert adapters["pgboss"].replaces is None
    assert "minion_queue_per_tenant" in catalog(adapters_dir=tmp_path)
    write(tmp_path / "minion", mine, "again.toml")
    with pytest.raises(HarnessError, match="adapter 'minion' is declared twice"):
        load_adapters(tmp_path)


def test_each_shipped_adapter_says_what_its_library_does_with_a_dead_workers_job() -> None:
    """Its promise, timed unless the job is left, with where its docs or code say it."""
    promised = {name: adapter.manifest.recovery for name, adapter in load_adapters().items()}
    assert set(promised) == SHIPPED and all(promised.values()), promised
    left = {name for name, recovery in promised.items() if recovery and recovery.then == "left"}
    # a user's periodic task; the same executor id; an admin's reclaim (pgqrs)
    assert left == {"procrastinate", "dbos", "pgqrs"}


def test_a_command_runs_only_from_the_adapters_folder(tmp_path: Path) -> None:
    folder = tmp_path / "river"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "river-adapter").write_text("#!/bin/sh\n")
    (tmp_path / "outside").write_text("#!/bin/sh\n")
    (folder / "bin" / "escape").symlink_to(tmp_path / "outside")
    inside = runtime.resolve(["bin/river-adapter", "-q"], folder)
    assert inside == [str((folder / "bin" / "river-adapter").resolve()), "-q"]
    assert runtime.resolve(["bin/escape"], folder) is None  # a link out of it
    assert runtime.resolve(["bin/missing"], folder) is None
    found = runtime.resolve(["sh", "-c", "true"], folder)
    assert found is not None and Path(found[0]).name == "sh"


def test_a_missing_runtime_is_one_line_naming_what_to_install(tmp_path: Path) -> None:
    text = MANIFEST.replace('command = ["go", "version"]', 'command = ["false"]')
    write(tmp_path / "river", text)
    adapter = load_adapters(tmp_path)["river"]
    assert runtime.missing(adapter) == "adapter river: `false` fails here; Go is needed"


def test_an_event_is_validated_where_it_enters() -> None:
    moments = {"enqueued_at": T, "started_at": T, "finished_at": T}
    line = json.dumps({"event": "job", "job": 3, "tenant": 1, "id": "a1", **moments}).encode()
    event = parse_event(line, 7, "river")
    assert isinstance(event, JobDone) and event.job == 3
    assert event.started_at == datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    ("line", "said", "field"),
    [
        (b"starting 4 slots\n", "stdout line 7 is not a JSON object: 'starting 4 slots'", None),
        (b'{"event": "hello"}\n', "stdout line 7 is no event of protocol 2", None),
        (b'{"event": "ready", "sql": "drop table x"}\n', "(ready): sql: not a field of it", "sql"),
        (b'{"event": "enqueued", "count": -1}\n', "(enqueued): count: Input should be", "count"),
        (b'{"event": "enqueued", "count": "5"}\n', "(enqueued): count: Input should be", "count"),
        (
            b'{"event": "job", "job": 1, "tenant": 1, "id": "x", "enqueued_at":'
            b' "2026-12-01 10:00:00", "started_at": "2026-12-01 10:00:00+00",'
            b' "finished_at": "2026-12-01 10:00:00+00"}\n',
            "(job): enqueued_at: Value error, '2026-12-01 10:00:00' has no UTC offset",
            "enqueued_at",
        ),
        (b'{"event": "requeued", "job": 0, "tenant": 1, "id": "x"}\n', "(requeued): job:", "job"),
    ],
)
def test_a_line_that_is_no_event_is_a_protocol_error_naming_it(
    line: bytes, said: str, field: str | None
) -> None:
    with pytest.raises(ProtocolError) as error:
        parse_event(line, 7, "river")
    assert str(error.value).startswith("adapter river: protocol: stdout line 7")
    assert said in str(error.value) and error.value.field == field


def _run(job: int, tenant: int = 1) -> TaskRun:
    moment = datetime(2026, 12, 1, tzinfo=UTC)
    return TaskRun(job, tenant, f"id{job}", moment, moment, moment)


def _record(job: int, state: str) -> Record:
    return Record(event="record", id=f"id{job}", job=job, tenant=1, state=state, enqueued_at=T)  # type: ignore[arg-type]


def test_the_ledger_takes_the_librarys_word_over_a_job_event() -> None:
    """Reported run but held as running by the library: not done. Held by the library and
    never reported: not done. Reported and gone from the library's tables: done. Reported
    twice: claimed twice."""
    report = WorkerReport(0, task_runs=[_run(1), _run(2), _run(4), _run(4)])
    ledger = ledger_of([_record(1, "done"), _record(2, "running"), _record(3, "waiting")], [report])
    assert [(r.job_id, r.status) for r in ledger.records] == [
        (1, "done"),
        (2, "not finished (running)"),
        (3, "not finished (waiting)"),
        (4, "done"),
    ]
    assert ledger.claims == [1, 2, 4, 4]


def test_an_adapter_travels_to_a_member_by_name_and_digest(tmp_path: Path) -> None:
    """Its spec holds no path, no command, no DSN; the member takes its own install's
    adapter of that name, refused without it or with a folder that differs."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    rapids = MANIFEST.replace("river", "rapids")  # an adapter no install ships (river is)
    write(ours / "rapids", rapids)
    write(theirs / "rapids", rapids.replace("one global order", "another order"))
    adapter = load_adapters(ours)["rapids"]
    site = Site("postgresql://coordinator:Sekr3t@db.example/bench", "harness_run_1")
    spec = ContractSpec(adapter, "queue_per_tenant", site, 10.0, tenants=(1, 2))
    row = program_to_wire(Program("worker", worker_main, spec))
    text = str(row)
    assert str(ours) not in text and "bin/rapids-adapter" not in text and "Sekr3t" not in text
    member = "postgresql://member@10.0.0.7/bench"
    accepted = program_from_wire(row, Local(member, load_strategies(), load_adapters(ours)))
    assert accepted.spec == ContractSpec(
        adapter, "queue_per_tenant", Site(member, site.schema), 10.0, tenants=(1, 2)
    )
    with pytest.raises(Refused, match=r"adapter 'rapids' is not in this member's install"):
        program_from_wire(row, Local(member, load_strategies(), load_adapters()))
    with pytest.raises(Refused, match=r"adapter 'rapids': this member's folder differs"):
        program_from_wire(row, Local(member, load_strategies(), load_adapters(theirs)))


TUNED = (
    MANIFEST.replace("protocol = 1", "protocol = 2")
    + """
[[mappings]]
strategy = "river_tuned"
mapping = "one_queue_tuned"
promises = "one global order, fetched in batches"
processes = "per_core"
[mappings.options]
fetch_batch = 100
[mappings.tuned.sources]
fetch_batch = "River's docs: a batch of 100"
processes = "River's docs: a client per core"
"""
)


def test_a_recovery_mapping_declares_its_own_promise(tmp_path: Path) -> None:
    """Its settings cited as a tuned mapping's; its promise its own, recorded as the
    strategy's (the adapter's stays the other mappings')."""
    text = TUNED.replace('strategy = "river_tuned"', 'strategy = "river_recovery"') + (
        '[mappings.recovery]\nthen = "retried"\nafter_s = 5\nsays = "x"\nsource = "y"\n'
    )
    manifest = read_manifest(write(tmp_path / "river", text))
    promise = manifest.mappings[2].recovery
    assert promise is not None and (promise.then, promise.after_s) == ("retried", 5)
    assert manifest.mappings[0].recovery is None


def test_a_tuned_mapping_cites_each_setting_it_is_tuned_to(tmp_path: Path) -> None:
    manifest = read_manifest(write(tmp_path / "river", TUNED))
    tuned = manifest.mappings[2]
    assert tuned.tuned_settings() == {"fetch_batch": 100, "processes": "per_core"}
    assert manifest.mappings[0].tuned_settings() == {}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ('fetch_batch = "River', 'batch_size = "River'),
            "tuned cites ['batch_size']: each tuned setting is one of the mapping's options",
        ),
        (
            ('strategy = "river_queue_per_tenant"', 'strategy = "river_queue_per_tenant_tuned"'),
            "strategy 'river_queue_per_tenant_tuned' is named tuned: give its [tuned] sources",
        ),
        (
            ('processes = "per_core"', 'processes = "per_core"\njobs_per_process = 4'),
            "jobs_per_process and processes: give one of them",
        ),
        (
            ('strategy = "river_tuned"', 'strategy = "river_recovery"'),
            "strategy 'river_recovery' is named recovery: give its [recovery] promise and "
            "its settings' [tuned] sources",
        ),
        (
            ("protocol = 2", "protocol = 1"),
            "are protocol 2: say protocol = 2",
        ),
        (
            (
                'fetch_marker = "FROM river_job"',
                'fetch_marker = "FROM river_job"\n[fetch]\nmarker = "x y z"',
            ),
            "fetch_marker and fetch: give one of them",
        ),
    ],
)
def test_a_protocol_2_field_out_of_its_rules_is_one_line(
    tmp_path: Path, change: tuple[str, str], said: str
) -> None:
    path = write(tmp_path / "river", TUNED.replace(*change, 1))
    with pytest.raises(HarnessError) as refused:
        read_manifest(path)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(str(path)) and said in line


def test_the_harness_python_is_a_program_and_a_module_a_requirement(tmp_path: Path) -> None:
    text = TUNED.replace('["bin/river-adapter", "--quiet"]', '["{python}", "river.py"]').replace(
        'command = ["go", "version"]', 'python_modules = ["json", "no_such_module_x"]'
    )
    write(tmp_path / "river", text)
    adapter = load_adapters(tmp_path)["river"]
    assert runtime.resolve(adapter.manifest.command, adapter.folder) == [sys.executable, "river.py"]
    assert runtime.missing(adapter) == "adapter river: no_such_module_x; Go is needed"


def test_a_protocol_2_event_may_leave_out_what_the_ledger_has() -> None:
    """A `job` without moments (its library's tables keep them) but with its fetch's time;
    a `record` without its payload's number (pgqueuer deletes it); an install refused."""
    job = parse_event(b'{"event": "job", "job": 3, "tenant": 1, "id": "a", "claim_ms": 2}', 1, "x")
    assert isinstance(job, JobDone) and job.started_at is None and job.claim_ms == 2.0
    line = json.dumps({"event": "record", "id": "a", "state": "done", "enqueued_at": T})
    record = parse_event(line.encode(), 2, "x")
    assert isinstance(record, Record) and record.job is None and record.started_at is None
    refused = parse_event(b'{"event": "refused", "reason": "too many queues"}', 3, "x")
    assert isinstance(refused, protocol.Refused) and refused.reason == "too many queues"


def test_the_ledger_takes_a_records_moments_and_its_runs_number() -> None:
    """A record whose payload is gone is told by its library id; its moments are the
    record's where it has them, the run's otherwise."""
    record = Record(event="record", id="id7", state="done", enqueued_at=T, started_at=T)  # type: ignore[arg-type]
    later = datetime(2026, 12, 1, 11, tzinfo=UTC)
    run = TaskRun(7, 2, "id7", None, later, later, claim_ms=1.5)
    ledger = ledger_of([record], [WorkerReport(3, task_runs=[run])])
    (only,) = ledger.records
    assert (only.job_id, only.tenant_id, only.status, only.worker) == (7, 2, "done", 3)
    assert only.started_at == datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert only.finished_at == later and only.claim_ms == 1.5
    orphan = Record(event="record", id="id8", state="waiting", enqueued_at=T)  # type: ignore[arg-type]
    with pytest.raises(RunFailed, match="library id id8: its payload is gone"):
        ledger_of([orphan], [])


def test_an_adapters_last_word_on_stderr_is_its_error_not_nodes_footer() -> None:
    error = "Error: terminating connection due to administrator command"
    crashed = f"/a/b.js:10\n  throw e;\n  ^\n\n{error}\n    at x (x.js:1:2)\n\nNode.js v22.23.3\n"
    assert last_line(crashed) == error
    assert last_line("Error: boom\nNode.js v22.23.3") == "Error: boom"
    # an error with fields of its own: Node prints them in braces after the last frame
    fields = "  errno: -32,\n  code: 'EPIPE',\n  syscall: 'write'\n}"
    frames = "    at a (a.js:1:2)\n    at b (b.js:3:4) {"
    epipe = f"Error: write EPIPE\n{frames}\n{fields}\n\nNode.js v22.23.3"
    assert last_line(epipe) == "Error: write EPIPE"
    assert last_line("\n\n") is None and last_line("x" * 400) == "x" * 300
