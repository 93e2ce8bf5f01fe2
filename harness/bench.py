"""One scenario, run end to end on a server: the run folder, every repetition, the books,
the summary, the plots. Whatever happens, run.json ends with the run's status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis import reference_table, summarize
from harness.errors import Terminated
from harness.metadata import collect_all
from harness.providers import Server
from harness.report import summary_markdown, timeline_plot, wait_plot
from harness.results import RUN_FORMAT_VERSION, RunFolder, point_latest, with_timestamps
from harness.runner import Observer, RepetitionResult, own_schema, plan, run_repetition
from harness.scenario import LoadedScenario
from harness.strategies import Strategy


@dataclass(frozen=True)
class RunOutcome:
    folder: RunFolder
    summary: pd.DataFrame
    reference: pd.DataFrame | None
    reference_source: str | None


def run_scenario(
    loaded: LoadedScenario,
    strategies: dict[str, Strategy],
    server: Server,
    root: Path,
    observer: Observer,
) -> RunOutcome:
    scenario = loaded.scenario
    folder = RunFolder.create(root, scenario.name)
    folder.write("scenario.yaml", loaded.text)
    document = _run_document(loaded, folder, server)
    folder.write_json("run.json", document)
    point_latest(root, folder.path)
    records: list[dict[str, Any]] = []
    schema = "harness_" + folder.run_id.lower().replace("-", "_")
    try:
        with own_schema(server.dsn, schema):
            for repetition in plan(scenario):
                result = run_repetition(
                    server.dsn,
                    schema,
                    scenario,
                    strategies[repetition.strategy],
                    repetition,
                    observer,
                )
                records += result.jobs
                document["repetitions"].append(_repetition_entry(result))
    except BaseException as error:
        _close_unfinished(folder, document, records, error)
        raise
    return _finish(loaded, folder, document, records)


def _run_document(loaded: LoadedScenario, folder: RunFolder, server: Server) -> dict[str, Any]:
    return {
        "format_version": RUN_FORMAT_VERSION,
        "run_id": folder.run_id,
        "status": "running",
        "error": None,
        "started_at": _utc_now(),
        "finished_at": None,
        "scenario": {
            "name": loaded.scenario.name,
            "path": loaded.path,
            "sha256": loaded.sha256,
            "copy": "scenario.yaml",
        },
        "metadata": collect_all(server.dsn, {"kind": server.provider, **server.details}),
        "repetitions": [],
        "files": {},
    }


def _repetition_entry(result: RepetitionResult) -> dict[str, Any]:
    repetition = result.repetition
    return {
        "strategy": repetition.strategy,
        "workers": repetition.workers,
        "repetition": repetition.index,
        "jobs": len(result.jobs),
        "empty_polls": result.empty_polls,
        "books": "balanced",
        "started_at": result.started_at.isoformat(),
        "finished_at": result.finished_at.isoformat(),
    }


def _close_unfinished(
    folder: RunFolder,
    document: dict[str, Any],
    records: list[dict[str, Any]],
    error: BaseException,
) -> None:
    """Keep what was measured (whole repetitions only), marked as not complete."""
    interrupted = isinstance(error, KeyboardInterrupt | Terminated)
    document["status"] = "interrupted" if interrupted else "failed"
    document["error"] = str(error) or type(error).__name__
    document["finished_at"] = _utc_now()
    if records:
        document["files"]["jobs"] = folder.write_jobs(records).name
    folder.write_json("run.json", document, replace=True)


def _finish(
    loaded: LoadedScenario,
    folder: RunFolder,
    document: dict[str, Any],
    records: list[dict[str, Any]],
) -> RunOutcome:
    scenario = loaded.scenario
    files = document["files"]
    files["jobs"] = folder.write_jobs(records).name
    jobs = with_timestamps(pd.DataFrame.from_records(records))
    summary = summarize(jobs)
    files["summary"] = folder.write("summary.csv", summary.to_csv(index=False)).name
    reference = reference_table(summary, scenario.reference.figures) if scenario.reference else None
    source = scenario.reference.source if scenario.reference else None
    markdown = summary_markdown(f"{scenario.name}: {folder.run_id}", summary, reference, source)
    files["summary_md"] = folder.write("summary.md", markdown).name
    files["wait_plot"] = folder.write("waits.png", wait_plot(jobs)).name
    files["timeline_plot"] = folder.write("timeline.png", timeline_plot(jobs)).name
    document.update(status="complete", finished_at=_utc_now())
    folder.write_json("run.json", document, replace=True)
    return RunOutcome(folder=folder, summary=summary, reference=reference, reference_source=source)


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
