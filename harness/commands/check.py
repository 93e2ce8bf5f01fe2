"""`harness check`: the probes against the baseline; the exit code says if it regressed.

Whatever the exit code, `--markdown` and `--junit` are written (a check that could not
run says why, so a CI job summary is never empty), and on GitHub Actions each regression
is also an error annotation. A check that measured keeps its samples in a run folder of
its own, `results/check/<run id>/`: results.json, and probes.json (the measured probes in
the baseline's format, usable as a baseline).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.check.baseline import Baseline, baseline_document, read_baseline
from harness.check.probes import measure
from harness.check.verdict import (
    CheckSettings,
    Finding,
    Probe,
    baseline_markdown,
    check_headline,
    check_markdown,
    compare,
    findings_rows,
    github_annotations,
    github_command,
    junit_xml,
    not_run_junit,
    not_run_markdown,
)
from harness.commands.progress import ProgressBars
from harness.errors import HarnessError
from harness.queues.base import Site
from harness.queues.sql.strategies import Strategy, load_strategies
from harness.report.console import console_table
from harness.results.folder import RunFolder, atomic_write, check_results_dir
from harness.results.headline import Results, results_document
from harness.run.captures import requests
from harness.scenario.loader import LoadedScenario, load_scenario
from harness.server.kinds import ProviderChoice
from harness.server.provenance import collect_all
from harness.server.providers import choose_provider, open_server
from harness.server.schema import own_schema
from harness.shipped import CHECK_BASELINE, CHECK_PROBES, default_file

BASELINE = Path("baselines") / CHECK_BASELINE
PROBES = Path("scenarios") / f"{CHECK_PROBES}.yaml"
FOLDER = "check"  # results/check/<run id>/


@dataclass(frozen=True)
class CheckRequest:
    settings: CheckSettings
    baseline: Path | None = None  # None: baselines/dequeue.json here, else the shipped one
    probes: Path | None = None  # None: scenarios/dequeue-check.yaml here, else the shipped one
    update_baseline: bool = False
    markdown: Path | None = None
    junit: Path | None = None
    results_dir: Path | None = None  # where its run folder goes; None: no folder


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
    """Measure the probes, compare with the baseline; the exit code says if it regressed.
    A check that cannot run still writes its reports, saying why (then exit 2)."""
    with _reported_if_not_run(request, console):
        return _check(request, pg, dsn, allow_mismatch, strategies_dir, console, image)


@contextmanager
def _reported_if_not_run(request: CheckRequest, console: Console) -> Iterator[None]:
    try:
        yield
    except HarnessError as error:
        _write_report(request.markdown, not_run_markdown(str(error)).encode())
        _write_report(request.junit, not_run_junit(str(error)))
        if _on_github():
            _say(console, github_command("error", "harness check: could not run", str(error)))
        raise


def _check(
    request: CheckRequest,
    pg: str | None,
    dsn: str | None,
    allow_mismatch: bool,
    strategies_dir: Path | None,
    console: Console,
    image: str | None,
) -> int:
    baseline_path, probes_path = check_paths(
        request.baseline, request.probes, request.update_baseline
    )
    strategies = load_strategies(strategies_dir)
    probes = load_scenario(probes_path, {n: s.traits for n, s in strategies.items()})
    old = _old_baseline(request, baseline_path, probes, console)
    if request.results_dir is not None:
        check_results_dir(request.results_dir, [FOLDER])
    choice = choose_provider(pg, dsn, os.environ, allow_mismatch, image=image)
    started_at, started = datetime.now(UTC), time.monotonic()
    measured, metadata = _measure_probes(choice, probes, strategies, request, console)
    findings = compare(old, measured, request.settings) if old is not None else []
    regressed = any(f.verdict == "regression" for f in findings)
    code = 1 if regressed and not request.update_baseline else 0
    candidate = baseline_document(
        measured, request.settings, str(probes_path), probes.sha256, metadata
    )
    folder = None
    if request.results_dir is not None:
        folder = _keep(request.results_dir, candidate, findings, old, code, started_at)
    seconds = time.monotonic() - started
    _show_findings(findings, request, console, seconds, code, str(baseline_path), folder)
    if request.update_baseline:
        baseline_path.parent.mkdir(parents=True, exist_ok=True)
        candidate.write(baseline_path, replace=True)  # a new baseline replaces the old
        console.print(f"Baseline written: {baseline_path}", highlight=False)
        summary = baseline_markdown(findings, len(measured), str(baseline_path))
        _write_report(request.markdown, summary.encode())
    return code


def _keep(
    root: Path,
    candidate: Baseline,
    findings: list[Finding],
    old: list[Probe] | None,
    code: int,
    started_at: datetime,
) -> Path:
    """The check's run folder: the measured probes (as a baseline could be made of them)
    and results.json."""
    folder = RunFolder.create(root, FOLDER)
    candidate.write(folder.path / "probes.json")
    document = results_document(
        run_id=folder.run_id,
        kind="check",
        name=FOLDER,
        status="regression" if code else "ok",
        started_at=started_at.isoformat(),
        metadata=candidate.metadata,
        figures=check_headline(CHECK_PROBES, candidate.probes, old, findings),
    )
    document.write(folder.path / Results.NAME)
    return folder.path


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
    request: CheckRequest, path: Path, probes: LoadedScenario, console: Console
) -> list[Probe] | None:
    """The baseline to compare with; when updating, one that cannot be compared is only
    reported, since replacing it is the point."""
    if not request.update_baseline:
        return read_baseline(path, probes)
    if not path.exists():
        return None
    try:
        return read_baseline(path, probes)
    except HarnessError as error:
        console.print(f"The old baseline is not comparable: {error}", highlight=False)
        return None


def _show_findings(
    findings: list[Finding],
    request: CheckRequest,
    console: Console,
    seconds: float,
    code: int,
    baseline: str,
    folder: Path | None,
) -> None:
    headers, rows = findings_rows(findings)
    if findings:
        console.print(console_table("Dequeue against the baseline", headers, rows))
    regressions = [f for f in findings if f.verdict == "regression"]
    for finding in regressions:
        _say(console, f"REGRESSION: {finding.message}")
    if _on_github():
        for line in github_annotations(findings):
            _say(console, line)
    verdict = f"{len(regressions)} regression(s)" if regressions else "no regression"
    console.print(
        f"harness check: {verdict} ({len(findings)} figures, {seconds:.0f} s)", highlight=False
    )
    if folder is not None:
        console.print(f"Results: {folder}", highlight=False)
    where = str(folder) if folder is not None else None
    if not request.update_baseline:
        summary = check_markdown(findings, code, seconds, baseline, where)
        _write_report(request.markdown, summary.encode())
    _write_report(request.junit, junit_xml(findings))


def _write_report(path: Path | None, data: bytes) -> None:
    """A report asked for (--markdown, --junit), written whole, its folder made."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)


def _on_github() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _say(console: Console, line: str) -> None:
    """A line as it is: never wrapped, never read as markup."""
    console.print(line, highlight=False, markup=False, soft_wrap=True)
