"""One scenario, run end to end on a server: the run folder, the timed repetitions and
their books, the plan captures, the summary, the plots. Whatever happens, run.json ends
with the run's status and the run folder keeps what was measured."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from harness.analysis.held_fetches import FETCH_COLUMNS
from harness.analysis.plans import Capture
from harness.analysis.properties import MONITOR_COLUMNS
from harness.errors import ReportInterrupted, Terminated
from harness.queues.base import Queue, QueueEntry, Site
from harness.results.contract import listed
from harness.results.document import (
    CutEntry,
    PlanEntry,
    RepetitionEntry,
    RunDocument,
    ScenarioRef,
    ServerEntry,
)
from harness.results.folder import RunFolder, point_latest
from harness.results.jobs import PG, jobs_csv
from harness.results.series import SeriesFiles
from harness.run.captures import CaptureObserver, capture_all, requests
from harness.run.crew import LOCAL, Placement
from harness.run.faults import refuse_restart
from harness.run.horizon import COLUMNS as HORIZON_COLUMNS
from harness.run.long_transaction import SAMPLE_COLUMNS
from harness.run.repetition import Observer, RepetitionResult, plan, run_repetition
from harness.scenario.inputs import RunInputs
from harness.scenario.loader import LoadedScenario
from harness.scenario.model import Scenario
from harness.server.dsn import scrub
from harness.server.kinds import ProviderKind, Server
from harness.server.provenance import collect_local, collect_server, over_the_run
from harness.server.schema import own_schema

if TYPE_CHECKING:  # its module draws the figures: matplotlib, loaded when they are
    from harness.run.render import Rendered


class RunObserver(Observer, CaptureObserver, Protocol):
    """Progress of timed repetitions and of plan captures."""


@dataclass(frozen=True)
class RunOptions:
    timed: bool = True  # the timed workload, if the scenario has tenant groups
    plans: bool = True  # the plan captures, if the scenario has an explain section
    include_slow: bool = False
    explain_strategies: list[str] | None = None
    explain_variants: list[str] | None = None
    repeat: int | None = None  # overrides the scenario's explain.repeat
    schema: str | None = None  # default: harness_<run id>
    reuse_schema: bool = False  # take over a schema the harness left behind
    fleet: int = 0  # members of a worker fleet on other hosts (harness worker)
    local_workers: int = 0  # with a fleet: of each repetition's workers, those run here
    fleet_id: str | None = None  # what the members are given (--run); default: random
    fleet_timeout_s: float = 120.0  # how long the members may take to join
    adapters_dir: Path | None = None  # more adapters (docs/adapters.md): --adapters-dir
    # False: the run's tables, summary and report without its figures (harness report
    # draws them later): drawing them is most of a small run's time (3 s of 4 here), and
    # the test suite's runs that look at no figure ask for none.
    plots: bool = True
    thresholds: tuple[str, ...] = ()  # --threshold: on top of each scenario's own
    duration_s: float | None = None  # --duration: a horizon's, stretched (docs/long-horizon.md)
    only_strategies: tuple[str, ...] = ()  # --strategy: those of each scenario's, no other


# The raw series appended to as they are sampled (harness/results/series.py): each
# file's columns after the repetition's keys, and run.json's key of it
SERIES = {
    "bloat.csv": SAMPLE_COLUMNS,
    "fetch-plans.csv": FETCH_COLUMNS,
    **HORIZON_COLUMNS,
}
SERIES_KEYS = {
    "bloat.csv": "bloat",
    "fetch-plans.csv": "fetch_plans",
    "horizon.csv": "horizon",
    "horizon-relations.csv": "horizon_relations",
    "horizon-waits.csv": "horizon_waits",
    "horizon-pgstattuple.csv": "horizon_pgstattuple",
}


@dataclass
class Measured:
    """What a run has measured so far: kept whatever happens next."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    monitor: list[dict[str, Any]] = field(default_factory=list)
    # long_transaction's and a horizon's samples, explain_fetches' fetches: in their
    # files as they are taken
    series: SeriesFiles | None = None


Turn = Callable[[], contextlib.AbstractContextManager[Server]]


@dataclass(frozen=True)
class Servers:
    """The servers a run runs on, in turn: one per PostgreSQL major asked for, each
    started by its turn (a fresh server), or one that is running already."""

    kind: ProviderKind
    majors: tuple[int, ...]
    turns: tuple[Turn, ...]

    @classmethod
    def running(cls, server: Server) -> Servers:
        return cls(server.provider, (), (lambda: contextlib.nullcontext(server),))


@dataclass(frozen=True)
class Sitting:
    """Where a run measures now: its folder, document and schema name, on one server."""

    folder: RunFolder
    document: RunDocument
    schema: str
    inputs: RunInputs
    entries: dict[str, QueueEntry]


def run_scenario(
    loaded: LoadedScenario,
    entries: dict[str, QueueEntry],
    servers: Server | Servers,
    root: Path,
    observer: RunObserver,
    options: RunOptions,
    placement: Placement = LOCAL,
) -> Rendered:
    """One run folder, measured on each server in turn. `placement`: where the
    repetitions' programs run (here, or a fleet's hosts)."""
    scenario = loaded.scenario
    servers = Servers.running(servers) if isinstance(servers, Server) else servers
    refuse_restart(loaded, servers.kind)
    folder = RunFolder.create(root, scenario.name)
    _write(folder, "scenario.yaml", loaded.text)
    schema = options.schema or "harness_" + folder.run_id.lower().replace("-", "_")
    document = _run_document(loaded, folder, options, entries, servers.majors)
    _write(folder, "run.json", document.dumps())
    point_latest(root, folder.path)
    # Once: every repetition, on every server, queues the same jobs.
    sitting = Sitting(folder, document, schema, RunInputs.of(scenario), entries)
    series = SeriesFiles(folder.path, SERIES)
    measured, left = Measured(series=series), []
    try:
        for turn in servers.turns:
            with turn() as server:
                left += _measure_on(server, sitting, observer, options, placement, measured)
        _seal(folder, document, measured)
    except BaseException as error:
        _close_unfinished(folder, document, measured, error)
        raise
    finally:
        series.close()
    # A schema the cleanup had to leave (what others built on it) leaves the run whole.
    return replace(_render(folder, options.plots), notes=tuple(left))


def _measure_on(
    server: Server,
    sitting: Sitting,
    observer: RunObserver,
    options: RunOptions,
    placement: Placement,
    measured: Measured,
) -> list[str]:
    """The timed repetitions and the plan captures on one server; what its schema's
    cleanup had to leave, if anything."""
    scenario, document = sitting.inputs.scenario, sitting.document
    version = _record_server(document, server)
    site = Site(server.dsn, sitting.schema)
    queues = {
        name: sitting.entries[name].make(site, sitting.inputs) for name in named_queues(scenario)
    }
    document.queues = document.queues or {name: q.provenance() for name, q in queues.items()}
    _write(sitting.folder, "run.json", document.dumps(), replace=True)
    outside = outside_schemas(queues.values())
    with own_schema(server.dsn, site.schema, options.reuse_schema, outside) as owned:
        if options.timed and scenario.timed:
            timed = Timed(
                queues, site, sitting.inputs, server.restart, placement, version, server.crash
            )
            _run_timed(timed, observer, document, measured)
        if options.plans and scenario.explain is not None:
            _capture_plans(site, sitting, queues, observer, options, measured, version)
    return [owned.left] if owned.left else []


def _record_server(document: RunDocument, server: Server) -> str:
    """The server's provenance in run.json, as it starts; its version."""
    entry = ServerEntry.model_validate(collect_server(server.dsn, server_provider(server)))
    document.servers.append(entry)
    document.majors = document.majors or [entry.major]
    return entry.pg_version


def server_provider(server: Server) -> dict[str, Any]:
    return {"kind": server.provider, **server.details}


def outside_schemas(queues: Iterable[Queue]) -> tuple[str, ...]:
    """The schemas the run's queues' libraries insist on by name, each once."""
    return tuple(dict.fromkeys(name for queue in queues for name in queue.outside_schemas()))


def named_queues(scenario: Scenario) -> list[str]:
    """Every queue the scenario names: its strategies, then those only explained."""
    return list(dict.fromkeys([*scenario.strategies, *scenario.explain_strategies]))


@dataclass(frozen=True)
class Timed:
    """What the timed repetitions run on: the queues, where, with what, and how."""

    queues: dict[str, Queue]
    site: Site
    inputs: RunInputs
    restart: Callable[[], None] | None
    placement: Placement
    pg_version: str  # the server's
    crash: Callable[[float], list[str]] | None = None  # the server's (faults.server_crash)


def _run_timed(timed: Timed, observer: Observer, document: RunDocument, measured: Measured) -> None:
    assert measured.series is not None
    for repetition in plan(timed.inputs.scenario):
        queue = timed.queues[repetition.strategy]
        keys = {
            "strategy": repetition.strategy,
            "workers": repetition.workers,
            "repetition": repetition.index,
        }
        sink = measured.series.repetition(keys, timed.pg_version)
        result = run_repetition(
            queue,
            timed.site,
            timed.inputs,
            repetition,
            observer,
            timed.restart,
            timed.placement,
            crash=timed.crash,
            sink=sink,
        )
        sink.finished = True
        on_server = {PG: timed.pg_version}
        measured.jobs += [{**job, **on_server} for job in result.jobs]
        measured.monitor += [{**row, **on_server} for row in monitor_records(result)]
        document.repetitions.append(_repetition_entry(result, timed.pg_version))


def _capture_plans(
    site: Site,
    sitting: Sitting,
    queues: dict[str, Queue],
    observer: CaptureObserver,
    options: RunOptions,
    measured: Measured,
    pg_version: str,
) -> None:
    inputs = sitting.inputs
    scenario = inputs.scenario
    assert scenario.explain is not None
    chosen = requests(scenario, options.explain_strategies, options.explain_variants)
    repeat = options.repeat or scenario.explain.repeat
    for capture in capture_all(
        site, scenario, queues, chosen, repeat, options.include_slow, observer, inputs.params
    ):
        capture.pg_version = pg_version
        measured.captures.append(capture)
        if capture.skipped is None:
            stem = sitting.document.capture_stem(_plan_entry(capture))
            _write_capture(sitting.folder, stem, capture, queues[capture.strategy].dequeue_sql())


def _write_capture(folder: RunFolder, stem: str, capture: Capture, dequeue: str | None) -> None:
    dequeue = dequeue or ""
    saved = json.dumps(
        {
            "variant": capture.variant,
            "strategy": capture.strategy,
            "pg_version": capture.pg_version,
            "backlog": capture.backlog,
            "dequeue": dequeue,
            "load_s": capture.load_s,
            "figures": [figures.as_dict() for figures in capture.figures],
            "plans": capture.plans,
        },
        indent=2,
    )
    _write(folder, f"{stem}.json", saved + "\n")
    header = (
        f"-- {capture.strategy} on {capture.variant} "
        f"({json.dumps(capture.backlog)}): the first execution, which is also the "
        "warm-up\n-- EXPLAIN (ANALYZE, BUFFERS) of:\n"
    )
    _write(folder, f"{stem}.txt", header + dequeue + "\n\n" + capture.text)


def _run_document(
    loaded: LoadedScenario,
    folder: RunFolder,
    options: RunOptions,
    entries: dict[str, QueueEntry],
    majors: tuple[int, ...],
) -> RunDocument:
    """The document as the folder is made: each server's part comes as it starts."""
    scenario = loaded.scenario
    return RunDocument(
        run_id=folder.run_id,
        started_at=_utc_now(),
        scenario=ScenarioRef(
            name=scenario.name, path=loaded.path, sha256=loaded.sha256, seed=scenario.seed
        ),
        options=options.__dict__,
        metadata=collect_local(),
        majors=list(majors),
        # Each strategy's simulator policy, so that a later render simulates the same ideal.
        simulation={name: entries[name].simulate_as for name in scenario.strategies},
    )


def _repetition_entry(result: RepetitionResult, pg_version: str) -> RepetitionEntry:
    repetition = result.repetition
    return RepetitionEntry(
        strategy=repetition.strategy,
        workers=repetition.workers,
        repetition=repetition.index,
        jobs=len(result.jobs),
        empty_polls=result.empty_polls,
        lost_races=result.lost_races,
        books=result.books,
        started_at=result.started_at.isoformat(),
        finished_at=result.finished_at.isoformat(),
        faults=result.faults,
        library_faults=result.library_faults,
        long_transaction=result.hold.window() if result.hold is not None else None,
        idle=result.idle,
        fleet=result.fleet,
        pg_version=pg_version,
    )


def _close_unfinished(
    folder: RunFolder, document: RunDocument, measured: Measured, error: BaseException
) -> None:
    """Keep what was measured (whole repetitions and captures), marked as not complete."""
    interrupted = isinstance(error, KeyboardInterrupt | Terminated)
    document.status = "interrupted" if interrupted else "failed"
    # The error's notes say what its cleanup left on the server.
    document.error = scrub(
        "; ".join([str(error) or type(error).__name__, *getattr(error, "__notes__", [])])
    )
    document.finished_at = _utc_now()
    _machine_over_the_run(document)
    cut = measured.series.cut if measured.series is not None else None
    if cut is not None and cut.rows:
        document.cut = CutEntry(
            **cut.keys, pg_version=cut.pg_version, last_sample_s=cut.last_s, rows=cut.rows
        )
    _write_raw(folder, document, measured)
    _write(folder, "run.json", document.dumps(), replace=True)


def _write_raw(folder: RunFolder, document: RunDocument, measured: Measured) -> None:
    """Each raw file once: an interrupt inside `_seal` comes back here to mark the run."""
    if measured.jobs and "jobs" not in document.files:
        document.files["jobs"] = _write(
            folder, "jobs.csv", jobs_csv(measured.jobs, document.run_id)
        )
    if measured.monitor and "monitor" not in document.files:
        monitor = pd.DataFrame.from_records(measured.monitor, columns=[*MONITOR_COLUMNS, PG])
        document.files["monitor"] = _write(folder, "monitor.csv", monitor.to_csv(index=False))
    for name in measured.series.written if measured.series is not None else []:
        document.files[SERIES_KEYS[name]] = name  # appended to as they were sampled
    document.plans = [_plan_entry(capture) for capture in measured.captures]


def _plan_entry(capture: Capture) -> PlanEntry:
    return PlanEntry(
        variant=capture.variant,
        strategy=capture.strategy,
        backlog=capture.backlog,
        skipped=capture.skipped,
        repetitions=len(capture.plans),
        pg_version=capture.pg_version or None,
    )


def _write(folder: RunFolder, name: str, text: str, replace: bool = False) -> str:
    return folder.write(listed(name, "raw"), text, replace=replace).name


def _seal(folder: RunFolder, document: RunDocument, measured: Measured) -> None:
    _write_raw(folder, document, measured)
    document.status = "complete"
    document.finished_at = _utc_now()
    _machine_over_the_run(document)
    _write(folder, "run.json", document.dumps(), replace=True)


def _machine_over_the_run(document: RunDocument) -> None:
    """The machine's CPU and load from the run's start to its end, in its provenance."""
    host = document.metadata.get("host")
    if isinstance(host, dict):
        host["over_the_run"] = over_the_run(host)


def _render(folder: RunFolder, plots: bool) -> Rendered:
    """The derived files of a sealed run: an interrupt now loses no measurement, and the
    CLI says how to write what it cut short rather than call the run interrupted."""
    from harness.run.render import render_run  # matplotlib: loaded once a run is measured

    try:
        return render_run(folder, plots=plots)
    except (KeyboardInterrupt, Terminated) as interrupt:
        raise ReportInterrupted(folder.path) from interrupt


def monitor_records(result: RepetitionResult) -> list[dict[str, Any]]:
    repetition = result.repetition
    return [
        {
            "strategy": repetition.strategy,
            "workers": repetition.workers,
            "repetition": repetition.index,
            "elapsed_s": elapsed,
            "stranded": stranded,
            "oldest_age_s": age,
        }
        for elapsed, stranded, age in result.monitor
    ]


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
