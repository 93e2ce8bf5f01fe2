"""`harness overhead`: the harness's own workers against pgbench, on the same claim SQL.

The harness must not measure itself. Both arms drain the same preloaded queue (N jobs of
one tenant, freshly reset schema) on the same server with the same number of clients and
run the same statements, the strategy's own blocks: pgbench as a custom script generated
from them (`pgbench_script`), the harness as its worker processes (harness/queues/sql/worker.py,
unchanged). Each arm is timed by the server's clock, from the first job's started_at to
the last job's finished_at, so both are measured by one definition; throughput is jobs
over that makespan.

Claim latency is the claim transaction (BEGIN, dequeue, served, start, retire, COMMIT)
as the client saw it, averaged over the jobs: the workers time each claim themselves
(claim_ms); for pgbench it is the sum of the per-command average latencies that `-r`
prints for the claim's commands. `-r` gives only averages (a `-l` log would time the
whole transaction, work and completion included), so both arms report the mean.

The machine may be small and shared: each load runs `rounds` times with the arms back to
back in alternating order after an unrecorded warm-up; the summary is the median per arm
and, for the ratios, the median of the rounds' own ratios.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psycopg

from harness.analysis.headline import figure_of
from harness.errors import RunFailed
from harness.queues.base import JobRecord, Ledger, Site
from harness.queues.sql.queue import SqlQueue
from harness.queues.sql.strategies import Strategy
from harness.report.cells import number, span
from harness.results.headline import Figure
from harness.results.versioned import Versioned
from harness.run.books import check_books
from harness.run.crew import Crew
from harness.scenario.arrivals import Batch
from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario, TenantGroup
from harness.server.connections import connect
from harness.server.dsn import password_for
from harness.server.embedded import client_program
from harness.server.run_user import environment, program_args, secret_file
from harness.server.schema import recreate

FORMAT_VERSION = 1  # overhead.json; history: 1 first version
Arm = Literal["pgbench", "harness"]
ARMS: tuple[Arm, Arm] = ("pgbench", "harness")
TENANT = 1
# No cap: a `served` guard (the capped strategy) then never refuses a claim, so neither
# arm has lost races to retry; pgbench could not roll one back and dequeue again.
PARAMS: dict[str, Any] = {"tenant_cap": 2**31 - 1}
# psycopg prepares a statement from its fifth execution on; pgbench's prepared mode is the
# like-for-like comparison, and the fastest client pgbench can be.
PGBENCH_MODE = "prepared"
POLL_INTERVAL_MS = 10  # only the last claims, when the queue runs dry, ever poll
ARM_TIMEOUT_S = 600
WARM_UP_JOBS = 200
THROUGHPUT_GOAL = 0.8  # harness / pgbench, 0 ms jobs, at least
MAKESPAN_GOAL = 1.03  # harness / pgbench, jobs with work, at most
_PLACEHOLDER = re.compile(r"%\((?P<name>[a-z_][a-z0-9_]*)\)s")
_LATENCY = re.compile(r"^\s*(?P<ms>\d+\.\d+)\s+(?P<failures>\d+)\s+\S")
# libpq's variable for a connection parameter is PG + its name, but for these
_LIBPQ_ENV = {"dbname": "PGDATABASE", "application_name": "PGAPPNAME"}
_NEVER_PASSED = ("PGPASSWORD", "PGPASSFILE")  # the password goes in a file of the run's


@dataclass(frozen=True)
class OverheadSettings:
    strategy: str = "fifo"
    clients: int = 4
    jobs: int = 2000  # with 0 ms jobs: what the client costs per claim shows most
    work_jobs: int = 1000  # with work_ms jobs: about 5 s with 4 clients
    work_ms: int = 20
    rounds: int = 3

    def loads(self) -> list[Load]:
        """Each load's jobs rounded up to a multiple of the clients: pgbench runs a fixed
        count of transactions per client, one job each."""
        return [
            Load(work_ms=0, jobs=_multiple(self.jobs, self.clients)),
            Load(work_ms=self.work_ms, jobs=_multiple(self.work_jobs, self.clients)),
        ]


def _multiple(jobs: int, clients: int) -> int:
    return -(-jobs // clients) * clients


@dataclass(frozen=True)
class Load:
    work_ms: int
    jobs: int


@dataclass(frozen=True)
class Measurement:
    arm: Arm
    work_ms: int
    round: int
    jobs: int
    makespan_s: float  # first started_at to last finished_at, by the server's clock
    claim_ms: float  # mean claim transaction latency, as the client saw it

    @property
    def throughput(self) -> float:
        return self.jobs / self.makespan_s

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "throughput_jobs_s": self.throughput}


# --- pgbench script --------------------------------------------------------------------


@dataclass(frozen=True)
class PgbenchScript:
    text: str
    claim_commands: int  # the first commands, in `pgbench -r` order, are the claim


def pgbench_script(strategy: Strategy, work_ms: int) -> PgbenchScript:
    """The worker's claim, work and completion as a pgbench script, from the blocks."""
    claim = ["begin;", to_pgbench(strategy.sql("dequeue"), gset=True)]
    # The workers pass the dequeued id as job_id; \gset names it after its column, id.
    claim.append(r"\set job_id :id")
    claim += [to_pgbench(strategy.sql(b)) for b in ("served", "start", "retire") if strategy.has(b)]
    work = [rf"\sleep {work_ms} ms"] if work_ms > 0 else []
    complete = to_pgbench(strategy.sql("complete"))
    if strategy.hold_lock:  # `-- claim: hold`: one transaction around it all
        return PgbenchScript(_lines(*claim, *work, complete, "commit;"), len(claim))
    return PgbenchScript(_lines(*claim, "commit;", *work, complete), len(claim) + 1)


def _lines(*commands: str) -> str:
    return "\n".join(commands) + "\n"


def to_pgbench(sql: str, gset: bool = False) -> str:
    """A block as pgbench runs it: psycopg's %(name)s becomes pgbench's :name; with
    `gset`, \\gset takes the place of the final semicolon, so the row's columns become
    variables (a dequeue that finds no job aborts the client: the books then fail)."""
    text = _PLACEHOLDER.sub(r":\g<name>", sql).replace("%%", "%")
    if not gset:
        return text
    return text.rstrip().removesuffix(";").rstrip() + r" \gset"


@dataclass(frozen=True)
class PgbenchOutput:
    processed: int
    failed: int
    latencies_ms: list[float]  # per command of the script, in order (from -r)


def parse_pgbench(stdout: str) -> PgbenchOutput:
    processed = re.search(r"actually processed: (\d+)", stdout)
    failed = re.search(r"number of failed transactions: (\d+)", stdout)
    latencies = stdout.partition("statement latencies in milliseconds")[2].splitlines()[1:]
    return PgbenchOutput(
        processed=int(processed[1]) if processed else 0,
        failed=int(failed[1]) if failed else 0,
        latencies_ms=[float(m["ms"]) for line in latencies if (m := _LATENCY.match(line))],
    )


def pgbench_env(dsn: str, schema: str, passfile: Path | None = None) -> dict[str, str]:
    """libpq variables for the DSN in a program's minimal environment, the password in
    `passfile` (0600, the run's user's), never in a variable another process of that
    user could read in /proc; the run's schema through PGOPTIONS, as the workers set it.
    The caller's own PG* variables (but its password's) still name the server."""
    libpq = {
        name: value
        for name, value in os.environ.items()
        if name.startswith("PG") and name not in _NEVER_PASSED
    }
    options = [f"-c search_path={schema}"]
    for key, value in psycopg.conninfo.conninfo_to_dict(dsn).items():
        if key == "options":
            options.insert(0, str(value))
        elif key not in ("password", "passfile"):
            libpq[_LIBPQ_ENV.get(key, "PG" + key.upper())] = str(value)
    if passfile is not None:
        libpq["PGPASSFILE"] = str(passfile)
    return environment({**libpq, "PGOPTIONS": " ".join(options)})


def pgpass_line(password: str) -> str:
    """A libpq password file's line that matches any server, with `password`."""
    return "*:*:*:*:" + password.replace("\\", "\\\\").replace(":", "\\:") + "\n"


@contextlib.contextmanager
def _passfile(dsn: str) -> Iterator[Path | None]:
    """The DSN's password (as libpq finds it) in a 0600 file of the run's user."""
    password = password_for(dsn)
    if not password:
        yield None
        return
    with secret_file(pgpass_line(password)) as path:
        yield path


# --- the arms --------------------------------------------------------------------------


Measure = Callable[[str, str, Strategy, Load, int], tuple[float, list[int] | None]]


def run_pgbench(
    dsn: str, schema: str, strategy: Strategy, load: Load, clients: int
) -> tuple[float, list[int] | None]:
    """Mean claim latency; no job ids (pgbench reports none)."""
    script = pgbench_script(strategy, load.work_ms)
    variables = [arg for name, value in PARAMS.items() for arg in ("-D", f"{name}={value}")]
    command = [
        str(client_program("pgbench")),
        *("-n", "-r", "-M", PGBENCH_MODE),
        # A thread per client, as the harness has a process per worker: the scheduler
        # shares the CPUs per thread, and one thread would serve four clients with one share.
        *("-c", str(clients), "-j", str(clients), "-t", str(load.jobs // clients)),
        *variables,
        *("-f", "-"),
    ]
    with _passfile(dsn) as passfile:
        done = _pgbench(command, script.text, pgbench_env(dsn, schema, passfile))
    output = parse_pgbench(done.stdout)
    if done.returncode != 0 or output.failed or output.processed != load.jobs:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RunFailed(f"pgbench (exit {done.returncode}): {tail[0]}")
    return sum(output.latencies_ms[: script.claim_commands]), None


def run_workers(
    dsn: str, schema: str, strategy: Strategy, load: Load, clients: int
) -> tuple[float, list[int] | None]:
    """Mean claim latency and every claimed job id, from the worker processes."""
    queue = load_queue(dsn, schema, strategy, load, clients)
    with Crew(queue.workers(clients)) as crew:
        reports = crew.drain(load.jobs, ARM_TIMEOUT_S)
    claims = [claim for report in reports for claim in report.claims]
    return statistics.fmean(ms for _, _, ms in claims), [job for job, _, _ in claims]


def _pgbench(
    command: list[str], script: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """pgbench as the run's user, the script on its stdin."""
    try:
        return subprocess.run(
            command,
            input=script,
            env=env,
            capture_output=True,
            text=True,
            timeout=ARM_TIMEOUT_S,
            check=False,
            **program_args(),
        )
    except subprocess.TimeoutExpired as error:
        raise RunFailed(f"pgbench did not finish within {ARM_TIMEOUT_S} s") from error


_ARMS: dict[Arm, Measure] = {"pgbench": run_pgbench, "harness": run_workers}


def load_queue(dsn: str, schema: str, strategy: Strategy, load: Load, clients: int) -> SqlQueue:
    """The strategy as a queue for one load: one tenant's jobs of `load.work_ms` each,
    polled every POLL_INTERVAL_MS once the queue runs dry."""
    scenario = Scenario(
        name="overhead",
        strategies=[strategy.name],
        workers=[clients],
        poll_interval_ms=POLL_INTERVAL_MS,
        seed=0,
        tenant_groups=[
            TenantGroup(name="load", tenants=1, jobs_per_tenant=load.jobs, duration_ms=load.work_ms)
        ],
    )
    return SqlQueue(strategy, Site(dsn, schema), RunInputs.of(scenario))


def fresh_queue(conn: psycopg.Connection[Any], queue: SqlQueue, jobs: int) -> None:
    """Empty tables, then `jobs` queued jobs of one tenant, by the strategy's own enqueue
    and with statistics, as a backlog is loaded."""
    recreate(conn, queue.site.schema)
    queue.install(conn)
    batch = Batch(0.0, [TENANT] * jobs, [1] * jobs, [0] * jobs)
    conn.execute(queue.strategy.sql("enqueue"), queue.batch_params(batch))  # type: ignore[call-overload]
    conn.execute(queue.strategy.sql("after_load"))  # type: ignore[call-overload]


def measure(
    dsn: str, schema: str, strategy: Strategy, arm: Arm, load: Load, clients: int, round_: int
) -> Measurement:
    """One arm drains a fresh queue; the books are checked before anything is kept."""
    queue = load_queue(dsn, schema, strategy, load, clients)
    with connect(dsn, schema=schema) as conn:
        fresh_queue(conn, queue, load.jobs)
        claim_ms, claimed = _ARMS[arm](dsn, schema, strategy, load, clients)
        records = queue.ledger(conn, []).records
    _check_books(arm, load.jobs, records, claimed)
    return Measurement(arm, load.work_ms, round_, load.jobs, makespan_s(records), claim_ms)


def _check_books(arm: Arm, jobs: int, records: list[JobRecord], claimed: list[int] | None) -> None:
    # pgbench names no job; each of its `jobs` transactions claims one, so `jobs` rows done
    # means each was done exactly once: a transaction that found no job aborts pgbench,
    # one whose start or completion changed no row leaves a job not done.
    claims = claimed if claimed is not None else [record.job_id for record in records]
    books = check_books(jobs, Ledger(records, claims))
    if books.problems:
        raise RunFailed(f"{arm}: the books do not balance: " + "; ".join(books.problems))


def makespan_s(rows: list[JobRecord]) -> float:
    started = min(row.started_at for row in rows if row.started_at is not None)
    finished = max(row.finished_at for row in rows if row.finished_at is not None)
    return (finished - started).total_seconds()


def run_overhead(
    dsn: str,
    schema: str,
    strategy: Strategy,
    settings: OverheadSettings,
    measured: Callable[[Measurement], None],
) -> list[Measurement]:
    """Every round of every load, arms alternating; `measured` sees each as it comes."""
    for arm in ARMS:  # connections, caches and the first prepared plans, unrecorded
        measure(dsn, schema, strategy, arm, Load(0, WARM_UP_JOBS), settings.clients, 0)
    results = []
    for round_, load, arm in schedule(settings):
        result = measure(dsn, schema, strategy, arm, load, settings.clients, round_)
        measured(result)
        results.append(result)
    return results


def schedule(settings: OverheadSettings) -> Iterator[tuple[int, Load, Arm]]:
    """pgbench first in odd rounds, the harness first in even ones: drift and warm-up
    favour neither."""
    for round_ in range(1, settings.rounds + 1):
        for load in settings.loads():
            order = ARMS if round_ % 2 else ARMS[::-1]
            for arm in order:
                yield round_, load, arm


# --- summary ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values))


@dataclass(frozen=True)
class ArmSummary:
    throughput: Spread
    makespan_s: Spread
    claim_ms: Spread


METRICS = ("throughput", "makespan_s", "claim_ms")


@dataclass(frozen=True)
class LoadSummary:
    load: Load
    pgbench: ArmSummary
    harness: ArmSummary
    ratios: dict[str, float]  # harness / pgbench, the median of the rounds' ratios

    def ratio(self, metric: str) -> float:
        return self.ratios[metric]


def summarise(measurements: list[Measurement], settings: OverheadSettings) -> list[LoadSummary]:
    """Per load, each arm's median and range over rounds, and the ratios. A ratio is taken
    within each round, whose two arms ran back to back, then the median over rounds: the
    shared machine's drift from one round to the next cancels out."""

    def arm(load: Load, name: Arm) -> list[Measurement]:
        return sorted(
            (m for m in measurements if m.arm == name and m.work_ms == load.work_ms),
            key=lambda m: m.round,
        )

    def spreads(mine: list[Measurement]) -> ArmSummary:
        values = {metric: [getattr(m, metric) for m in mine] for metric in METRICS}
        return ArmSummary(**{metric: Spread.of(v) for metric, v in values.items()})

    summaries = []
    for load in settings.loads():
        theirs, mine = arm(load, "pgbench"), arm(load, "harness")
        ratios = {
            metric: statistics.median(
                getattr(h, metric) / getattr(p, metric) for h, p in zip(mine, theirs, strict=True)
            )
            for metric in METRICS
        }
        summaries.append(LoadSummary(load, spreads(theirs), spreads(mine), ratios))
    return summaries


@dataclass(frozen=True)
class Goal:
    figure: str
    measured: float
    bound: float
    at_least: bool  # the bound is a minimum, else a maximum

    @property
    def met(self) -> bool:
        return self.measured >= self.bound if self.at_least else self.measured <= self.bound

    @property
    def message(self) -> str:
        relation = "at least" if self.at_least else "at most"
        verdict = "goal met" if self.met else "GOAL MISSED"
        return f"{verdict}: {self.figure} {self.measured:.3f} (goal: {relation} {self.bound:g})"

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "met": self.met}


def goals(summaries: list[LoadSummary]) -> list[Goal]:
    """The issue's goals: the harness's throughput near pgbench's where the client's cost
    per claim shows most (0 ms jobs), and its makespan near pgbench's with work."""
    instant, work = summaries
    return [
        Goal(
            "harness / pgbench throughput, 0 ms jobs",
            instant.ratio("throughput"),
            THROUGHPUT_GOAL,
            at_least=True,
        ),
        Goal(
            f"harness / pgbench makespan, {work.load.work_ms} ms jobs",
            work.ratio("makespan_s"),
            MAKESPAN_GOAL,
            at_least=False,
        ),
    ]


class OverheadDocument(Versioned):
    """overhead.json, on the versioned-document base (harness/results/versioned.py)."""

    NAME = "overhead.json"
    VERSION = FORMAT_VERSION

    settings: dict[str, Any]
    pgbench: dict[str, Any]  # its mode, and the script of each load (by its work_ms)
    measurements: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    goals: list[dict[str, Any]]
    metadata: dict[str, Any]


def overhead_document(
    settings: OverheadSettings,
    strategy: Strategy,
    measurements: list[Measurement],
    metadata: dict[str, Any],
) -> OverheadDocument:
    """overhead.json: what ran, every measurement, the medians and the goals."""
    summaries = summarise(measurements, settings)
    return OverheadDocument(
        settings=settings.__dict__,
        pgbench={
            "mode": PGBENCH_MODE,
            "scripts": {
                str(load.work_ms): pgbench_script(strategy, load.work_ms).text
                for load in settings.loads()
            },
        },
        measurements=[m.as_dict() for m in measurements],
        summary=[_summary_entry(s) for s in summaries],
        goals=[goal.as_dict() for goal in goals(summaries)],
        metadata=metadata,
    )


def _summary_entry(summary: LoadSummary) -> dict[str, Any]:
    return {
        **summary.load.__dict__,
        "pgbench": {m: getattr(summary.pgbench, m).__dict__ for m in METRICS},
        "harness": {m: getattr(summary.harness, m).__dict__ for m in METRICS},
        "ratio": summary.ratios,
    }


def overhead_rows(summaries: list[LoadSummary]) -> tuple[list[str], list[list[str]]]:
    """Per load, both arms (median, range over rounds) and the harness / pgbench ratio
    (the median of the rounds' ratios)."""
    headers = ["work", "jobs", "arm", "jobs/s", "makespan s", "claim ms (mean)"]
    metrics = ("throughput", "makespan_s", "claim_ms")
    rows = []
    for summary in summaries:
        load = summary.load
        for arm in ("pgbench", "harness"):
            spreads = [getattr(getattr(summary, arm), metric) for metric in metrics]
            cells = [f"{number(s.median)} ({span(s.low, s.high)})" for s in spreads]
            rows.append([f"{load.work_ms} ms", str(load.jobs), arm, *cells])
        ratios = [f"{summary.ratio(metric):.3f}" for metric in metrics]
        rows.append([f"{load.work_ms} ms", str(load.jobs), "harness / pgbench", *ratios])
    return headers, rows


_HEADLINE = (
    ("throughput", "throughput", "jobs/s", False),
    ("makespan_s", "makespan", "s", True),
    ("claim_ms", "mean claim latency", "ms", True),
)


def overhead_headline(measurements: list[Measurement], settings: OverheadSettings) -> list[Figure]:
    """results.json of `harness overhead`: per load, each arm's figures over the rounds,
    and harness / pgbench, each round's ratio (the arms ran back to back)."""
    figures = []
    for load in settings.loads():
        mine = [m for m in measurements if m.work_ms == load.work_ms]
        arms = {
            arm: sorted((m for m in mine if m.arm == arm), key=lambda m: m.round) for arm in ARMS
        }
        where = f"overhead: {settings.strategy}, {settings.clients} clients, {load.work_ms} ms jobs"
        for metric, label, unit, lower in _HEADLINE:
            for arm, rounds in arms.items():
                values = [getattr(m, metric) for m in rounds]
                figures.append(figure_of(f"{where}, {arm}: {label}", unit, values, lower))
            ratios = [
                getattr(h, metric) / getattr(p, metric)
                for h, p in zip(arms["harness"], arms["pgbench"], strict=True)
            ]
            figures.append(figure_of(f"{where}: harness / pgbench {label}", "x", ratios, lower))
    return [figure for figure in figures if figure is not None]
