"""pg-boss and graphile-worker through their own code, in a Node process each program
starts (node/runner.mjs), talking to it in JSON lines.

The runner's packages are pinned in node/package.json and node/package-lock.json,
Node 22 among them (the npm package `node`: pg-boss 12 and graphile-worker 0.18 need
22.18 or newer, and npm on an older Node would quietly install older majors with other
APIs). On first use they are installed with `npm ci` into a cache directory named after
the files' hash; only `npm` (any Node) is needed for that, and without it these
strategies alone refuse to run, in one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cache, partial
from importlib import resources
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import psycopg
from pydantic import ConfigDict, Field

from harness.errors import HarnessError
from harness.queues.base import ProgramMain, QueueEntry, Signals, Site, TaskRun, WorkerReport
from harness.queues.libraries import captures, common
from harness.queues.libraries.library import LibraryQueue
from harness.queues.process import run_program
from harness.queues.programs import Concurrency, TenantCap
from harness.results.document import LIBRARY, TUNED, UNLIKE_THE_SCENARIO
from harness.scenario.inputs import RunInputs
from harness.scenario.workload import BacklogRows
from harness.server.dsn import password_for
from harness.server.processes import signal_on_parent_death

RUNNER_FILES = (
    "package.json",
    "package-lock.json",
    "runner.mjs",
    "common.mjs",
    "pgboss.mjs",
    "graphile.mjs",
)
PGBOSS_MIN_POLL_S = 0.5  # pg-boss refuses a pollingIntervalSeconds below it
READY_TIMEOUT_S = 60
BACKLOG_CHUNK = 10_000
FETCH_MARKERS = {"pgboss": "j.state < 'active'", "graphile": "jobs.is_available = true"}


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tenant-queue-bench"


def _sources() -> dict[str, bytes]:
    folder = resources.files("harness.queues.libraries").joinpath("node")
    return {name: folder.joinpath(name).read_bytes() for name in RUNNER_FILES}


@cache
def runner_dir() -> Path:
    """The runner with its packages installed (`npm ci`, once per version of its files)."""
    sources = _sources()
    digest = hashlib.sha256(b"".join(sources[name] for name in RUNNER_FILES)).hexdigest()[:16]
    target = cache_root() / f"node-runner-{digest}"
    if (target / ".installed").exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise HarnessError(
            "pg-boss and graphile-worker run in Node: `npm` is needed to install their "
            "runner (Debian: apt-get install npm); the other strategies run without it"
        )
    _install_runner(npm, sources, target)
    return target


def _install_runner(npm: str, sources: dict[str, bytes], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="node-runner-", dir=target.parent))
    for name, data in sources.items():
        (staging / name).write_bytes(data)
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=staging,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"npm ci of the Node runner failed in {staging}: {last}")
    (staging / ".installed").touch()
    with contextlib.suppress(OSError):  # another process may have installed it meanwhile
        staging.rename(target)
    shutil.rmtree(staging, ignore_errors=True)


def node_binary(folder: Path) -> Path:
    return folder / "node_modules" / ".bin" / "node"


def connection_config(dsn: str) -> dict[str, Any]:
    """The DSN as node-postgres takes it (it reads URLs, not libpq's key=value form), with
    the password libpq would send (node-postgres reads no `passfile=`)."""
    names = {"host": "host", "port": "port", "user": "user"}
    config = common.dsn_keywords(
        dsn, {**names, "dbname": "database", "options": "options", "sslmode": "sslmode"}
    )
    password = password_for(dsn)
    if password is not None:
        config["password"] = password
    # libpq's sslmode as node-postgres's ssl: `require` encrypts without checking the
    # certificate, the verify modes check it; without it, node-postgres never asks for TLS
    # (a managed server that insists on it refuses the connection).
    sslmode = config.pop("sslmode", None)
    if sslmode == "require":
        config["ssl"] = {"rejectUnauthorized": False}
    elif sslmode in ("verify-ca", "verify-full"):
        config["ssl"] = {"rejectUnauthorized": True}
    return config


Library = Literal["pgboss", "graphile"]
Mapping = Literal["one_queue", "group_concurrency", "queue_per_tenant"]
MAPPINGS: dict[str, tuple[Library, Mapping]] = {  # strategy name -> library, mapping
    "pgboss": ("pgboss", "one_queue"),
    "pgboss_group_concurrency": ("pgboss", "group_concurrency"),
    "graphile_worker": ("graphile", "one_queue"),
    "graphile_worker_queue_per_tenant": ("graphile", "queue_per_tenant"),
}
# The libraries' settings for throughput, as their docs and benchmark programs set them
# (docs/real-queues.md): pg-boss fetches batches and keeps fetching while they come back
# full; graphile-worker locks a local queue of jobs up front and completes them in
# batches, 24 concurrent jobs a process (its perfTest), as many processes as that takes.
TUNED_MAPPINGS: dict[str, tuple[Library, Mapping]] = {
    "pgboss_tuned": ("pgboss", "one_queue"),
    "graphile_worker_tuned": ("graphile", "one_queue"),
}
PGBOSS_TUNED_BATCH = 10  # batchSize, with burstWhenBatchFull
GRAPHILE_TUNED_LOCAL_QUEUE = 500  # localQueue.size, its perfTest's
GRAPHILE_TUNED_COMPLETE_DELAY_MS = 0  # completeJobBatchDelay, its perfTest's
GRAPHILE_JOBS_PER_PROCESS = 24  # perfTest's concurrentJobs per process


@dataclass(frozen=True)
class NodeSpec:
    """What the Node runner's programs are handed; the annotations are what a fleet member
    validates (the library is one of the runner's own: it chooses the module it imports)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # a field it does not have is refused

    library: Library
    mapping: Mapping
    site: Site  # where it connects: on a fleet member, the member's own way to the server
    poll_interval_ms: Annotated[float, Field(gt=0, le=10_000)]
    cap: TenantCap = 1
    concurrency: Concurrency = 1
    schedule: common.Schedule | None = None
    plans_file: str | None = None  # a plan capture: auto_explain's notices go there
    # A `_tuned` mapping's settings (TUNED_MAPPINGS); -1: the library's default (off).
    batch_size: Annotated[int, Field(ge=1, le=1000)] = 1  # pg-boss's batchSize
    local_queue_size: Annotated[int, Field(ge=-1, le=100_000)] = -1  # graphile-worker's
    complete_batch_delay_ms: Annotated[int, Field(ge=-1, le=60_000)] = -1  # graphile-worker's

    def config(self, role: str) -> dict[str, Any]:
        return {
            "library": self.library,
            "role": role,
            "mapping": self.mapping,
            "connection": connection_config(self.site.dsn),
            "schema": self.site.schema,
            "concurrency": self.concurrency,
            "pollIntervalMs": self.poll_interval_ms,
            "cap": self.cap,
            "notices": self.plans_file is not None,
            "explainOptions": captures.explain_options() if self.plans_file else None,
            "batchSize": self.batch_size,
            "localQueueSize": self.local_queue_size,
            "completeJobBatchDelay": self.complete_batch_delay_ms,
        }

    @property
    def tuned(self) -> bool:
        return self.batch_size > 1 or self.local_queue_size > 0


def _set_death_signal() -> None:
    signal_on_parent_death("SIGKILL")  # the runner dies with its parent (Linux)


class Runner:
    """One Node process of the runner: its config, then commands in; events out; its
    stderr kept aside.

    The config, password included, is the first line on the runner's stdin, never an
    argument: every local user reads a process's command line (/proc/<pid>/cmdline).
    """

    def __init__(self, spec: NodeSpec, role: str) -> None:
        folder = runner_dir()
        config = spec.config(role)  # before the process: a bad DSN starts nothing
        self.plans_file = spec.plans_file
        # Kept open for the process's life, read when it fails: no `with` fits that.
        self.stderr: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(node_binary(folder)), str(folder / "runner.mjs")],
            cwd=folder,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            preexec_fn=_set_death_signal,
        )
        self.send(config)

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def next_event(self) -> dict[str, Any]:
        """The next event; a plan (a capture's, whenever it comes) goes to the plans file."""
        while True:
            event = self._read()
            if event.get("event") != "plan":
                return event
            if self.plans_file is not None:
                captures.append_notice(self.plans_file, event["message"])

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the Node runner exited: {self.stderr_tail()}")
        event: dict[str, Any] = json.loads(line)
        if event.get("event") == "error":
            raise RuntimeError(f"the Node runner failed: {event.get('message')}")
        return event

    def expect(self, name: str) -> dict[str, Any]:
        event = self.next_event()
        if event.get("event") != name:
            raise RuntimeError(f"the Node runner said {event} where {name} was expected")
        return event

    def stderr_tail(self) -> str:
        self.process.wait(timeout=10)
        self.stderr.seek(0)
        lines = self.stderr.read().strip().splitlines()
        return lines[-1] if lines else f"exit code {self.process.returncode}"

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.process.stdin.close()  # type: ignore[union-attr]
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.stderr.close()


def run_role(spec: NodeSpec, role: str) -> dict[str, Any]:
    """A one-shot role (install, versions): its one event."""
    runner = Runner(spec, role)
    try:
        event = runner.next_event()
    finally:
        runner.close()
    if runner.process.returncode != 0:
        raise RuntimeError(f"the Node runner's {role} exited with {runner.process.returncode}")
    return event


def worker_main(index: int, spec: NodeSpec, signals: Signals) -> None:
    run_program(index, signals, lambda report: _work(index, spec, signals, report))


def _work(index: int, spec: NodeSpec, signals: Signals, report: WorkerReport) -> None:
    runner = Runner(spec, "worker")
    try:
        runner.expect("ready")
        signals.ready[index] = 1
        signals.start.wait()
        runner.send({"cmd": "start"})
        reader = _Reader(runner, index, signals, report)
        reader.start()
        while not signals.stop.wait(0.05) and reader.is_alive():
            pass  # a runner that fails stops the reader: its error is this program's
        if reader.error is not None:
            raise reader.error
        runner.send({"cmd": "stop"})
        reader.join(timeout=60)
        if reader.error is not None:
            raise reader.error
    finally:
        runner.close()


class _Reader(threading.Thread):
    """The worker's events while it runs: each job done goes into the task log."""

    def __init__(self, runner: Runner, index: int, signals: Signals, report: WorkerReport):
        super().__init__(daemon=True)
        self.runner, self.index, self.signals, self.report = runner, index, signals, report
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            while (event := self.runner.next_event())["event"] != "stopped":
                if event["event"] == "job":
                    common.record_run(self.report, self.signals, self.index, _task_run(event))

        except Exception as error:
            self.error = error


def _task_run(event: dict[str, Any]) -> TaskRun:
    return TaskRun(
        job=int(event["job"]),
        tenant=int(event["tenant"]),
        library_id=str(event["id"]),
        enqueued_at=_moment(event.get("created_at")),
        started_at=_moment(event.get("locked_at")),
        finished_at=_moment(event.get("finished_at")),
    )


def _moment(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def enqueuer_main(index: int, spec: NodeSpec, signals: Signals) -> None:
    run_program(index, signals, lambda report: _enqueue(index, spec, signals))


def _enqueue(index: int, spec: NodeSpec, signals: Signals) -> None:
    runner = Runner(spec, "enqueuer")
    try:
        runner.expect("ready")
        signals.ready[index] = 1
        signals.start.wait()
        began = time.monotonic()
        for at_s, jobs in spec.schedule or []:
            delay = at_s - (time.monotonic() - began)
            if delay > 0:
                time.sleep(delay)
            if signals.stop.is_set():
                break
            enqueue(runner, jobs)
        signals.stop.wait()
        runner.send({"cmd": "stop"})
        runner.expect("stopped")
    finally:
        runner.close()


def enqueue(runner: Runner, jobs: list[common.Job]) -> None:
    runner.send({"cmd": "enqueue", "jobs": jobs})
    runner.expect("enqueued")


class NodeQueue(LibraryQueue):
    def __init__(
        self,
        name: str,
        library: Library,
        mapping: Mapping,
        site: Site,
        inputs: RunInputs,
        tuned: bool = False,
    ) -> None:
        self.label, self.ledger_block = library, f"{library}_ledger"
        self.fetch_marker = FETCH_MARKERS[library]  # its fetch among a capture's statements
        runner_dir()  # installed before any process starts; refused here without npm
        spec = NodeSpec(
            library=library,
            mapping=mapping,
            site=site,
            poll_interval_ms=self.poll_interval_ms(library, inputs.scenario.poll_interval_ms),
            cap=inputs.scenario.tenant_cap or 1,
        )
        super().__init__(name, site, inputs, tuned_spec(spec) if tuned else spec)

    def mains(self) -> tuple[ProgramMain, ProgramMain]:
        return worker_main, enqueuer_main

    def processes(self, count: int) -> int:
        if self.spec.library == "graphile" and self.spec.tuned:
            return -(-count // GRAPHILE_JOBS_PER_PROCESS)
        return 1

    @staticmethod
    def poll_interval_ms(library: str, requested_ms: float) -> float:
        if library == "pgboss":
            return max(requested_ms, PGBOSS_MIN_POLL_S * 1000)
        return requested_ms

    def install(self, conn: psycopg.Connection[Any]) -> None:
        run_role(self.spec, "install")
        if self.spec.library == "graphile":
            conn.execute(common.sql("graphile_done_log"))  # type: ignore[arg-type]

    def load_backlog(self, conn: psycopg.Connection[Any], rows: BacklogRows) -> None:
        runner = Runner(self.spec, "enqueuer")
        try:
            runner.expect("ready")
            jobs = common.backlog_jobs(self.inputs, rows)
            for start in range(0, len(jobs), BACKLOG_CHUNK):
                enqueue(runner, jobs[start : start + BACKLOG_CHUNK])
            runner.send({"cmd": "stop"})
            runner.expect("stopped")
        finally:
            runner.close()
        common.analyze(conn)

    def provenance(self) -> dict[str, Any]:
        versions = run_role(self.spec, "versions")
        versions.pop("event", None)
        provenance = {
            LIBRARY: self.spec.library,
            "versions": versions,
            "mapping": self.spec.mapping,
            "settings": _settings(self.spec, self.inputs.scenario.poll_interval_ms),
            UNLIKE_THE_SCENARIO: departures_from_scenario(self.spec, self.inputs),
        }
        if self.spec.tuned:
            provenance[TUNED] = _tuned_named(self.spec)
        return provenance


def tuned_spec(spec: NodeSpec) -> NodeSpec:
    """A mapping's spec with its library's settings for throughput."""
    if spec.library == "pgboss":
        return replace(spec, batch_size=PGBOSS_TUNED_BATCH)
    return replace(
        spec,
        local_queue_size=GRAPHILE_TUNED_LOCAL_QUEUE,
        complete_batch_delay_ms=GRAPHILE_TUNED_COMPLETE_DELAY_MS,
    )


def departures_from_scenario(spec: NodeSpec, inputs: RunInputs) -> list[str]:
    """Where this queue could not be set up as the scenario asks: said beside its figures."""
    requested_ms = inputs.scenario.poll_interval_ms
    if spec.poll_interval_ms > requested_ms:
        return [
            f"polls every {spec.poll_interval_ms / 1000:g} s, not every {requested_ms:g} ms "
            f"as the scenario asks (pg-boss refuses less than {PGBOSS_MIN_POLL_S:g} s)"
        ]
    return []


def _tuned_named(spec: NodeSpec) -> dict[str, Any]:
    if spec.library == "pgboss":
        return {"batchSize": spec.batch_size, "burstWhenBatchFull": True}
    return {
        "localQueue.size": spec.local_queue_size,
        "completeJobBatchDelay": spec.complete_batch_delay_ms,
        "processes": f"workers / {GRAPHILE_JOBS_PER_PROCESS}, rounded up",
    }


def _settings(spec: NodeSpec, requested_ms: float) -> dict[str, Any]:
    if spec.library == "pgboss":
        return {
            "localConcurrency": "the scenario's workers",
            "batchSize": spec.batch_size,
            "burstWhenBatchFull": spec.batch_size > 1,
            "handler": "a batch's jobs one after another",
            "pollingIntervalSeconds": spec.poll_interval_ms / 1000,
            "pollingIntervalSeconds_requested": requested_ms / 1000,
            "notifyPollingIntervalSeconds": spec.poll_interval_ms / 1000,
            "useListenNotify": True,
            "queue notify": True,
            "burstWhenReadyExceeds": 1,
            "queueCacheIntervalSeconds": 1,
            "groupConcurrency": spec.cap if spec.mapping == "group_concurrency" else None,
        }
    return {
        "concurrency": "the scenario's workers, shared by the processes",
        "processes": _settings_processes(spec),
        "pollInterval_ms": spec.poll_interval_ms,
        "listen": 'LISTEN "jobs:insert" (always)',
        "preparedStatements": True,
        "localQueue.size": spec.local_queue_size,
        "completeJobBatchDelay": spec.complete_batch_delay_ms,
        "queueName": "tenant-<id>" if spec.mapping == "queue_per_tenant" else None,
        "finished_at": "its deletion of the job, logged by a trigger of the harness's",
    }


def _settings_processes(spec: NodeSpec) -> str | int:
    return f"workers / {GRAPHILE_JOBS_PER_PROCESS}, rounded up" if spec.tuned else 1


common.register_programs("node", NodeSpec, worker_main, enqueuer_main)


def entries() -> list[QueueEntry]:
    return [
        QueueEntry(
            name,
            common.LIBRARY_TRAITS,
            partial(NodeQueue, name, library, mapping, tuned=name in TUNED_MAPPINGS),
        )
        for name, (library, mapping) in {**MAPPINGS, **TUNED_MAPPINGS}.items()
    ]
