"""A worker fleet: `harness worker` processes on other hosts join the run that
`harness run --fleet N` coordinates, through tables in a schema of the run's own.

The coordinator opens the fleet (harness/run/fleet.sql) and waits for N members; each
member (harness/run/member.py) registers, checks the run and the harness version, and
is numbered in the order it joined. Per repetition the coordinator deals the workers:
`--local-workers` of them stay in its own crew with the enqueuers, the rest go to the
members as assignments (the queue's own programs, as data, with the first process slot
they take). Each member starts its share in processes of its own and says it is ready;
the coordinator sets `go` and starts its own crew at once (the start barrier), counts
the jobs each member says it has done, and at the end sets `stop` and collects each
member's reports. Every timestamp that matters is the server's clock_timestamp(), so
the hosts need no clock agreement; jobs.csv names the host of each job's worker.

A member that fails, or is not heard from for SILENT_S, fails the run at once, naming
it; members that never arrive fail it after the join timeout; when the run fails, the
members see it and stop. A member of another run, or of another harness version, is
refused.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

import harness
from harness.errors import HarnessError, RunFailed
from harness.queues.base import Program, WorkerReport
from harness.queues.wire import program_to_wire, reports_from_wire
from harness.run.crew import Crew, Workers
from harness.server.connections import connect
from harness.server.dsn import scrub
from harness.server.schema import own_schema
from harness.sqlfiles import builtin_blocks

PROTOCOL = 1  # what a member and a coordinator must agree on, beside the harness version
BEAT_S = 0.2  # how often the coordinator and each member say they live
SILENT_S = 5.0  # a member (or coordinator) not heard from for this long is gone
POLL_S = 0.01
READY_TIMEOUT_S = 120
REPORTS_TIMEOUT_S = 120


_FLEET_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")


def check_fleet_id(fleet_id: str, option: str) -> str:
    """The one rule for a fleet's id (it names the fleet's schema), whoever gives it:
    `--fleet-id`, a member's `--run`; the coordinator's random ids keep it too."""
    if not _FLEET_ID.fullmatch(fleet_id):
        raise HarnessError(
            f"{option}: '{fleet_id}' is not allowed; use lowercase letters, digits and -, "
            "at most 40 characters"
        )
    return fleet_id


def faults_refused(where: str) -> HarnessError:
    """The one refusal of faults with a fleet: they kill and replace processes, and
    reconnect them, on the coordinator's own host."""
    return HarnessError(f"{where}: faults run on local workers only, not with --fleet")


def fleet_sql() -> dict[str, str]:
    return {name: block.sql for name, block in builtin_blocks("harness.run", "fleet.sql").items()}


def fleet_schema(fleet_id: str) -> str:
    """The fleet's own schema, named by the id the members are given."""
    return "harness_fleet_" + fleet_id.lower().replace("-", "_")


@dataclass(frozen=True)
class MemberState:
    member: int
    host: str
    pid: int
    version: str
    state: str
    repetition: int
    done: int
    error: str | None
    silent_s: float

    def describe(self) -> str:
        return f"fleet member {self.member} (host {self.host}, pid {self.pid})"


@dataclass
class Fleet:
    """The coordinator's side, for a whole `harness run`: the fleet's tables, the join,
    the heartbeat, and the view of every member."""

    dsn: str  # the coordinator's way to the server
    fleet_id: str
    expected: int
    local_workers: int = 0  # of each repetition's workers, how many stay here
    join_timeout_s: float = 120.0
    member_dsn: str = "URL"  # what the members are told to connect with, if it is known
    conn: psycopg.Connection[Any] | None = None
    members: list[MemberState] = field(default_factory=list)
    repetitions: int = 0  # repetitions dealt so far: each has its number
    _beat_stop: threading.Event = field(default_factory=threading.Event)

    @property
    def schema(self) -> str:
        return fleet_schema(self.fleet_id)

    def run(self, statement: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        assert self.conn is not None, "the fleet is open"
        cursor = self.conn.execute(fleet_sql()[statement], params or {})  # type: ignore[call-overload]
        return cursor.fetchall() if cursor.description is not None else []

    def wait_for_members(self, say: Any) -> None:
        """Until every expected member has joined; RunFailed after the join timeout."""
        deadline, seen = time.monotonic() + self.join_timeout_s, 0
        while True:
            self.members = self.read_members()
            if len(self.members) > seen:
                for member in self.members[seen:]:
                    say(f"fleet: {member.describe()} joined")
                seen = len(self.members)
            if seen >= self.expected:
                return
            if time.monotonic() > deadline:
                raise RunFailed(
                    f"only {seen} of {self.expected} fleet members joined within "
                    f"{self.join_timeout_s:g} s (start them with: harness worker --dsn "
                    f"{self.member_dsn} --run {self.fleet_id})"
                )
            time.sleep(BEAT_S)

    def read_members(self) -> list[MemberState]:
        return [MemberState(*row) for row in self.run("members")]

    def check_members(self, repetition: int) -> None:
        """RunFailed if a member failed or went silent."""
        for member in self.read_members():
            if member.state == "failed":
                raise RunFailed(f"{member.describe()} failed: {member.error}")
            if member.silent_s > SILENT_S:
                raise RunFailed(
                    f"{member.describe()} stopped answering: last heard from "
                    f"{member.silent_s:.1f} s ago (repetition {repetition})"
                )

    def crew(self, workers: Workers, count: int, enqueuers: list[Program], spares: int) -> Crew:
        """A repetition's crew across the fleet: the Placement of a fleet run."""
        if spares:
            raise faults_refused("faults.crashes")
        self.repetitions += 1
        local = workers(self.local_workers) if self.local_workers else []
        counts = _deal(count - self.local_workers, self.expected)
        shares = [workers(n) for n in counts]
        return FleetCrew(
            local,
            enqueuers,
            0,
            fleet=self,
            repetition=self.repetitions,
            shares=shares,
            counts=counts,
        )

    def beat(self) -> None:
        """The coordinator's heartbeat, on a connection of its own, until the fleet closes."""
        with connect(self.dsn, schema=self.schema) as conn:
            while not self._beat_stop.wait(BEAT_S):
                conn.execute(fleet_sql()["coordinator_beat"])  # type: ignore[call-overload]

    def close(self, state: str, error: str | None) -> None:
        """The run's end, told to the members; an error's text goes into the fleet's table
        (and the server's log) without any password it quotes."""
        self._beat_stop.set()
        with contextlib.suppress(psycopg.Error):
            self.run("set_run", {"state": state, "error": scrub(error) if error else None})


def _deal(workers: int, members: int) -> list[int]:
    """How many of the remote workers each member runs: as evenly as they go."""
    return [workers // members + (index < workers % members) for index in range(members)]


@contextlib.contextmanager
def open_fleet(fleet: Fleet, say: Any) -> Iterator[Fleet]:
    """The fleet's schema and tables; the members joined; on the way out, the run's end
    told to them (done, or failed with why) before the schema goes."""
    with (
        own_schema(fleet.dsn, fleet.schema) as owned,
        connect(fleet.dsn, schema=fleet.schema) as conn,
    ):
        fleet.conn = conn
        for table in ("run_table", "members_table", "assignments_table", "reports_table"):
            fleet.run(table)
        params = {"version": harness.__version__, "protocol": PROTOCOL}
        fleet.run("open_run", {"run_id": fleet.fleet_id, "expected": fleet.expected, **params})
        threading.Thread(target=fleet.beat, name="harness-fleet-beat", daemon=True).start()
        say(
            f"fleet: waiting for {fleet.expected} members; on each host: "
            f"harness worker --dsn {fleet.member_dsn} --run {fleet.fleet_id}"
        )
        try:
            fleet.wait_for_members(say)
            yield fleet
        except BaseException as error:
            fleet.close("failed", str(error) or type(error).__name__)
            _linger(fleet)
            raise
        fleet.close("done", None)
        _linger(fleet)
    if owned.left:
        say(f"warning: {owned.left}")


def _linger(fleet: Fleet) -> None:
    """Long enough for every member to read the end before the schema is dropped."""
    deadline = time.monotonic() + SILENT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.Error):
            if all(m.silent_s > BEAT_S * 3 for m in fleet.read_members()):
                return
        time.sleep(BEAT_S)


@dataclass
class FleetCrew(Crew):
    """One repetition's crew spread over the fleet: the local part (the enqueuers and the
    local workers) is an ordinary crew; each member runs its share of the workers."""

    fleet: Fleet = field(kw_only=True)
    repetition: int = field(kw_only=True)
    shares: list[list[Program]] = field(kw_only=True)
    counts: list[int] = field(kw_only=True)  # the workers each share runs
    first_slots: list[int] = field(init=False, default_factory=list)

    def __enter__(self) -> FleetCrew:
        super().__enter__()
        try:
            self._assign()
            self._wait_members_ready()
        except BaseException:
            super().__exit__(None, None, None)
            raise
        return self

    def _assign(self) -> None:
        first = len(self.workers) + self.spares + len(self.enqueuers)
        for member, share in zip(self.fleet.members, self.shares, strict=True):
            self.first_slots.append(first)
            self.fleet.run(
                "assign",
                {
                    "repetition": self.repetition,
                    "member": member.member,
                    "first_slot": first,
                    "programs": Jsonb([program_to_wire(program) for program in share]),
                },
            )
            first += len(share)

    def _wait_members_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(
            m.state == "ready" and m.repetition == self.repetition
            for m in self.fleet.read_members()
        ):
            self.fleet.check_members(self.repetition)
            if time.monotonic() > deadline:
                raise RunFailed(f"fleet members not ready after {READY_TIMEOUT_S} s")
            time.sleep(POLL_S)

    def go(self) -> None:
        """The members' clock and ours: `go` first, so that theirs starts no later."""
        self.fleet.run("go", {"repetition": self.repetition})
        super().go()

    def done(self) -> int:
        remote = self.fleet.run("done", {"repetition": self.repetition})
        return super().done() + int(remote[0][0])

    def fail_if_one_died(self) -> None:
        super().fail_if_one_died()
        self.fleet.check_members(self.repetition)

    def stop(self) -> list[WorkerReport]:
        self.fleet.run("stop", {"repetition": self.repetition})
        return [*super().stop(), *self._remote_reports()]

    def _remote_reports(self) -> list[WorkerReport]:
        deadline = time.monotonic() + REPORTS_TIMEOUT_S
        while len(rows := self.fleet.run("reports", {"repetition": self.repetition})) < len(
            self.shares
        ):
            self.fleet.check_members(self.repetition)
            if time.monotonic() > deadline:
                raise RunFailed(f"fleet members' reports missing after {REPORTS_TIMEOUT_S} s")
            time.sleep(POLL_S)
        return [report for _, data in rows for report in reports_from_wire(data)]

    def hosts(self) -> dict[int, tuple[str, int]]:
        hosts = super().hosts()
        for member, first, share in zip(
            self.fleet.members, self.first_slots, self.shares, strict=True
        ):
            hosts.update({first + i: (member.host, member.member) for i in range(len(share))})
        return hosts

    def members(self) -> list[dict[str, Any]] | None:
        """Where this repetition's workers ran, for run.json."""
        return [
            {
                "member": m.member,
                "host": m.host,
                "pid": m.pid,
                "first_slot": first,
                "workers": workers,
                "processes": len(share),
            }
            for m, first, share, workers in zip(
                self.fleet.members, self.first_slots, self.shares, self.counts, strict=True
            )
        ]
