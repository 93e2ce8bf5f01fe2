"""One scenario, run end to end on a server: the run folder, the timed repetitions and
their books, the plan captures, the summary, the plots. Whatever happens, run.json ends
with the run's status and the run folder keeps what was measured."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from harness.analysis.plans import Capture
from harness.analysis.properties import MONITOR_COLUMNS
from harness.errors import ReportInterrupted, Terminated
from harness.queues.base import Queue, QueueEntry, Site
from harness.results.contract import listed
from harness.results.document import PlanEntry, RepetitionEntry, RunDocument, ScenarioRef
from harness.results.folder import RunFolder, point_latest
from harness.results.jobs import jobs_csv
from harness.run.captures import CaptureObserver, capture_all, requests
from harness.run.crew import LOCAL, Placement
from harness.run.faults import refuse_restart
from harness.run.long_transaction import SAMPLE_COLUMNS
from harness.run.render import Rendered, render_run
from harness.run.repetition import Observer, RepetitionResult, plan, run_repetition
from harness.scenario.inputs import RunInputs
from harness.scenario.loader import LoadedScenario
from harness.scenario.model import Scenario
from harness.server.dsn import scrub
from harness.server.kinds import Server
from harness.server.provenance import collect_all
from harness.server.schema import own_schema


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


@dataclass
class Measured:
    """What a run has measured so far: kept whatever happens next."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    monitor: list[dict[str, Any]] = field(default_factory=list)
    bloat: list[dict[str, Any]] = field(default_factory=list)  # long_transaction samples


def run_scenario(
    loaded: LoadedScenario,
    entries: dict[str, QueueEntry],
    server: Server,
    root: Path,
    observer: RunObserver,
    options: RunOptions,
    placement: Placement = LOCAL,
) -> Rendered:
    """`placement`: where the repetitions' programs run (here, or a fleet's hosts)."""
    scenario = loaded.scenario
    refuse_restart(loaded, server.provider)
    folder = RunFolder.create(root, scenario.name)
    _write(folder, "scenario.yaml", loaded.text)
    site = Site(server.dsn, options.schema or "harness_" + folder.run_id.lower().replace("-", "_"))
    inputs = RunInputs.of(scenario)  # once: every repetition queues the same jobs
    queues = {name: entries[name].make(site, inputs) for name in named_queues(scenario)}
    document = _run_document(loaded, folder, server, options, entries, queues)
    _write(folder, "run.json", document.dumps())
    point_latest(root, folder.path)
    measured = Measured()
    try:
        outside = outside_schemas(queues.values())
        with own_schema(server.dsn, site.schema, options.reuse_schema, outside) as owned:
            if options.timed and scenario.timed:
                timed = Timed(queues, site, inputs, server.restart, placement)
                _run_timed(timed, observer, document, measured)
            if options.plans and scenario.explain is not None:
                _capture_plans(site, inputs, queues, observer, options, folder, measured)
        _seal(folder, document, measured)
    except BaseException as error:
        _close_unfinished(folder, document, measured, error)
        raise
    # A schema the cleanup had to leave (what others built on it) leaves the run whole.
    return replace(_render(folder), notes=(owned.left,) if owned.left else ())


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


def _run_timed(timed: Timed, observer: Observer, document: RunDocument, measured: Measured) -> None:
    for repetition in plan(timed.inputs.scenario):
        queue = timed.queues[repetition.strategy]
        result = run_repetition(
            queue, timed.site, timed.inputs, repetition, observer, timed.restart, timed.placement
        )
        measured.jobs += result.jobs
        measured.monitor += monitor_records(result)
        measured.bloat += bloat_records(result)
        document.repetitions.append(_repetition_entry(result))


def _capture_plans(
    site: Site,
    inputs: RunInputs,
    queues: dict[str, Queue],
    observer: CaptureObserver,
    options: RunOptions,
    folder: RunFolder,
    measured: Measured,
) -> None:
    scenario = inputs.scenario
    assert scenario.explain is not None
    chosen = requests(scenario, options.explain_strategies, options.explain_variants)
    repeat = options.repeat or scenario.explain.repeat
    for capture in capture_all(
        site, scenario, queues, chosen, repeat, options.include_slow, observer, inputs.params
    ):
        measured.captures.append(capture)
        if capture.skipped is None:
            _write_capture(folder, capture, queues[capture.strategy].dequeue_sql() or "")


def _write_capture(folder: RunFolder, capture: Capture, dequeue: str) -> None:
    stem = f"explain/{capture.variant}/{capture.strategy}"
    saved = json.dumps(
        {
            "variant": capture.variant,
            "strategy": capture.strategy,
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
    server: Server,
    options: RunOptions,
    entries: dict[str, QueueEntry],
    queues: dict[str, Queue],
) -> RunDocument:
    scenario = loaded.scenario
    return RunDocument(
        run_id=folder.run_id,
        started_at=_utc_now(),
        scenario=ScenarioRef(
            name=scenario.name, path=loaded.path, sha256=loaded.sha256, seed=scenario.seed
        ),
        options=options.__dict__,
        metadata=collect_all(server.dsn, {"kind": server.provider, **server.details}),
        # Each strategy's simulator policy, so that a later render simulates the same ideal.
        simulation={name: entries[name].simulate_as for name in scenario.strategies},
        queues={name: queue.provenance() for name, queue in queues.items()},
    )


def _repetition_entry(result: RepetitionResult) -> RepetitionEntry:
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
        long_transaction=result.hold.window() if result.hold is not None else None,
        fleet=result.fleet,
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
    _write_raw(folder, document, measured)
    _write(folder, "run.json", document.dumps(), replace=True)


def _write_raw(folder: RunFolder, document: RunDocument, measured: Measured) -> None:
    """Each raw file once: an interrupt inside `_seal` comes back here to mark the run."""
    if measured.jobs and "jobs" not in document.files:
        document.files["jobs"] = _write(folder, "jobs.csv", jobs_csv(measured.jobs))
    if measured.monitor and "monitor" not in document.files:
        monitor = pd.DataFrame.from_records(measured.monitor, columns=MONITOR_COLUMNS)
        document.files["monitor"] = _write(folder, "monitor.csv", monitor.to_csv(index=False))
    if measured.bloat and "bloat" not in document.files:
        bloat = pd.DataFrame.from_records(measured.bloat, columns=BLOAT_COLUMNS)
        document.files["bloat"] = _write(folder, "bloat.csv", bloat.to_csv(index=False))
    document.plans = [
        PlanEntry(
            variant=c.variant,
            strategy=c.strategy,
            backlog=c.backlog,
            skipped=c.skipped,
            repetitions=len(c.plans),
        )
        for c in measured.captures
    ]


def _write(folder: RunFolder, name: str, text: str, replace: bool = False) -> str:
    return folder.write(listed(name, "raw"), text, replace=replace).name


def _seal(folder: RunFolder, document: RunDocument, measured: Measured) -> None:
    _write_raw(folder, document, measured)
    document.status = "complete"
    document.finished_at = _utc_now()
    _write(folder, "run.json", document.dumps(), replace=True)


def _render(folder: RunFolder) -> Rendered:
    """The derived files of a sealed run: an interrupt now loses no measurement, and the
    CLI says how to write what it cut short rather than call the run interrupted."""
    try:
        return render_run(folder)
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


BLOAT_COLUMNS = ["strategy", "workers", "repetition", *SAMPLE_COLUMNS]


def bloat_records(result: RepetitionResult) -> list[dict[str, Any]]:
    """The long transaction's samples, keyed by repetition like jobs.csv."""
    if result.hold is None:
        return []
    repetition = result.repetition
    keys = {
        "strategy": repetition.strategy,
        "workers": repetition.workers,
        "repetition": repetition.index,
    }
    return [{**keys, **sample} for sample in result.hold.samples]


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
