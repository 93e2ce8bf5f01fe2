"""`harness check`: the probes against the baseline; the exit code says if it regressed."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.check.baseline import Baseline, baseline_document, read_baseline, refuse_other_major
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
from harness.server.builds import DEFAULT_MAJOR
from harness.server.kinds import ProviderChoice
from harness.server.provenance import collect_all
from harness.server.providers import open_server, server_major
from harness.server.schema import own_schema
from harness.shipped import CHECK_PROBES, check_baseline, default_file

PROBES = Path("scenarios") / f"{CHECK_PROBES}.yaml"


def baseline_file(major: int) -> Path:
    """Where a checkout keeps the baseline of a major: baselines/dequeue-pg<major>.json."""
    return Path("baselines") / check_baseline(major)


@dataclass(frozen=True)
class CheckRequest:
    baseline: Path | None  # None: each major's own (check_paths)
    probes: Path
    settings: CheckSettings
    update_baseline: bool = False
    markdown: Path | None = None
    junit: Path | None = None


def check_paths(
    baseline: Path | None, probes: Path | None, update_baseline: bool, major: int = DEFAULT_MAJOR
) -> tuple[Path, Path]:
    """The baseline (of the server's major) and the probes: as given, else those of the
    current folder (a checkout), else the shipped ones. A new baseline is written to the
    current folder, never into the installed package."""
    if baseline is None:
        default = baseline_file(major)
        baseline = default if update_baseline else default_file(default, "baselines")
    return baseline, probes or default_file(PROBES, "scenarios")


def check_command(
    request: CheckRequest, choice: ProviderChoice, strategies_dir: Path | None, console: Console
) -> int:
    """Measure the probes on each server of `choice` in turn, each against the baseline
    of its major; the exit code says if any regressed."""
    strategies = load_strategies(strategies_dir)
    probes = load_scenario(request.probes, {n: s.traits for n, s in strategies.items()})
    if request.baseline is not None and len(choice.targets) > 1:
        raise HarnessError(
            "--baseline names one major's baseline; with several --pg-version majors, leave "
            "it out: each is checked against baselines/dequeue-pg<major>.json"
        )
    servers = choice.each()
    checks = [_one_major(request, one.target.major) for one in servers]
    # Every baseline is read, and refused if need be, before the first server starts.
    olds = [
        _old_baseline(check, probes, console, one.target.major)
        for check, one in zip(checks, servers, strict=True)
    ]
    codes = [
        _check_on(check, old, probes, strategies, one, console)
        for check, old, one in zip(checks, olds, servers, strict=True)
    ]
    return max(codes)


def _one_major(request: CheckRequest, major: int) -> CheckRequest:
    """The request for one major: its own baseline unless one is given."""
    baseline, _ = check_paths(request.baseline, request.probes, request.update_baseline, major)
    return replace(request, baseline=baseline)


def _check_on(
    request: CheckRequest,
    old: Baseline | None,
    probes: LoadedScenario,
    strategies: dict[str, Strategy],
    choice: ProviderChoice,
    console: Console,
) -> int:
    """The probes on one server against the baseline of its major."""
    assert request.baseline is not None
    console.print(choice.starting, highlight=False)
    started = time.monotonic()
    measured, metadata = _measure_probes(choice, probes, strategies, request, old, console)
    findings = compare(old.probes, measured, request.settings) if old is not None else []
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
    old: Baseline | None,
    console: Console,
) -> tuple[list[Probe], dict[str, Any]]:
    schema = f"harness_check_{os.getpid()}"
    with open_server(choice) as server:
        if old is not None and choice.allow_version_mismatch:  # another major than asked
            major = server_major(server.dsn)
            refuse_other_major(request.baseline or Path(), old, major, _shipped(major))
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
    request: CheckRequest, probes: LoadedScenario, console: Console, major: int
) -> Baseline | None:
    """The baseline to compare with, of the major asked for; when updating, one that
    cannot be compared is only reported, since replacing it is the point."""
    assert request.baseline is not None
    if not request.update_baseline:
        baseline = read_baseline(request.baseline, probes)
        refuse_other_major(request.baseline, baseline, major, _shipped(major))
        return baseline
    if not request.baseline.exists():
        return None
    try:
        baseline = read_baseline(request.baseline, probes)
        refuse_other_major(request.baseline, baseline, major, None)
        return baseline
    except HarnessError as error:
        console.print(f"The old baseline is not comparable: {error}", highlight=False)
        return None


def _shipped(major: int) -> Path | None:
    """The baseline of `major` the harness has: the checkout's, else the shipped one."""
    found = default_file(baseline_file(major), "baselines")
    return found if found.is_file() else None


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
