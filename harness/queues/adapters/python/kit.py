"""The adapter contract, protocol 2, for an adapter written in Python (docs/adapters.md).

An adapter program is a module with a function per role, served by `serve(module)`:

    def versions(config) -> Said              its versions and the settings it uses
    def install(config) -> str | None         its objects; a reason where it cannot run
    def ledger(config) -> Iterable[Record]    the jobs its library's tables hold
    def enqueuer(config) -> async context manager yielding `async enqueue(jobs)`
    async def worker(config, work: Work)      its library's worker, from `work.ready()`
                                              to `await work.stopped()`
    def event_loop(config) -> factory | None  optional: the worker's event loop (uvloop's)

`serve` reads the config (the first line on stdin), runs the role, reads the commands
that follow on a thread of its own, and writes the events: one JSON object a line on the
real stdout, which nothing else may write to, so the process's own stdout (print, a
library's logs) is sent to stderr before the adapter runs. A failure is an `error`
event, then exit 1.

Each job's payload is `{"n": number, "t": tenant, "ms": duration}` in the library's own
job, and a run of its task reports it with `work.job(n, t, library_id)`.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import IO, Any, Protocol

import psycopg

from harness.sqlfiles import SqlBlock, parse_blocks

Config = dict[str, Any]
Job = tuple[int, int, float]  # the harness's number, the tenant, the duration in ms
Enqueue = Callable[[list[Job]], Awaitable[None]]
POLL_S = 0.01  # how often a wait on the harness's commands looks again
MAX_MESSAGE = 3900


class Out:
    """The events, one JSON object a line, from any thread."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream, self.lock = stream, threading.Lock()

    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, default=_moment) + "\n"
        with self.lock:
            self.stream.write(line)
            self.stream.flush()

    def plan(self, message: str) -> None:
        """An auto_explain notice (`explain_options` set), as its connection received it."""
        if message.startswith("duration:"):
            self.emit({"event": "plan", "message": message})


def _moment(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


@dataclass(frozen=True)
class Record:
    """One job as its library's tables hold it (the ledger role): its number and tenant
    where its payload is still there, its moments where the tables keep them."""

    id: str
    state: str  # done, waiting, running, failed
    enqueued_at: datetime
    job: int | None = None
    tenant: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def event(self) -> dict[str, Any]:
        found = {key: value for key, value in self.__dict__.items() if value is not None}
        return {"event": "record", **found}


@dataclass(frozen=True)
class Said:
    """The versions role: what shapes its figures, and where it does otherwise than the
    scenario asks; `fetch`, how its fetch is told for this config where that is not as
    its manifest says ({"marker": ..., "locks": ..., "rows": ...})."""

    versions: dict[str, str]
    settings: dict[str, Any]
    unlike_the_scenario: list[str] = field(default_factory=list)
    fetch: dict[str, Any] | None = None


class LibraryStopped(Exception):
    """The library's worker ended before the harness's stop (Work.stopped)."""


class Work:
    """A worker's side of the harness's commands: ready, start, stop; its jobs reported;
    in a plan capture (`hold`), each job held until the stop and the fetches in turn."""

    def __init__(self, out: Out, config: Config) -> None:
        self.out, self.config = out, config
        self.start, self.stop = threading.Event(), threading.Event()
        self._held, self._lock = 0, threading.Lock()

    @property
    def hold(self) -> bool:
        return bool(self.config.get("hold"))

    def ready(self) -> None:
        """Connected and set up: the harness may start the clock."""
        self.out.emit({"event": "ready"})

    async def started(self) -> None:
        """Until `start` (or a stop that comes first)."""
        await until(lambda: self.start.is_set() or self.stop.is_set())

    async def stopped(self, running: Sequence[asyncio.Task[Any]] = ()) -> None:
        """Until `stop` (or a closed stdin); or, `running` being the library's own worker
        tasks, until one of them ends first, which raises LibraryStopped: a library whose
        worker stops on its own (procrastinate's, when a side task of its fails) ends its
        process under its own command line, and so does the adapter's. Its supervisor then
        starts it again under faults that cut sessions (any other exit fails the run),
        rather than a live process that does nothing being measured as the library."""
        await until(lambda: self.stop.is_set() or any(task.done() for task in running))
        if self.stop.is_set():
            return
        ended = next(task for task in running if task.done())
        error = None if ended.cancelled() else ended.exception()
        why = f"{type(error).__name__}: {error}" if error is not None else "it returned"
        raise LibraryStopped(f"the library's worker stopped on its own before the stop ({why})")

    def begin(self, n: int, t: int, library_id: str) -> None:
        """A run of its task begins, before its work: a worker killed before the run's
        `job` held the job (what a worker kill interrupted)."""
        self.out.emit({"event": "started", "job": int(n), "tenant": int(t), "id": str(library_id)})

    def job(self, n: int, t: int, library_id: str, **more: Any) -> None:
        """One run of its task, done: `claim_ms` (its fetch, timed), `enqueued_at`,
        `started_at`, `finished_at` (the server's clock) where it has them."""
        given = {key: value for key, value in more.items() if value is not None}
        event = {"event": "job", "job": int(n), "tenant": int(t), "id": str(library_id)}
        self.out.emit({**event, **given})

    def requeued(self, n: int, t: int, library_id: str) -> None:
        """A run of its task that put its job back without doing its work."""
        self.out.emit({"event": "requeued", "job": n, "tenant": t, "id": str(library_id)})

    async def hold_job(self) -> None:
        """A plan capture's job: it keeps its slot until the stop."""
        with self._lock:
            self._held += 1
        await self.stopped()

    def hold_job_here(self) -> None:
        """hold_job, on a thread of its own (a library without an event loop)."""
        with self._lock:
            self._held += 1
        self.stop.wait()

    async def turn(self, slot: int) -> None:
        """In a plan capture, slot `slot` (from 0) fetches once the slots before it hold
        their jobs: fetch k then runs with the k - 1 jobs before it running."""
        await until(lambda: self._held >= slot or self.stop.is_set())

    def turn_here(self, slot: int) -> None:
        while self._held < slot and not self.stop.is_set():
            time.sleep(POLL_S)


async def until(condition: Callable[[], bool]) -> None:
    """A condition set by another thread, awaited without blocking the loop's others."""
    while not condition():
        await asyncio.sleep(POLL_S)


class Adapter(Protocol):
    """What `serve` calls of an adapter module (docs/adapters.md)."""

    def versions(self, config: Config) -> Said: ...

    def install(self, config: Config) -> str | None: ...

    def ledger(self, config: Config) -> Iterable[Record]: ...

    def enqueuer(self, config: Config) -> AbstractAsyncContextManager[Enqueue]: ...

    async def worker(self, config: Config, work: Work) -> None: ...


# -- serving the contract --------------------------------------------------------------


def serve(module: ModuleType) -> None:
    """Run the role the config on stdin asks of `module`, then exit (1 after an error)."""
    out = Out(_own_stdout())
    code = 0
    try:
        config = _config(sys.stdin.readline())
        _ROLES[config["role"]](module, config, out)
    except BaseException as error:  # the harness reads one line of why, never a hang
        traceback.print_exc(file=sys.stderr)
        message = f"{type(error).__name__}: {error}"
        out.emit({"event": "error", "message": message[:MAX_MESSAGE]})
        code = 1
    sys.stderr.flush()
    os._exit(code)  # no library thread keeps the process alive


def _own_stdout() -> IO[str]:
    """The real stdout for the events alone; fd 1 and sys.stdout become stderr."""
    events = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return events


def _config(line: str) -> Config:
    if not line:
        raise RuntimeError("no config on stdin")
    config: Config = json.loads(line)
    if config.get("protocol") not in (1, 2):
        raise RuntimeError("the first line on stdin is no config of protocol 1 or 2")
    return config


def _versions(module: Any, config: Config, out: Out) -> None:
    said: Said = module.versions(config)
    python = sys.version.split()[0]
    event = {
        "event": "versions",
        "versions": {"python": python, "psycopg": psycopg.__version__, **said.versions},
        "settings": said.settings,
        "unlike_the_scenario": said.unlike_the_scenario,
    }
    out.emit({**event, **({"fetch": said.fetch} if said.fetch else {})})


def _install(module: Any, config: Config, out: Out) -> None:
    reason = module.install(config)
    out.emit({"event": "installed"} if reason is None else {"event": "refused", "reason": reason})


def _ledger(module: Any, config: Config, out: Out) -> None:
    count = 0
    for record in module.ledger(config):
        out.emit(record.event())
        count += 1
    out.emit({"event": "recorded", "count": count})


def _enqueuer(module: Any, config: Config, out: Out) -> None:
    commands = Commands()
    commands.start()

    async def enqueuer() -> None:
        async with module.enqueuer(config) as enqueue:
            out.emit({"event": "ready"})
            while (command := await commands.next())["cmd"] != "stop":
                if command["cmd"] == "enqueue":
                    await enqueue([(int(n), int(t), float(ms)) for n, t, ms in command["jobs"]])
                    out.emit({"event": "enqueued", "count": len(command["jobs"])})

    asyncio.run(enqueuer())
    out.emit({"event": "stopped"})


def _worker(module: Any, config: Config, out: Out) -> None:
    work = Work(out, config)
    Commands(work).start()
    done = threading.Event()
    with asyncio.Runner(loop_factory=_loop_factory(module, config)) as runner:
        watch = threading.Thread(target=_say_where_stuck, args=(runner, work, done), daemon=True)
        watch.start()
        try:
            runner.run(module.worker(config, work))
        finally:
            done.set()
    out.emit({"event": "stopped"})


STUCK_S = 20.0  # after `stop`: within the harness's bound (30 s) for the `stopped` event


def _say_where_stuck(runner: asyncio.Runner, work: Work, done: threading.Event) -> None:
    """A worker still running STUCK_S after `stop` writes one line on stderr: each task of
    its event loop still pending, at the line it waits on. The harness's failure (`did
    not stop within 30 s`) quotes the last line its adapter wrote there."""
    work.stop.wait()
    if done.wait(STUCK_S):
        return
    try:
        tasks = list(asyncio.all_tasks(runner.get_loop()))
    except RuntimeError:  # the loop's tasks changed while read, from this other thread
        tasks = []
    where = "; ".join(sorted({_waits_at(task) for task in tasks})) or "no task pending"
    sys.stderr.write(f"kit: still running {STUCK_S:g} s after stop: {where}\n"[:2000])
    sys.stderr.flush()


_ASYNCIO = Path(asyncio.__file__).parent


def _waits_at(task: asyncio.Task[Any]) -> str:
    """The innermost coroutine a task awaits outside asyncio's own (a library's, or the
    adapter's), as `function (file:line)`."""
    coroutine: Any = task.get_coro()
    frame = None
    while coroutine is not None and getattr(coroutine, "cr_frame", None) is not None:
        if Path(coroutine.cr_frame.f_code.co_filename).parent != _ASYNCIO:
            frame = coroutine.cr_frame
        coroutine = getattr(coroutine, "cr_await", None)
    if frame is None:
        return task.get_name()
    return f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})"


def _loop_factory(module: Any, config: Config) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The worker's event loop where its module chooses one (`event_loop(config)`, e.g.
    uvloop's, as a library's own runner uses it); asyncio's otherwise."""
    choose = getattr(module, "event_loop", None)
    return choose(config) if choose is not None else None


_ROLES: dict[str, Callable[[Any, Config, Out], None]] = {
    "versions": _versions,
    "install": _install,
    "ledger": _ledger,
    "enqueuer": _enqueuer,
    "worker": _worker,
}


class Commands(threading.Thread):
    """The commands after the config, read on a thread of their own: a worker's start
    and stop set its events; an enqueuer's are taken one at a time. A closed stdin is
    a stop."""

    def __init__(self, work: Work | None = None) -> None:
        super().__init__(daemon=True)
        self.work = work
        self.taken: queue.Queue[dict[str, Any]] = queue.Queue()

    def run(self) -> None:
        for line in sys.stdin:
            command = json.loads(line)
            self._take(command)
            if command.get("cmd") == "stop":
                return
        self._take({"cmd": "stop"})

    def _take(self, command: dict[str, Any]) -> None:
        if self.work is None:
            self.taken.put(command)
        elif command.get("cmd") == "start":
            self.work.start.set()
        elif command.get("cmd") == "stop":
            self.work.stop.set()

    async def next(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.taken.get)


# -- what adapters share -----------------------------------------------------------------


def conninfo(config: Config, *, search_path: bool = True, **more: Any) -> str:
    """A libpq DSN of the config's connection (its password included: it stays in this
    process), every session in the run's schema, auto_explain's settings in a plan
    capture's sessions; `more`: other libpq keywords."""
    parts = {key: value for key, value in config["connection"].items() if value is not None}
    options = [parts.pop("options", None), config.get("explain_options")]
    if search_path:
        options.append(f"-c search_path={config['schema']}")
    joined = " ".join(option for option in options if option)
    if joined:
        parts["options"] = joined
    return psycopg.conninfo.make_conninfo("", **parts, **more)


def notice_forwarder(out: Out) -> Callable[[psycopg.errors.Diagnostic], None]:
    """A psycopg connection's notice handler that forwards its plans as `plan` events."""
    return lambda notice: out.plan(notice.message_primary or "")


def pool_configure(out: Out) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]:
    """A psycopg_pool's `configure`: each connection it opens forwards its plans."""

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        conn.add_notice_handler(notice_forwarder(out))

    return configure


def ledger_records(
    config: Config, statement: str, params: dict[str, Any] | None = None
) -> Iterator[Record]:
    """Each row of a library's ledger query as its record: the library's id, the job's
    number and tenant (null where its payload is gone), its state (done, waiting,
    running, failed), and its enqueue, start and finish as the library's tables keep
    them."""
    with psycopg.connect(conninfo(config), autocommit=True) as conn:
        rows = conn.execute(statement, params or {}).fetchall()  # type: ignore[call-overload]
    for library_id, job, tenant, state, enqueued, started, finished in rows:
        yield Record(str(library_id), state, enqueued, job, tenant, started, finished)


def sql_blocks(path: Path) -> dict[str, SqlBlock]:
    """The named blocks of an adapter's .sql file (harness/sqlfiles.py's format)."""
    return parse_blocks(path.read_text(encoding="utf-8"), path.name)


class FetchTimes:
    """The library's fetch call timed from the outside, for each job it brought: what a
    library's claim latency is (a batch's call for each of its jobs). The wrapped call is
    the library's own, unchanged; the task looks its job up once it runs."""

    def __init__(self) -> None:
        self.by_id: dict[str, float] = {}

    def wrap(
        self,
        fetch: Callable[..., Awaitable[Any]],
        ids: Callable[[Any], list[str]],
        held: Callable[[Any], None] | None = None,
    ) -> Any:
        """`fetch` timed; `ids` names the jobs of what it returned; `held`, if given, is
        told them (a library that fetches ahead of its tasks holds them from then on)."""

        async def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            fetched = await fetch(*args, **kwargs)
            elapsed_ms = (time.perf_counter() - began) * 1000
            for job_id in ids(fetched):
                self.by_id[job_id] = elapsed_ms
            if held is not None:
                held(fetched)
            return fetched

        return timed

    def claim_ms(self, job_id: str) -> float | None:
        return self.by_id.pop(job_id, None)


def shares(total: int, parts: int) -> list[int]:
    """`total` slots over `parts`, as evenly as they go (the first take the remainder),
    none empty."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if index < total % parts else 0) for index in range(parts)]


async def in_batches(jobs: list[Job], size: int) -> AsyncIterator[list[Job]]:
    """`jobs` in batches of at most `size`."""
    for first in range(0, len(jobs), size):
        yield jobs[first : first + size]
