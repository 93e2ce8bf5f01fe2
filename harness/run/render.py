"""Every derived file of a run folder, rebuilt from its raw files alone.

Raw and derived files are listed in harness/results/contract.py (and
docs/results-format.md). A render reads the raw ones, derives every table with the pure
analysis of each feature, writes the derived tables, summary.md, the plots and
report.html from the features' sections, and records what it wrote in run.json. The
ideal schedule is simulated again from the scenario (its seed) and the strategies'
policies recorded in run.json. A run folder made by an older harness renders again with
a newer one (`harness report RUN_DIR`); the same raw files give the same tables.

A run on several PostgreSQL majors is analysed major by major, as if each were a run of
its own; the derived tables stack them, each row naming its major (`pg_version`), and
the report puts the majors side by side first (harness/analysis/majors.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from harness.analysis.bloat import (
    bloat_section,
    bloat_summary,
    claim_buckets,
    hold_windows,
    samples_on_clock,
    windows_on_clock,
)
from harness.analysis.calibration import Calibration, CalibrationDocument
from harness.analysis.fairness import fairness_section, repetition_fairness, tenant_table
from harness.analysis.faults import (
    fault_table,
    faults_section,
    library_fault_table,
    library_faults_section,
    missed_faults,
    missed_library_faults,
    recovery_waits,
)
from harness.analysis.headline import run_headline
from harness.analysis.horizon import horizon_drift, horizon_section, horizon_windows
from harness.analysis.ideal import ideal_section, ideal_summary, run_calibration, versus_ideal
from harness.analysis.idle import idle_section, idle_table
from harness.analysis.majors import majors_section, stack
from harness.analysis.mappings import mapping_table, mappings_section
from harness.analysis.plans import Capture, plan_runs, plans_section, plans_summary
from harness.analysis.properties import (
    MONITOR_COLUMNS,
    properties_section,
    property_summary,
    property_table,
)
from harness.analysis.reference import reference_section, reference_table
from harness.analysis.stats import stability_line
from harness.analysis.thresholds import failed_lines, threshold_section, threshold_table
from harness.analysis.throughput import throughput_section, throughput_table
from harness.analysis.waits import (
    backlog_over_run,
    claim_note,
    claims_over_time,
    summarize,
    summary_section,
    waits_over_run,
    waits_verdict,
    with_waits,
)
from harness.report.html import VERDICT, Page, report_html
from harness.report.sections import Section, markdown
from harness.results.contract import listed
from harness.results.document import (
    CutEntry,
    PlanEntry,
    RepetitionEntry,
    RunDocument,
    load_document,
    queue_settings,
    unlike_the_scenario,
)
from harness.results.folder import RunFolder
from harness.results.headline import Results, results_document
from harness.results.jobs import PG, load_jobs, read_versioned_csv
from harness.results.versioned import read_capped
from harness.scenario.model import Scenario
from harness.scenario.parse import MAX_BYTES as SCENARIO_BYTES
from harness.scenario.thresholds import Threshold, parse_threshold
from harness.scenario.workload import generate, tenant_owners

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BLOAT_BUCKET_S = 0.5
# Each plot's title in the report.
PLOT_TITLES = {
    "waits_over_time": "Waits over the run: p50 and p95 wait per tenant class",
    "backlog": "Backlog draining: each tenant class's jobs still queued over the run",
    "claim_latency": "Claim latency over the run: p50 and p95 by when the job started",
    "waits": "Waits: distribution per tenant class (ECDF)",
    "timeline": "Timeline: which tenant class each worker served",
    "tenant_share": "Each tenant's share of completed jobs over time",
    "scaling": "Worker sweep: waits and throughput against the worker count",
    "plans": "Dequeue plans: time and buffers per variant",
    "bloat": "Long transaction: claim latency and dead tuples over time (repetition 1)",
    "horizon": "Horizon: dead tuples, size, p99 wait and fetch buffers over time (repetition 1)",
}

# The plots of the report's first screen, in this order, under the verdict.
LEAD_PLOTS = ("waits_over_time", "backlog", "waits", "claim_latency")


@dataclass(frozen=True)
class RawRun:
    """A run folder's raw files, read."""

    folder: RunFolder
    document: RunDocument
    scenario: Scenario
    scenario_yaml: str
    jobs: pd.DataFrame | None  # jobs.csv, timestamps parsed; None without a timed run
    captures: list[Capture]
    monitor: pd.DataFrame  # monitor.csv, empty where the strategies have no monitor
    bloat_samples: pd.DataFrame | None  # bloat.csv, with a long transaction
    fetch_plans: pd.DataFrame | None = None  # fetch-plans.csv, with explain_fetches
    horizon_series: pd.DataFrame | None = None  # horizon.csv, with a horizon

    @property
    def versions(self) -> list[str]:
        """The servers' versions, in the order the run ran on them."""
        return self.document.pg_versions or [""]

    def of_version(self, version: str) -> RawRun:
        """What the run measured on the server of `version`: a run of its own."""

        def rows(frame: pd.DataFrame) -> pd.DataFrame:
            return frame[frame[PG] == version].drop(columns=PG).reset_index(drop=True)

        document = self.document.model_copy(
            update={
                "repetitions": [e for e in self.document.repetitions if _on(e, version)],
                "plans": [e for e in self.document.plans if _on(e, version)],
                "cut": self.document.cut if _on(self.document.cut, version) else None,
            }
        )
        return replace(
            self,
            document=document,
            jobs=rows(self.jobs) if self.jobs is not None else None,
            captures=[c for c in self.captures if c.pg_version == version],
            monitor=rows(self.monitor),
            bloat_samples=rows(self.bloat_samples) if self.bloat_samples is not None else None,
            fetch_plans=rows(self.fetch_plans) if self.fetch_plans is not None else None,
            horizon_series=(rows(self.horizon_series) if self.horizon_series is not None else None),
        )


def _on(entry: RepetitionEntry | PlanEntry | CutEntry | None, version: str) -> bool:
    return entry is not None and (entry.pg_version or "") == version


@dataclass(frozen=True)
class RunTables:
    """The analysed tables of a run: what the derived files hold."""

    summary: pd.DataFrame | None = None  # summary.csv
    throughput: pd.DataFrame | None = None  # throughput.csv: a drained backlog's
    tenants: pd.DataFrame | None = None  # tenants.csv
    fairness: pd.DataFrame | None = None  # fairness.csv: per repetition
    ideal: pd.DataFrame | None = None  # ideal.csv
    runs: pd.DataFrame | None = None  # plans.csv: one row per captured execution
    plans: pd.DataFrame | None = None  # medians per capture (the report's plan table)
    reference: pd.DataFrame | None = None
    property_runs: pd.DataFrame | None = None  # properties.csv: per repetition
    properties: pd.DataFrame | None = None  # worst repetition per check
    faults: pd.DataFrame | None = None  # faults.csv
    library_faults: pd.DataFrame | None = None  # library-faults.csv
    recovery_waits: pd.DataFrame | None = None  # recovery-waits.csv: waits around each kill
    bloat: pd.DataFrame | None = None  # bloat-summary.csv
    horizon_windows: pd.DataFrame | None = None  # horizon-windows.csv
    horizon_drift: pd.DataFrame | None = None  # horizon-drift.csv
    thresholds: pd.DataFrame | None = None  # thresholds.csv
    idle: pd.DataFrame | None = None  # idle.csv: an idle window's polls
    mappings: pd.DataFrame | None = None  # mappings.csv: the others' waits, the flood's price
    calibration: Calibration | None = None  # calibration.json: the costs of ideal.csv's costed

    def files(self) -> list[tuple[str, str, pd.DataFrame | None]]:
        """(run.json key, file name, table) of every derived table."""
        return [
            ("summary", "summary.csv", self.summary),
            ("throughput", "throughput.csv", self.throughput),
            ("tenants", "tenants.csv", self.tenants),
            ("fairness", "fairness.csv", self.fairness),
            ("ideal", "ideal.csv", self.ideal),
            ("plans", "plans.csv", self.runs),
            ("properties", "properties.csv", self.property_runs),
            ("faults", "faults.csv", self.faults),
            ("library_faults", "library-faults.csv", self.library_faults),
            ("recovery_waits", "recovery-waits.csv", self.recovery_waits),
            ("bloat_summary", "bloat-summary.csv", self.bloat),
            ("horizon_windows", "horizon-windows.csv", self.horizon_windows),
            ("horizon_drift", "horizon-drift.csv", self.horizon_drift),
            ("thresholds", "thresholds.csv", self.thresholds),
            ("idle", "idle.csv", self.idle),
            ("mappings", "mappings.csv", self.mappings),
        ]

    @staticmethod
    def stacked(parts: list[tuple[str, RunTables]]) -> RunTables:
        """Each major's tables, one after the other, each row naming its major; the
        calibration of a run of one major only (each major costs differently)."""
        tables = {
            f.name: stack([(version, getattr(part, f.name)) for version, part in parts])
            for f in fields(RunTables)
            if f.name != "calibration"
        }
        calibration = parts[0][1].calibration if len(parts) == 1 else None
        return RunTables(**tables, calibration=calibration)


@dataclass(frozen=True)
class Rendered:
    folder: RunFolder
    document: RunDocument
    tables: RunTables
    sections: list[Section]
    notes: tuple[str, ...] = ()  # what the run says beside its figures: a schema it left

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

    @property
    def failed_thresholds(self) -> list[str]:
        """A line per threshold not kept (on any major), with what was measured."""
        table = self.tables.thresholds
        return failed_lines(table) if table is not None else []


def render_run(folder: RunFolder, *, plots: bool = True) -> Rendered:
    """Read the raw files, write every derived one (replacing what a render made before);
    without `plots`, every one but the figures (the report has none)."""
    raw = read_raw(folder)
    parts = [(version, derive(raw.of_version(version))) for version in raw.versions]
    tables = RunTables.stacked(parts)
    sections = run_sections(raw, parts, tables)
    write = _writer(folder, raw.document.files)
    for key, name, table in tables.files():
        if table is not None:
            write(key, name, with_run_id(table, raw.document.run_id).to_csv(index=False))
    write("results", Results.NAME, headline(raw, parts).dumps())
    if tables.calibration is not None:
        calibration = CalibrationDocument.of(tables.calibration)
        write("calibration", calibration.NAME, calibration.dumps())
    write("summary_md", "summary.md", markdown(_title(raw), sections))
    encoded = _drawn(raw, parts) if plots else {}
    for name, forms in encoded.items():
        for form, data in forms.items():
            write(f"{name}_{form}", f"{name}.{form}", data)
    pngs = {name: forms["png"] for name, forms in encoded.items()}
    drawn = "" if plots else f"Figures not drawn: harness report {folder.path} draws them."
    write("report", "report.html", report_html(_page(raw, sections, pngs, drawn)))
    folder.write("run.json", raw.document.dumps(), replace=True)
    return Rendered(folder, raw.document, tables, sections)


def _drawn(raw: RawRun, parts: list[tuple[str, RunTables]]) -> dict[str, dict[str, bytes]]:
    """Each figure of the run, per major, as its images (PNG and SVG). matplotlib is
    loaded here only: a run or a report without figures (--no-plots) does without it
    (0.4 s of every such harness process)."""
    from harness.report.plots import images

    return {
        _plot_name(name, version, len(parts)): images(figure)
        for version, part in parts
        for name, figure in run_figures(raw.of_version(version), part).items()
    }


def _plot_name(name: str, version: str, majors: int) -> str:
    """A plot's name; in a run of several majors, one per major: waits-pg15."""
    return f"{name}-pg{version.split('.')[0]}" if majors > 1 else name


def with_run_id(table: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """A derived table as its CSV holds it: the run's id first, so that the tables of many
    runs concatenated still say where each row came from."""
    return pd.concat([pd.Series(run_id, index=table.index, name="run_id"), table], axis=1)


def headline(raw: RawRun, parts: list[tuple[str, RunTables]]) -> Results:
    """results.json: the run's headline figures, its id, commit and host; in a run of
    several majors, each major's figures, named with its version."""
    document = raw.document
    return results_document(
        run_id=document.run_id,
        kind="run" if document.options.get("timed", True) and raw.scenario.timed else "explain",
        name=raw.scenario.name,
        status=document.status,
        started_at=document.started_at,
        metadata=document.metadata,
        figures=[
            figure
            for version, part in parts
            for figure in run_headline(
                _on_major(raw.scenario.name, version, len(parts)),
                part.summary,
                part.runs,
                raw.scenario.reference,
                part.bloat,
                part.horizon_drift,
                part.mappings,
                part.idle,
            )
        ],
    )


def _on_major(name: str, version: str, majors: int) -> str:
    return f"{name} on PostgreSQL {version}" if majors > 1 else name


def read_raw(folder: RunFolder) -> RawRun:
    path = folder.path
    document = load_document(path)
    scenario_yaml = read_capped(path / "scenario.yaml", "a scenario", SCENARIO_BYTES).decode()
    scenario = Scenario.model_validate(yaml.safe_load(scenario_yaml))
    monitor_path, bloat_path = path / "monitor.csv", path / "bloat.csv"
    fetches_path, horizon_path = path / "fetch-plans.csv", path / "horizon.csv"
    on_servers = partial(on_server, document=document)
    return RawRun(
        folder=folder,
        document=document,
        scenario=scenario,
        scenario_yaml=scenario_yaml,
        jobs=on_servers(load_jobs(path)) if (path / "jobs.csv").exists() else None,
        captures=load_captures(path, document),
        monitor=on_servers(
            read_versioned_csv(monitor_path)
            if monitor_path.exists()
            else pd.DataFrame(columns=[*MONITOR_COLUMNS, PG])
        ),
        bloat_samples=on_servers(read_versioned_csv(bloat_path)) if bloat_path.exists() else None,
        fetch_plans=on_servers(read_versioned_csv(fetches_path)) if fetches_path.exists() else None,
        horizon_series=(
            on_servers(read_versioned_csv(horizon_path)) if horizon_path.exists() else None
        ),
    )


def on_server(frame: pd.DataFrame, document: RunDocument) -> pd.DataFrame:
    """Rows of a run of one server that name none (before format 3) name it."""
    versions = document.pg_versions
    if len(versions) == 1:
        frame = frame.assign(**{PG: frame[PG].replace("", versions[0])})
    return frame


def derive(raw: RawRun) -> RunTables:
    """Every table of a run on one server, each by its feature's pure analysis."""
    jobs = raw.jobs if raw.jobs is not None and len(raw.jobs) else None
    owners = tenant_owners(raw.scenario)
    tenants = tenant_table(with_waits(jobs), owners) if jobs is not None else None
    summary = summarize(jobs, tenants) if jobs is not None else None
    runs = plan_runs(raw.captures) if raw.captures else None
    property_runs = _property_runs(raw, jobs)
    ideal, calibration = _versus_ideal(raw, jobs, summary)
    drained = raw.scenario.backlog is not None and raw.scenario.backlog.drain
    fairness = repetition_fairness(tenants) if tenants is not None else None
    idle = idle_table(raw.document)
    return RunTables(
        summary=summary,
        throughput=throughput_table(jobs) if jobs is not None and drained else None,
        tenants=tenants,
        fairness=fairness,
        ideal=ideal,
        runs=runs,
        plans=plans_summary(runs, raw.captures) if runs is not None else None,
        reference=_reference(raw, summary, runs),
        property_runs=property_runs,
        properties=property_summary(property_runs) if property_runs is not None else None,
        faults=fault_table(raw.document),
        library_faults=library_fault_table(raw.document),
        recovery_waits=recovery_waits(raw.document, jobs),
        bloat=_bloat_summary(raw, jobs),
        **_horizon_tables(raw, jobs),
        thresholds=_thresholds(raw, summary, runs),
        idle=idle,
        mappings=(
            mapping_table(jobs, fairness, idle)
            if jobs is not None and raw.scenario.report.mappings
            else None
        ),
        calibration=calibration,
    )


def run_sections(
    raw: RawRun, parts: list[tuple[str, RunTables]], tables: RunTables
) -> list[Section]:
    """The report's sections: a run of one major as ever; of several, the majors side by
    side first, then each major's sections, titled with its version."""
    if len(parts) == 1:
        version, only = parts[0]
        return feature_sections(raw.of_version(version), only)
    across = majors_section(
        [version for version, _ in parts],
        tables.reference,
        tables.runs,
        tables.plans,
        tables.summary,
    )
    across = replace(across, key=VERDICT)  # the page opens with it
    return [
        across,
        *(
            _of_major(section, version)
            for version, part in parts
            for section in feature_sections(raw.of_version(version), part)
        ),
    ]


# What the terminal shows side by side (majors_section) rather than major by major; each
# major's verdict stays, since the side-by-side reference figures carry no verdict.
_SIDE_BY_SIDE = frozenset({"waits", "plans"})


def _of_major(section: Section, version: str) -> Section:
    """A section of one major's measurements, titled with its version."""
    console = [] if section.key in _SIDE_BY_SIDE else section.console
    return replace(
        section,
        key=f"{section.key}-pg{version.split('.')[0]}",
        title=f"{section.title}: PostgreSQL {version}",
        headline=f"PostgreSQL {version}: {section.headline}" if section.headline else "",
        console=[replace(table, title=f"{table.title}: PostgreSQL {version}") for table in console],
    )


def feature_sections(raw: RawRun, tables: RunTables) -> list[Section]:
    """The sections of a run on one server, in reading order; each feature writes its own."""
    sections = _verdict(raw, tables)
    settings = queue_settings(raw.document)
    if tables.throughput is not None:
        sections.append(throughput_section(tables.throughput, settings))
    if tables.summary is not None:
        warnings = unlike_the_scenario(raw.document)
        sections.append(summary_section(tables.summary, warnings, settings))
        sections.append(fairness_section(tables.summary, tables.fairness))
    if tables.mappings is not None:
        sections.append(mappings_section(tables.mappings, settings))
    if tables.idle is not None:
        sections.append(idle_section(tables.idle, settings))
    if tables.ideal is not None and len(tables.ideal):
        sections.append(ideal_section(tables.ideal))
    if tables.plans is not None:
        sections.append(plans_section(tables.plans))
    if tables.properties is not None:
        sections.append(properties_section(tables.properties))
    if tables.faults is not None:
        sections.append(faults_section(tables.faults, missed_faults(raw.document, raw.scenario)))
    if tables.library_faults is not None:
        missed = missed_library_faults(raw.document, raw.scenario)
        sections.append(
            library_faults_section(tables.library_faults, missed, tables.recovery_waits)
        )
    if tables.bloat is not None:
        sections.append(bloat_section(tables.bloat))
    if tables.horizon_drift is not None:
        sections.append(horizon_section(tables.horizon_drift))
    if tables.thresholds is not None:
        sections.insert(1 if sections else 0, threshold_section(tables.thresholds))
    return sections


def _verdict(raw: RawRun, tables: RunTables) -> list[Section]:
    """The answer first: each reference figure against its range, or without a reference
    the median waits; the claim latency where the scenario is about it."""
    reference, summary = raw.scenario.reference, tables.summary
    notes = []
    if raw.scenario.report.claim_latency and summary is not None:
        notes.append(claim_note(summary))
    if reference is not None and tables.reference is not None and len(tables.reference):
        section = reference_section(tables.reference, reference.source, reference.tolerance, notes)
        return [_with_stability(section, raw, tables.reference)]
    if summary is None:
        return []
    return [_with_stability(waits_verdict(summary, notes), raw, None)]


def _with_stability(section: Section, raw: RawRun, reference: pd.DataFrame | None) -> Section:
    """The verdict with pyperf's warning first where its figures spread 10 % or more
    over repetitions, or the machine was loaded past its cores as the run started."""
    host = raw.document.metadata.get("host") or {}
    load = host.get("load_average")
    spreads = (
        dict(zip(reference["figure"], reference["spread"], strict=True))
        if reference is not None and "spread" in reference
        else {}
    )
    line = stability_line(spreads, load[0] if load else None, host.get("cpu_count"))
    return replace(section, warnings=[line, *section.warnings]) if line else section


def run_figures(raw: RawRun, tables: RunTables) -> dict[str, Figure]:
    from harness.analysis.figures import (
        backlog_draining,
        bloat_over_time,
        claim_latency,
        horizon_over_time,
        plans_chart,
        scaling,
        tenant_share,
        timeline,
        wait_ecdf,
        waits_over_time,
    )

    plots: dict[str, Figure] = {}
    jobs = raw.jobs
    if jobs is not None and len(jobs):
        plots["waits_over_time"] = waits_over_time(*waits_over_run(jobs))
        plots["backlog"] = backlog_draining(backlog_over_run(jobs))
        plots["waits"] = wait_ecdf(jobs)
        if raw.scenario.report.claim_latency and jobs["claim_ms"].notna().any():
            plots["claim_latency"] = claim_latency(claims_over_time(jobs))
        plots["timeline"] = timeline(jobs)
        plots["tenant_share"] = tenant_share(jobs)
    if tables.summary is not None and tables.summary["workers"].nunique() > 1:
        plots["scaling"] = scaling(tables.summary)
    if tables.plans is not None and (tables.plans["skipped"] == "").any():
        plots["plans"] = plans_chart(tables.plans)
    if tables.bloat is not None and jobs is not None and raw.bloat_samples is not None:
        windows = hold_windows(raw.document)
        plots["bloat"] = bloat_over_time(
            claim_buckets(jobs, BLOAT_BUCKET_S),
            samples_on_clock(raw.bloat_samples, jobs),
            windows_on_clock(windows, jobs),
        )
    horizon = raw.scenario.horizon
    if horizon is not None and tables.horizon_windows is not None:
        assert raw.horizon_series is not None
        plots["horizon"] = horizon_over_time(
            raw.horizon_series,
            tables.horizon_windows,
            raw.fetch_plans,
            horizon.phases,
            horizon.window_s,
            _first_cut(raw),
        )
    return plots


def _first_cut(raw: RawRun) -> dict[tuple[Any, Any], float]:
    """The strategies and workers whose repetition 1 was cut, and when (_cuts)."""
    assert raw.horizon_series is not None
    cuts = _cuts(raw.document, raw.horizon_series)
    return {(strategy, workers): t_s for (strategy, workers, rep), t_s in cuts.items() if rep == 1}


def _title(raw: RawRun) -> str:
    return f"{raw.scenario.name}: {raw.document.run_id}"


def _page(
    raw: RawRun, sections: list[Section], plots: dict[str, bytes], no_figures: str = ""
) -> Page:
    """The report's page; `plots`: each plot's PNG, as its file has it; `no_figures`: why
    it has none."""
    return Page(
        title=f"{raw.scenario.name} — {raw.document.run_id}",
        description=raw.scenario.description,
        document=raw.document,
        sections=sections,
        lead_plots=[(_plot_title(name), plots[name]) for name in _lead(plots)],
        plots=[(_plot_title(name), png) for name, png in plots.items() if name not in _lead(plots)],
        folded=[
            (_capture_label(capture, len(raw.versions)), capture.text)
            for capture in raw.captures
            if capture.skipped is None
        ],
        scenario_yaml=raw.scenario_yaml,
        no_figures=no_figures,
    )


def _plot_title(name: str) -> str:
    """waits -> its title; waits-pg15 -> its title, on PostgreSQL 15."""
    plot, _, major = name.partition("-pg")
    title = PLOT_TITLES.get(plot, plot)
    return f"{title}: PostgreSQL {major}" if major else title


def _lead(plots: dict[str, bytes]) -> list[str]:
    """The first screen's plots in LEAD_PLOTS's order; in a run of several majors, each
    of them on every major (waits_over_time-pg15, waits_over_time-pg18, waits-pg15, ...)."""
    return [name for lead in LEAD_PLOTS for name in plots if name.partition("-pg")[0] == lead]


def _capture_label(capture: Capture, majors: int) -> str:
    label = f"{capture.variant} / {capture.strategy}"
    return f"PostgreSQL {capture.pg_version}: {label}" if majors > 1 else label


def _versus_ideal(
    raw: RawRun, jobs: pd.DataFrame | None, summary: pd.DataFrame | None
) -> tuple[pd.DataFrame | None, Calibration | None]:
    """Measured / ideal, and the run's calibration that costs the costed ideal, if the run
    recorded its strategies' simulation policies."""
    policies = raw.document.simulation
    if not policies or jobs is None or summary is None:
        return None, None
    workload = generate(raw.scenario)  # drawn once for both schedules
    ideal = ideal_summary(raw.scenario, policies, workload=workload)
    if ideal.empty:
        return None, None
    repetitions = [entry.model_dump() for entry in raw.document.repetitions]
    calibration = run_calibration(raw.scenario, policies, jobs, repetitions)
    costed = ideal_summary(raw.scenario, policies, calibration, workload)
    return versus_ideal(summary, ideal, costed), calibration


def _property_runs(raw: RawRun, jobs: pd.DataFrame | None) -> pd.DataFrame | None:
    if not raw.scenario.checks or jobs is None:
        return None
    return property_table(jobs, raw.monitor, raw.scenario)


def _reference(
    raw: RawRun, summary: pd.DataFrame | None, runs: pd.DataFrame | None
) -> pd.DataFrame | None:
    if raw.scenario.reference is None:
        return None
    reference = raw.scenario.reference
    return reference_table(reference.figures, summary, runs, reference.tolerance)


def run_thresholds(raw: RawRun) -> list[Threshold]:
    """The scenario's thresholds, then those of the command line (run.json's options)."""
    given = raw.document.options.get("thresholds") or []
    return [parse_threshold(text) for text in [*raw.scenario.thresholds, *given]]


def _thresholds(
    raw: RawRun, summary: pd.DataFrame | None, runs: pd.DataFrame | None
) -> pd.DataFrame | None:
    thresholds = run_thresholds(raw)
    return threshold_table(thresholds, summary, runs) if thresholds else None


def _bloat_summary(raw: RawRun, jobs: pd.DataFrame | None) -> pd.DataFrame | None:
    windows = hold_windows(raw.document)
    if jobs is None or raw.bloat_samples is None or windows.empty:
        return None
    return bloat_summary(jobs, raw.bloat_samples, windows, raw.fetch_plans)


def _horizon_tables(raw: RawRun, jobs: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """A horizon's windows and drift (harness/analysis/horizon.py)."""
    horizon, series = raw.scenario.horizon, raw.horizon_series
    if horizon is None or series is None or series.empty:
        return {}
    seed = raw.scenario.seed
    return {
        "horizon_windows": horizon_windows(jobs, horizon),
        "horizon_drift": horizon_drift(
            jobs, series, raw.fetch_plans, horizon, seed, _cuts(raw.document, series)
        ),
    }


def _cuts(document: RunDocument, series: pd.DataFrame) -> dict[tuple[Any, ...], float]:
    """Each repetition sampled but not finished (none in run.json's `repetitions`), and
    its latest sample: run.json's `cut`, or a run killed outright, whose run.json still
    says `running` and names none."""
    finished = {(e.strategy, e.workers, e.repetition) for e in document.repetitions}
    last = series.groupby(["strategy", "workers", "repetition"], sort=False)["t_s"].max()
    return {
        (str(strategy), int(workers), int(repetition)): float(t_s)
        for (strategy, workers, repetition), t_s in zip(last.index, last, strict=True)
        if (str(strategy), int(workers), int(repetition)) not in finished
    }


def _writer(folder: RunFolder, files: dict[str, str]) -> Callable[[str, str, str | bytes], None]:
    def write(key: str, name: str, data: str | bytes) -> None:
        files[key] = folder.write(listed(name, "derived"), data, replace=True).name

    return write


def load_captures(run: Path, document: RunDocument) -> list[Capture]:
    """The plan captures of a run folder: explain/*.json, and run.json for skipped ones."""
    captures = []
    for entry in document.plans:
        if entry.skipped:
            captures.append(
                Capture(
                    entry.variant,
                    entry.strategy,
                    entry.backlog,
                    skipped=entry.skipped,
                    pg_version=entry.pg_version or "",
                )
            )
            continue
        stem = run / document.capture_stem(entry)
        saved = json.loads(read_capped(stem.with_suffix(".json"), "a plan capture"))
        captures.append(
            Capture(
                saved["variant"],
                saved["strategy"],
                saved["backlog"],
                plans=saved["plans"],
                text=read_capped(stem.with_suffix(".txt"), "a plan capture").decode(),
                load_s=saved.get("load_s"),
                pg_version=entry.pg_version or "",
            )
        )
    return captures
