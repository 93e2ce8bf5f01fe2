"""Hostile rows in a fleet's tables: anyone with the bench credentials can write them, so a
member takes nothing in them on faith. Each test plays the coordinator: it opens a
fleet's tables as `harness run --fleet` does, writes an assignment of its own, and lets
a member (harness/run/member.py) join and read it. Each shape is refused with one line,
which the member also writes into its row for the coordinator to name it."""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql
from psycopg.types.json import Jsonb

import harness
from harness.queues.base import Program, Site
from harness.queues.contract import queue as contract
from harness.queues.contract.manifest import load_adapters
from harness.queues.programs import Refused
from harness.queues.sql.strategies import Strategy
from harness.queues.wire import program_to_wire
from harness.run.fleet import BEAT_S, PROTOCOL, fleet_schema, fleet_sql
from harness.run.member import serve
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.server.connections import connect
from harness.server.kinds import Server
from tests.conftest import SHORT_NOISY, harness_cli
from tests.integration.conftest import sql_queue

Row = dict[str, Any]
_IDS = itertools.count(1)


def rows(server: Server, strategies: dict[str, Strategy]) -> dict[str, Row]:
    """An honest row of each kind, as a coordinator writes it."""
    inputs = RunInputs.of(Scenario.model_validate(yaml.safe_load(SHORT_NOISY)))
    site = Site(server.dsn, "harness_hostile")
    library = contract.ContractQueue("pgmq", load_adapters()["pgmq"], "read", site, inputs)
    adapter = contract.ContractSpec(load_adapters()["graphile"], "one_queue", site, 10)
    return {
        "sql": program_to_wire(
            sql_queue(server, strategies["round_robin"], site.schema).workers(1)[0]
        ),
        "library": program_to_wire(library.workers(2)[0]),
        "adapter": program_to_wire(Program("worker", contract.worker_main, adapter)),
    }


def _set(kind: str, **spec: Any) -> Callable[[dict[str, Row]], list[Any]]:
    """The honest row of `kind` with these spec fields changed (or added)."""

    def hostile(honest: dict[str, Row]) -> list[Any]:
        row = copy.deepcopy(honest[kind])
        row["spec"].update(spec)
        return [row]

    return hostile


def _program(name: str) -> Callable[[dict[str, Row]], list[Any]]:
    def hostile(honest: dict[str, Row]) -> list[Any]:
        return [{**copy.deepcopy(honest["sql"]), "program": name}]

    return hostile


HOSTILE = {
    "os.system": (
        _program("harness.run.member:os.system"),
        "'harness.run.member:os.system' is not a program of the harness; a member runs only "
        "adapter.enqueuer, adapter.worker, sql.enqueuer, sql.worker",
    ),
    "the CLI": (
        _program("harness.__main__:app"),
        "'harness.__main__:app' is not a program of the harness",
    ),
    "foreign SQL": (
        _set("sql", claim={"dequeue": "copy (select 1) to program 'id > /tmp/owned'"}),
        "sql.worker: spec.claim: no SQL travels: a member runs its own install's strategy",
    ),
    "foreign SQL by another name": (
        _set("sql", dequeue="copy (select 1) to program 'id'"),
        "sql.worker: spec.dequeue: not a field of the spec of sql.worker",
    ),
    "wrong digest": (
        _set("sql", sql_sha256="0" * 64),
        "sql.worker: strategy 'round_robin': this member's install differs from the "
        "coordinator's (its SQL's sha256 is ",
    ),
    "unknown strategy": (
        _set("sql", strategy="../../etc/passwd"),
        "sql.worker: strategy '../../etc/passwd' is not in this member's install",
    ),
    "a path for an adapter": (
        _set("adapter", adapter="../../../tmp/evil"),
        "adapter.worker: spec.adapter: String should match pattern",
    ),
    "an adapter the member does not have": (
        _set("adapter", adapter="evil"),
        "adapter.worker: adapter 'evil' is not in this member's install",
    ),
    "an adapter of another folder": (
        _set("adapter", digest="0" * 64),
        "adapter.worker: adapter 'graphile': this member's folder differs from the coordinator's",
    ),
    "a mapping the adapter does not declare": (
        _set("adapter", mapping="anything_goes"),
        "adapter.worker: adapter graphile has no mapping 'anything_goes'",
    ),
    "a field an adapter's spec does not have": (
        _set("adapter", options="-c session_preload_libraries=evil"),
        "adapter.worker: spec.options: not a field of the spec of adapter.worker",
    ),
    "plans file": (
        _set("library", plans_file="/home/bench/.bashrc"),
        "adapter.worker: spec.plans_file: no file path travels: a plan capture runs "
        "on the coordinator's host only",
    ),
    "schema name": (
        _set("library", schema="public -c log_statement=all"),
        "adapter.worker: spec.schema: Value error, 'public -c log_statement=all' is "
        "not a schema the harness works in; use lowercase letters, digits and _",
    ),
    "pg_ schema": (
        _set("sql", schema="pg_catalog"),
        "sql.worker: spec.schema: Value error, 'pg_catalog' is not a schema the harness",
    ),
    "too many programs": (
        lambda honest: [honest["sql"]] * 257,
        "257 programs; a member runs at most 256 (a repetition's most workers)",
    ),
    "more workers in all than a repetition has": (
        lambda honest: [_set("adapter", concurrency=256)(honest)[0]] * 256,
        "256 programs of 65,536 workers in all; a member runs at most 256",
    ),
    "more tenants than a scenario has": (
        _set("adapter", tenants=list(range(100_001))),
        "spec.tenants: 100,001 items; at most 100,000",
    ),
    "absurd concurrency": (
        _set("library", concurrency=1_000_000),
        "adapter.worker: spec.concurrency: Input should be less than or equal to 256",
    ),
    "DSN in a library's spec": (
        _set("library", dsn="postgresql://postgres@evil.example/bench"),
        "adapter.worker: spec.dsn: no DSN travels: a member connects with its own --dsn",
    ),
    "DSN in a worker's spec": (
        _set("sql", site={"dsn": "postgresql://postgres@evil.example/bench", "schema": "x"}),
        "sql.worker: spec.site: no DSN travels: a member connects with its own --dsn",
    ),
    "endless job": (
        _set("sql", durations={"1": {"kind": "constant", "a": 1e12}}),
        "sql.worker: spec.durations.1: Value error, a duration's parameters are between 0",
    ),
    "markup in a process name": (
        lambda honest: [{**honest["sql"], "name": "[/oops]"}],
        "name: String should match pattern",
    ),
}


def open_fleet_tables(
    server: Server, fleet_id: str, programs: list[Any], first_slot: int = 0
) -> None:
    """A fleet's tables and run row as the coordinator makes them, and the assignment of
    member 1 in repetition 1."""
    schema = fleet_schema(fleet_id)
    with connect(server.dsn) as conn:
        conn.execute(sql.SQL("create schema {}").format(sql.Identifier(schema)))
    with connect(server.dsn, schema=schema) as conn:
        statements = fleet_sql()
        for table in ("run_table", "members_table", "assignments_table", "reports_table"):
            conn.execute(statements[table])  # type: ignore[call-overload]
        version = {"version": harness.__version__, "protocol": PROTOCOL}
        conn.execute(statements["open_run"], {"run_id": fleet_id, "expected": 1, **version})  # type: ignore[call-overload]
        assignment = {"repetition": 1, "member": 1, "first_slot": first_slot}
        conn.execute(statements["assign"], {**assignment, "programs": Jsonb(programs)})  # type: ignore[call-overload]


@pytest.fixture
def fleet_id(server: Server) -> Iterator[str]:
    """A fleet's id, and its coordinator's heartbeat while the test runs: a member takes
    a coordinator silent for SILENT_S as gone, and `harness worker` may take that long
    to start on a loaded machine (it did, at load 5: "not taking members")."""
    fleet_id = f"hostile-{os.getpid()}-{next(_IDS)}"
    with _beating(server, fleet_schema(fleet_id)):
        yield fleet_id
    with connect(server.dsn) as conn:
        drop = sql.SQL("drop schema if exists {} cascade")
        conn.execute(drop.format(sql.Identifier(fleet_schema(fleet_id))))


@contextmanager
def _beating(server: Server, schema: str) -> Iterator[None]:
    """The coordinator's heartbeat every BEAT_S, as `harness run --fleet` beats, once the
    test has made the fleet's tables."""
    stop = threading.Event()

    def beat() -> None:
        with connect(server.dsn, schema=schema) as conn:
            while not stop.wait(BEAT_S):
                with contextlib.suppress(psycopg.errors.UndefinedTable):
                    conn.execute(fleet_sql()["coordinator_beat"])  # type: ignore[call-overload]

    beater = threading.Thread(target=beat, name="test-fleet-beat")
    beater.start()
    try:
        yield
    finally:
        stop.set()
        beater.join()


@pytest.mark.parametrize("shape", HOSTILE)
def test_a_hostile_assignment_is_refused_in_one_line_and_the_coordinator_told(
    server: Server, strategies: dict[str, Strategy], fleet_id: str, shape: str
) -> None:
    make, expected = HOSTILE[shape]
    open_fleet_tables(server, fleet_id, make(rows(server, strategies)))
    said: list[str] = []
    with pytest.raises(Refused) as refused:
        serve(server.dsn, fleet_id, said.append)
    line = str(refused.value)
    assert "\n" not in line and line.startswith("fleet assignment refused: ")
    assert expected in line
    assert said == [said[0]] and said[0].startswith(f"joined fleet {fleet_id} as member 1")
    with psycopg.connect(server.dsn) as conn:
        members = sql.SQL("select state, error from {}.fleet_members")
        found = conn.execute(members.format(sql.Identifier(fleet_schema(fleet_id)))).fetchall()
    assert found == [("failed", line)]


def test_a_member_refuses_a_hostile_row_with_exit_2_and_one_line(
    server: Server, strategies: dict[str, Strategy], fleet_id: str
) -> None:
    """`harness worker` as a user runs it: the one line on stderr, exit 2, no traceback."""
    make, expected = HOSTILE["os.system"]
    open_fleet_tables(server, fleet_id, make(rows(server, strategies)))
    done = harness_cli("worker", "--dsn", server.dsn, "--run", fleet_id)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: fleet assignment refused: {expected}"


def test_a_negative_first_slot_is_refused(
    server: Server, strategies: dict[str, Strategy], fleet_id: str
) -> None:
    """The slot a member numbers its reports from is a count from a row too."""
    open_fleet_tables(server, fleet_id, [rows(server, strategies)["sql"]], first_slot=-5)
    with pytest.raises(Refused, match=r"^fleet assignment refused: first_slot: -5 is not a "):
        serve(server.dsn, fleet_id, lambda line: None)


def test_a_member_started_before_its_coordinator_waits_for_the_run_and_joins(
    server: Server, strategies: dict[str, Strategy], fleet_id: str
) -> None:
    """A launcher (compose, a Kubernetes Job) starts the members beside or before the
    coordinator: a member waits for the run to open, then joins it and reads its row
    (here a hostile one, so that it ends by itself: refused, in its one line)."""
    said: list[str] = []
    ended: list[BaseException] = []

    def member() -> None:
        try:
            serve(server.dsn, fleet_id, said.append, join_timeout_s=120)
        except BaseException as error:  # the test's thread: kept for the assert
            ended.append(error)

    thread = threading.Thread(target=member)
    thread.start()
    while not said and thread.is_alive():
        thread.join(0.05)
    make, expected = HOSTILE["os.system"]
    open_fleet_tables(server, fleet_id, make(rows(server, strategies)))
    thread.join(120)
    assert said[0] == f"waiting up to 120 s for fleet run {fleet_id} to open"
    assert said[1].startswith(f"joined fleet {fleet_id} as member 1")
    assert [type(error) for error in ended] == [Refused] and expected in str(ended[0])


def test_a_member_whose_run_never_opens_gives_up_at_its_join_timeout(server: Server) -> None:
    done = harness_cli(
        "worker", "--dsn", server.dsn, "--run", "never-opened", "--join-timeout", "1"
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "error: no fleet run never-opened on this server after 1 s (is the coordinator started?)"
    )
