"""`harness worker`: a member of a fleet, on any host that reaches the server.

It finds the run by the id the coordinator printed (the fleet's schema on the server),
waiting for it up to its join timeout (a launcher, compose or a Kubernetes Job, starts
members before or beside the coordinator), refuses a run of another harness version or
protocol, a run that is over or full, and joins. Then, repetition by repetition: it
waits for its assignment, accepts it only as the harness's own registered programs with
valid specs (harness/queues/wire.py; SQL from its own install, checked by its SHA-256),
starts them in processes of its own (connecting through its own DSN), says it is ready,
starts at the coordinator's `go`, says how many jobs its crew has done as it goes,
and at the `stop` uploads its processes' reports. A thread says it lives every BEAT_S.
It leaves when the run is done (exit 0), failed (exit 1), or its coordinator is gone;
an assignment it refuses fails the run, naming the member and why (exit 2).
"""

from __future__ import annotations

import contextlib
import os
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

import harness
from harness.errors import HarnessError, RunFailed
from harness.queues import catalog  # noqa: F401  # registers every program a member may run
from harness.queues.base import Program, WorkerReport
from harness.queues.contract.manifest import load_adapters
from harness.queues.programs import Local, Refused
from harness.queues.sql.strategies import load_strategies
from harness.queues.wire import assignment_from_wire, reports_to_wire
from harness.run.crew import Crew
from harness.run.fleet import BEAT_S, PROTOCOL, SILENT_S, fleet_schema, fleet_sql
from harness.server.connections import connect
from harness.server.dsn import scrub

POLL_S = 0.005  # while waiting for `go`: the start barrier's lag on this side
WAIT_S = 0.05  # while waiting for an assignment or the stop
OPEN_POLL_S = 0.2  # while waiting for the coordinator to open the run
Say = Callable[[str], None]


@dataclass(frozen=True)
class RunState:
    run_id: str
    version: str
    protocol: int
    expected: int
    state: str
    error: str | None
    go: int
    stop: int
    coordinator_silent_s: float


@dataclass
class Member:
    conn: psycopg.Connection[Any]
    local: Local  # its own DSN and strategies: what its programs are rebuilt with
    fleet_id: str
    number: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self, statement: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        cursor = self.conn.execute(fleet_sql()[statement], params or {})  # type: ignore[call-overload]
        return cursor.fetchall() if cursor.description is not None else []

    def state(self, state: str, repetition: int, done: int = 0, error: str | None = None) -> None:
        params = {"member": self.number, "repetition": repetition, "done": done, "error": error}
        self.run("member_state", {**params, "state": state})

    def run_state(self) -> RunState:
        rows = self.run("run_state")
        return RunState(*rows[0])

    def alive(self) -> None:
        """The heartbeat thread: every BEAT_S until the member leaves."""
        with connect(self.local.dsn, schema=fleet_schema(self.fleet_id)) as conn:
            while not self._stop.wait(BEAT_S):
                conn.execute(fleet_sql()["member_alive"], {"member": self.number})  # type: ignore[call-overload]

    def leave(self) -> None:
        self._stop.set()


def serve(
    dsn: str,
    fleet_id: str,
    say: Say,
    strategies_dir: Path | None = None,
    adapters_dir: Path | None = None,
    join_timeout_s: float = 0.0,
) -> None:
    """Join the fleet (waiting up to `join_timeout_s` for the coordinator to open it) and
    work its repetitions until the run ends."""
    local = Local(dsn, load_strategies(strategies_dir), load_adapters(adapters_dir))
    try:
        conn = connect(dsn, schema=fleet_schema(fleet_id))
    except psycopg.OperationalError as error:
        raise HarnessError(f"cannot reach the server: {_first_line(error)}") from error
    with conn:
        member = Member(conn, local, fleet_id)
        _wait_for_run(member, join_timeout_s, say)
        member.number = _join(member)
        here = f"{platform.node()}, pid {os.getpid()}"
        say(f"joined fleet {fleet_id} as member {member.number} ({here})")
        threading.Thread(target=member.alive, name="harness-member-beat", daemon=True).start()
        try:
            _repetitions(member, say)
        except Refused as error:
            _failed(member, error)
            raise
        except (RunFailed, psycopg.Error) as error:
            _failed(member, error)
            raise RunFailed(
                str(error) if isinstance(error, RunFailed) else _first_line(error)
            ) from error
        finally:
            member.leave()


class _NoRun(Exception):
    """The run is not (yet) on the server: its coordinator has not opened it."""


def _wait_for_run(member: Member, timeout_s: float, say: Say) -> None:
    """The run checked once its coordinator has opened it: a member a launcher started
    first waits for it (the fleet's schema, its tables and its row come one after the
    other); any other refusal is at once."""
    deadline, said = time.monotonic() + timeout_s, False
    while True:
        try:
            _check_run(member, member.fleet_id)
            return
        except _NoRun:
            if time.monotonic() >= deadline:
                waited = f" after {timeout_s:g} s" if timeout_s > 0 else ""
                raise HarnessError(
                    f"no fleet run {member.fleet_id} on this server{waited} "
                    "(is the coordinator started?)"
                ) from None
            if not said:
                say(f"waiting up to {timeout_s:g} s for fleet run {member.fleet_id} to open")
                said = True
        time.sleep(OPEN_POLL_S)


def _check_run(member: Member, fleet_id: str) -> None:
    try:
        rows = member.run("run_state")
    except psycopg.errors.UndefinedTable as error:
        raise _NoRun(fleet_id) from error
    run = RunState(*rows[0]) if rows else None
    if run is None or run.run_id != fleet_id:
        raise _NoRun(fleet_id)
    if (run.version, run.protocol) != (harness.__version__, PROTOCOL):
        raise HarnessError(
            f"fleet run {fleet_id} is coordinated by harness {run.version} (fleet protocol "
            f"{run.protocol}); this is harness {harness.__version__} (protocol {PROTOCOL}): "
            "run the same version on every host"
        )
    if run.state not in ("waiting", "running") or run.coordinator_silent_s > SILENT_S:
        raise HarnessError(f"fleet run {fleet_id} is not taking members (it is {run.state})")


def _join(member: Member) -> int:
    """A place in the fleet, taken under the run row's lock; refused when it is full."""
    with member.conn.transaction():
        expected = int(member.run("lock_run")[0][0])
        if int(member.run("member_count")[0][0]) >= expected:
            raise HarnessError(f"fleet run {member.fleet_id} has its {expected} members already")
        params = {"host": platform.node(), "pid": os.getpid(), "version": harness.__version__}
        return int(member.run("join", params)[0][0])


def _repetitions(member: Member, say: Say) -> None:
    repetition = 1
    while (assignment := _next_assignment(member, repetition)) is not None:
        first_slot, programs = assignment
        reports = _work(member, repetition, programs)
        shifted = [replace(report, worker=report.worker + first_slot) for report in reports]
        upload = {"repetition": repetition, "member": member.number}
        member.run("upload", {**upload, "reports": Jsonb(reports_to_wire(shifted))})
        member.state("reported", repetition, sum(len(r.claims) for r in shifted))
        say(f"repetition {repetition}: {sum(len(r.claims) for r in shifted)} jobs claimed")
        repetition += 1
    say("the run is done")


def _next_assignment(member: Member, repetition: int) -> tuple[int, list[Program]] | None:
    """This member's share of the repetition, or None once the run is done."""
    while True:
        rows = member.run("assignment", {"repetition": repetition, "member": member.number})
        if rows:
            return assignment_from_wire(rows[0][0], rows[0][1], member.local)
        _still_on(member.run_state(), ended_ok=True)
        if member.run_state().state == "done":
            return None
        time.sleep(WAIT_S)


def _work(member: Member, repetition: int, programs: list[Program]) -> list[WorkerReport]:
    with Crew(programs) as crew:
        member.state("ready", repetition)
        while member.run_state().go < repetition:
            _still_on(member.run_state())
            time.sleep(POLL_S)
        crew.go()
        while (run := member.run_state()).stop < repetition:
            _still_on(run)
            crew.fail_if_one_died()
            member.state("working", repetition, crew.done())
            time.sleep(WAIT_S)
        return crew.stop()


def _still_on(run: RunState, ended_ok: bool = False) -> None:
    """RunFailed if the run failed or its coordinator went silent."""
    if run.state == "failed":
        raise RunFailed(f"the coordinator failed the run: {run.error}")
    if run.coordinator_silent_s > SILENT_S:
        raise RunFailed(f"the coordinator stopped answering {run.coordinator_silent_s:.1f} s ago")
    if run.state == "done" and not ended_ok:
        raise RunFailed("the run ended while this member was working")


def _failed(member: Member, error: BaseException) -> None:
    """Say why, if the server still listens: the coordinator names it."""
    with contextlib.suppress(psycopg.Error):
        member.state("failed", 0, 0, _first_line(error))


def _first_line(error: BaseException) -> str:
    """What is said of an error, on the console and in the fleet's tables: its first line,
    without any password it quotes."""
    text = scrub(str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__
