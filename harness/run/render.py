"""Every derived file of a run folder, rebuilt from its raw files alone.

Raw: run.json, scenario.yaml, jobs.csv, explain/<variant>/<strategy>.json and .txt.
Derived: summary.csv, tenants.csv, fairness.csv, ideal.csv, plans.csv, summary.md, the
plots (PNG and SVG) and report.html. The ideal schedule is simulated again from the
scenario (its seed) and the strategies' policies recorded in run.json.
A run folder made by an older harness can be rendered again by a newer one
(`harness report RUN_DIR`); the same raw files give the same tables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from matplotlib.figure import Figure

from harness.analysis.bloat import (
    bloat_summary,
    claim_buckets,
    hold_windows,
    samples_on_clock,
    windows_on_clock,
)
from harness.analysis.calibration import Calibration
from harness.analysis.fairness import repetition_fairness, tenant_table
from harness.analysis.ideal import ideal_summary, run_calibration, versus_ideal
from harness.analysis.plans import Capture
from harness.analysis.waits import (
    MONITOR_COLUMNS,
    plan_runs,
    plans_summary,
    property_summary,
    property_table,
    reference_table,
    summarize,
    with_waits,
)
from harness.report.html import report_html
from harness.report.plots import (
    FORMATS,
    bloat_over_time,
    encode,
    plans_chart,
    scaling,
    tenant_share,
    timeline,
    wait_ecdf,
)
from harness.report.tables import RunTables, summary_markdown
from harness.results.folder import RunFolder, load_jobs, load_run
from harness.run.faults import fault_table
from harness.scenario.model import Scenario
from harness.scenario.workload import generate


@dataclass(frozen=True)
class Rendered:
    folder: RunFolder
    document: dict[str, Any]
    tables: RunTables

    @property
    def report(self) -> Path:
        return self.folder.path / "report.html"

    @property
    def summary(self) -> pd.DataFrame | None:
        return self.tables.summary

    @property
    def plans(self) -> pd.DataFrame | None:
        return self.tables.plans

    @property
    def reference(self) -> pd.DataFrame | None:
        return self.tables.reference


def render_run(folder: RunFolder) -> Rendered:
    """Read the raw files, write every derived one (replacing what a render made before)."""
    document = load_run(folder.path)
    scenario = Scenario.model_validate(yaml.safe_load((folder.path / "scenario.yaml").read_text()))
    jobs = load_jobs(folder.path) if (folder.path / "jobs.csv").exists() else None
    captures = load_captures(folder.path, document)
    tenants = tenant_table(with_waits(jobs)) if jobs is not None and len(jobs) else None
    summary = summarize(jobs, tenants) if jobs is not None and tenants is not None else None
    fairness = repetition_fairness(tenants) if tenants is not None else None
    ideal, calibration = _versus_ideal(scenario, document, jobs, summary)
    properties = _properties(folder.path, jobs, scenario)
    runs = plan_runs(captures) if captures else None
    plans = plans_summary(runs, captures) if runs is not None else None
    reference = source = None
    if scenario.reference is not None:
        reference = reference_table(scenario.reference.figures, summary, runs)
        source = scenario.reference.source
    write = _writer(folder, document["files"])
    if summary is not None and tenants is not None and fairness is not None:
        write("summary", "summary.csv", summary.to_csv(index=False))
        write("tenants", "tenants.csv", tenants.to_csv(index=False))
        write("fairness", "fairness.csv", fairness.to_csv(index=False))
    if ideal is not None:
        write("ideal", "ideal.csv", ideal.to_csv(index=False))
    if calibration is not None:
        write("calibration", "calibration.json", json.dumps(calibration.to_dict(), indent=1))
    if runs is not None:
        write("plans", "plans.csv", runs.to_csv(index=False))
    if properties is not None:
        write("properties", "properties.csv", properties.to_csv(index=False))
    faults = fault_table(document)
    if faults is not None:
        write("faults", "faults.csv", faults.to_csv(index=False))
    bloat = _bloat(folder.path, document, jobs)
    if bloat is not None:
        write("bloat_summary", "bloat-summary.csv", bloat.summary.to_csv(index=False))
    tables = RunTables(
        summary,
        plans,
        reference,
        source,
        property_summary(properties) if properties is not None else None,
        fairness,
        ideal,
        faults,
        bloat.summary if bloat is not None else None,
    )
    write("summary_md", "summary.md", summary_markdown(f"{scenario.name}: {folder.run_id}", tables))
    plots = _plots(jobs, plans, summary)
    if bloat is not None and jobs is not None:
        plots["bloat"] = bloat.plot(jobs)
    for name, figure in plots.items():
        for form in FORMATS:
            write(f"{name}_{form}", f"{name}.{form}", encode(figure, form))
    pngs = {name: encode(figure, "png") for name, figure in plots.items()}
    html = report_html(folder.path, document, scenario, tables, pngs)
    write("report", "report.html", html)
    folder.write_json("run.json", document, replace=True)
    return Rendered(folder, document, tables)


def _versus_ideal(
    scenario: Scenario,
    document: dict[str, Any],
    jobs: pd.DataFrame | None,
    summary: pd.DataFrame | None,
) -> tuple[pd.DataFrame | None, Calibration | None]:
    """Measured / ideal, and the run's calibration that costs the costed ideal, if the run
    recorded its strategies' simulation policies."""
    policies = document.get("simulation")
    if not policies or jobs is None or summary is None:
        return None, None
    workload = generate(scenario)  # drawn once for both schedules
    ideal = ideal_summary(scenario, policies, workload=workload)
    if ideal.empty:
        return None, None
    repetitions = document.get("repetitions", [])
    calibration = run_calibration(scenario, policies, jobs, repetitions)
    costed = ideal_summary(scenario, policies, calibration, workload)
    return versus_ideal(summary, ideal, costed), calibration


def _properties(run: Path, jobs: pd.DataFrame | None, scenario: Scenario) -> pd.DataFrame | None:
    if not scenario.checks or jobs is None or jobs.empty:
        return None
    path = run / "monitor.csv"
    monitor = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=MONITOR_COLUMNS)
    return property_table(jobs, monitor, scenario)


@dataclass(frozen=True)
class _Bloat:
    """A long transaction's raw samples and holds, and the summary made from them."""

    samples: pd.DataFrame
    windows: pd.DataFrame
    summary: pd.DataFrame

    def plot(self, jobs: pd.DataFrame) -> Figure:
        return bloat_over_time(
            claim_buckets(jobs, BLOAT_BUCKET_S),
            samples_on_clock(self.samples, jobs),
            windows_on_clock(self.windows, jobs),
        )


BLOAT_BUCKET_S = 0.5


def _bloat(run: Path, document: dict[str, Any], jobs: pd.DataFrame | None) -> _Bloat | None:
    path = run / "bloat.csv"
    windows = hold_windows(document)
    if jobs is None or jobs.empty or not path.exists() or windows.empty:
        return None
    samples = pd.read_csv(path)
    return _Bloat(samples, windows, bloat_summary(jobs, samples, windows))


def _writer(folder: RunFolder, files: dict[str, str]):  # type: ignore[no-untyped-def]
    def write(key: str, name: str, data: str | bytes) -> None:
        files[key] = folder.write(name, data, replace=True).name

    return write


def _plots(
    jobs: pd.DataFrame | None, plans: pd.DataFrame | None, summary: pd.DataFrame | None
) -> dict[str, Figure]:
    plots = {}
    if jobs is not None and len(jobs):
        plots["waits"] = wait_ecdf(jobs)
        plots["timeline"] = timeline(jobs)
        plots["tenant_share"] = tenant_share(jobs)
    if summary is not None and summary["workers"].nunique() > 1:
        plots["scaling"] = scaling(summary)
    if plans is not None and (plans["skipped"] == "").any():
        plots["plans"] = plans_chart(plans)
    return plots


def load_captures(run: Path, document: dict[str, Any]) -> list[Capture]:
    """The plan captures of a run folder: explain/*.json, and run.json for skipped ones."""
    captures = []
    for entry in document.get("plans", []):
        if entry.get("skipped"):
            captures.append(
                Capture(
                    entry["variant"], entry["strategy"], entry["backlog"], skipped=entry["skipped"]
                )
            )
            continue
        stem = run / "explain" / entry["variant"] / entry["strategy"]
        saved = json.loads(stem.with_suffix(".json").read_text())
        captures.append(
            Capture(
                saved["variant"],
                saved["strategy"],
                saved["backlog"],
                plans=saved["plans"],
                text=stem.with_suffix(".txt").read_text(),
                load_s=saved.get("load_s"),
            )
        )
    return captures
