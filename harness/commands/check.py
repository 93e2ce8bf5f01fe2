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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.check.baseline import Baseline, baseline_document, read_baseline, refuse_other_major
from harness.check.probes import measure, probed_strategies
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
    on_github,
)
from harness.commands.progress import ProgressBars
from harness.errors import HarnessError
from harness.queues.base import Site
from harness.queues.sql.strategies import Strategy, load_strategies, strategy_files
from harness.report.console import console_table
from harness.results.folder import RunFolder, atomic_write, check_results_dir
from harness.results.headline import Results, results_document
from harness.run.captures import requests
from harness.scenario.loader import LoadedScenario, load_scenario
from harness.server.builds import DEFAULT_MAJOR
from harness.server.kinds import ProviderChoice
from harness.server.provenance import collect_all
from harness.server.providers import open_server, server_major
from harness.server.schema import own_schema
from harness.shipped import CHECK_PROBES, check_baseline, default_file

PROBES = Path("scenarios") / f"{CHECK_PROBES}.yaml"
FOLDER = "check"  # results/check/<run id>/


def baseline_file(major: int) -> Path:
    """Where a checkout keeps the baseline of a major: baselines/dequeue-pg<major>.json."""
    return Path("baselines") / check_baseline(major)


@dataclass(frozen=True)
class CheckRequest:
    settings: CheckSettings
    baseline: Path | None = None  # None: each major's own (check_paths)
    probes: Path | None = None  # None: scenarios/dequeue-check.yaml here, else the shipped one
    update_baseline: bool = False
    markdown: Path | None = None
    junit: Path | None = None
    results_dir: Path | None = None  # where its run folder goes; None: no folder
    strategies: tuple[str, ...] = ()  # --strategy: only these; else --strategies-dir's all


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
    of its major; the exit code says if any regressed. A check that cannot run still
    writes its reports, saying why (then exit 2)."""
    with _reported_if_not_run(request, console):
        return _check(request, choice, strategies_dir, console)


@contextmanager
def _reported_if_not_run(request: CheckRequest, console: Console) -> Iterator[None]:
    try:
        yield
    except HarnessError as error:
        _write_report(request.markdown, not_run_markdown(str(error)).encode())
        _write_report(request.junit, not_run_junit(str(error)))
        if on_github():
            _say(console, github_command("error", "harness check: could not run", str(error)))
        raise


def _check(
    request: CheckRequest, choice: ProviderChoice, strategies_dir: Path | None, console: Console
) -> int:
    if request.baseline is not None and len(choice.targets) > 1:
        raise HarnessError(
            "--baseline names one major's baseline; with several --pg-version majors, leave "
            "it out: each is checked against baselines/dequeue-pg<major>.json"
        )
    servers = choice.each()
    checks = [_one_major(request, one.target.major, len(servers)) for one in servers]
    strategies = load_strategies(strategies_dir)
    theirs = strategy_files(strategies_dir)
    probes = load_scenario(checks[0].probes or PROBES, {n: s.traits for n, s in strategies.items()})
    chosen = probed_strategies(
        probes.scenario.strategies, strategies, theirs, request.strategies, strategies_dir
    )
    probes = probes.model_copy(
        update={"scenario": probes.scenario.model_copy(update={"strategies": chosen})}
    )
    files = {name: str(path) for name, path in theirs.items()}
    # Every baseline is read, and refused if need be, before the first server starts.
    olds = [
        _old_baseline(check, probes, console, one.target.major)
        for check, one in zip(checks, servers, strict=True)
    ]
    if request.results_dir is not None:
        check_results_dir(request.results_dir, [FOLDER])
    codes = [
        _check_on(check, old, probes, strategies, one, console, files)
        for check, old, one in zip(checks, olds, servers, strict=True)
    ]
    return max(codes)


def _one_major(request: CheckRequest, major: int, majors: int) -> CheckRequest:
    """The request for one major: its own baseline unless one is given; with several
    majors, its own reports (check.md -> check-pg15.md)."""
    baseline, probes = check_paths(request.baseline, request.probes, request.update_baseline, major)
    return replace(
        request,
        baseline=baseline,
        probes=probes,
        markdown=_of_major(request.markdown, major, majors),
        junit=_of_major(request.junit, major, majors),
    )


def _of_major(path: Path | None, major: int, majors: int) -> Path | None:
    if path is None or majors == 1:
        return path
    return path.with_name(f"{path.stem}-pg{major}{path.suffix}")


def _check_on(
    request: CheckRequest,
    old: Baseline | None,
    probes: LoadedScenario,
    strategies: dict[str, Strategy],
    choice: ProviderChoice,
    console: Console,
    files: dict[str, str],
) -> int:
    """The probes on one server against the baseline of its major; `files`, the user's
    strategies' files, which the annotations name."""
    assert request.baseline is not None
    console.print(choice.starting, highlight=False)
    started_at, started = datetime.now(UTC), time.monotonic()
    measured, metadata = _measure_probes(choice, probes, strategies, request, old, console)
    before = old.probes if old is not None else None
    findings = compare(before, measured, request.settings) if before is not None else []
    regressed = any(f.verdict == "regression" for f in findings)
    code = 1 if regressed and not request.update_baseline else 0
    candidate = baseline_document(
        measured, request.settings, str(probes.path), probes.sha256, metadata
    )
    folder = None
    if request.results_dir is not None:
        folder = _keep(request.results_dir, candidate, findings, before, code, started_at)
    seconds = time.monotonic() - started
    shown = str(request.baseline)
    _show_findings(findings, request, console, seconds, code, shown, folder, files)
    if request.update_baseline:
        request.baseline.parent.mkdir(parents=True, exist_ok=True)
        candidate.write(request.baseline, replace=True)  # a new baseline replaces the old
        console.print(f"Baseline written: {request.baseline}", highlight=False)
        summary = baseline_markdown(findings, len(measured), str(request.baseline))
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
    findings: list[Finding],
    request: CheckRequest,
    console: Console,
    seconds: float,
    code: int,
    baseline: str,
    folder: Path | None,
    files: dict[str, str],
) -> None:
    headers, rows = findings_rows(findings)
    if findings:
        console.print(console_table("Dequeue against the baseline", headers, rows), crop=False)
    regressions = [f for f in findings if f.verdict == "regression"]
    for finding in regressions:
        _say(console, f"REGRESSION: {finding.message}")
    if on_github():
        for line in github_annotations(findings, files):
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


def _say(console: Console, line: str) -> None:
    """A line as it is: never wrapped, never read as markup."""
    console.print(line, highlight=False, markup=False, soft_wrap=True)
