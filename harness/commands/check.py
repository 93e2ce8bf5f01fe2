"""`harness check`: the probes against the baseline; the exit code says if it regressed."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.check.baseline import baseline_document, read_baseline
from harness.check.probes import measure
from harness.check.verdict import CheckSettings, Finding, Probe, compare, findings_rows, junit_xml
from harness.commands.progress import ProgressBars
from harness.errors import HarnessError
from harness.queues.base import Site
from harness.queues.sql.strategies import Strategy, load_strategies
from harness.report.console import console_table
from harness.report.sections import markdown_table
from harness.results.folder import atomic_write
from harness.run.captures import requests
from harness.scenario.loader import LoadedScenario, load_scenario
from harness.server.kinds import ProviderChoice
from harness.server.provenance import collect_all
from harness.server.providers import choose_provider, open_server
from harness.server.schema import own_schema
from harness.shipped import CHECK_BASELINE, CHECK_PROBES, default_file

BASELINE = Path("baselines") / CHECK_BASELINE
PROBES = Path("scenarios") / f"{CHECK_PROBES}.yaml"


@dataclass(frozen=True)
class CheckRequest:
    baseline: Path
    probes: Path
    settings: CheckSettings
    update_baseline: bool = False
    markdown: Path | None = None
    junit: Path | None = None


def check_paths(
    baseline: Path | None, probes: Path | None, update_baseline: bool
) -> tuple[Path, Path]:
    """The baseline and the probes: as given, else those of the current folder (a
    checkout), else the shipped ones. A new baseline is written to the current folder,
    never into the installed package."""
    if baseline is None:
        baseline = BASELINE if update_baseline else default_file(BASELINE, "baselines")
    return baseline, probes or default_file(PROBES, "scenarios")


def check_command(
    request: CheckRequest,
    pg: str | None,
    dsn: str | None,
    allow_mismatch: bool,
    strategies_dir: Path | None,
    console: Console,
    image: str | None = None,
) -> int:
    """Measure the probes, compare with the baseline; the exit code says if it regressed."""
    strategies = load_strategies(strategies_dir)
    probes = load_scenario(request.probes, {n: s.traits for n, s in strategies.items()})
    old = _old_baseline(request, probes, console)
    choice = choose_provider(pg, dsn, os.environ, allow_mismatch, image=image)
    started = time.monotonic()
    measured, metadata = _measure_probes(choice, probes, strategies, request, console)
    findings = compare(old, measured, request.settings) if old is not None else []
    _show_findings(findings, request, console, time.monotonic() - started)
    if request.update_baseline:
        document = baseline_document(
            measured, request.settings, str(request.probes), probes.sha256, metadata
        )
        request.baseline.parent.mkdir(parents=True, exist_ok=True)
        document.write(request.baseline, replace=True)  # a new baseline replaces the old
        console.print(f"Baseline written: {request.baseline}", highlight=False)
        return 0
    return 1 if any(f.verdict == "regression" for f in findings) else 0


def _measure_probes(
    choice: ProviderChoice,
    probes: LoadedScenario,
    strategies: dict[str, Strategy],
    request: CheckRequest,
    console: Console,
) -> tuple[list[Probe], dict[str, Any]]:
    schema = f"harness_check_{os.getpid()}"
    with open_server(choice) as server:
        with (
            ProgressBars(console, len(requests(probes.scenario))) as bars,
            own_schema(server.dsn, schema) as owned,
        ):
            measured = list(
                measure(
                    Site(server.dsn, schema),
                    probes.scenario,
                    strategies,
                    request.settings.samples,
                    bars,
                )
            )
        if owned.left:
            console.print(f"warning: {owned.left}", highlight=False, markup=False)
        return measured, collect_all(server.dsn, {"kind": server.provider, **server.details})


def _old_baseline(
    request: CheckRequest, probes: LoadedScenario, console: Console
) -> list[Probe] | None:
    """The baseline to compare with; when updating, one that cannot be compared is only
    reported, since replacing it is the point."""
    if not request.update_baseline:
        return read_baseline(request.baseline, probes)
    if not request.baseline.exists():
        return None
    try:
        return read_baseline(request.baseline, probes)
    except HarnessError as error:
        console.print(f"The old baseline is not comparable: {error}", highlight=False)
        return None


def _show_findings(
    findings: list[Finding], request: CheckRequest, console: Console, seconds: float
) -> None:
    headers, rows = findings_rows(findings)
    if findings:
        console.print(console_table("Dequeue against the baseline", headers, rows))
    regressions = [f for f in findings if f.verdict == "regression"]
    for finding in regressions:
        console.print(
            f"REGRESSION: {finding.message}", highlight=False, markup=False, soft_wrap=True
        )
    verdict = f"{len(regressions)} regression(s)" if regressions else "no regression"
    console.print(
        f"harness check: {verdict} ({len(findings)} figures, {seconds:.0f} s)", highlight=False
    )
    if request.markdown is not None:
        lines = "".join(f"- REGRESSION: {finding.message}\n" for finding in regressions)
        text = f"## harness check: {verdict}\n\n{markdown_table(headers, rows)}\n{lines}"
        atomic_write(request.markdown, text.encode())
    if request.junit is not None:
        atomic_write(request.junit, junit_xml(findings))
