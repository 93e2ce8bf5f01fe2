"""`harness check`: each strategy's dequeue, on fixed backlogs, against a baseline.

This module compares (pure); probes.py measures; baseline.py keeps the baseline.

Two kinds of figure per strategy and backlog:
- deterministic, from EXPLAIN (ANALYZE, BUFFERS): shared buffers, the plan's scans, rows
  removed by filters, dangerous shapes. More buffers or rows than the tolerance allows,
  another plan or a new flag is a regression.
- timing: the claim transaction's latency as a ratio to a reference query timed
  alternately in the same state (sql/check.sql), so a slower machine is not a
  regression. A regression is both large (median ratio at least `factor` times the
  baseline's) and significant (Mann-Whitney U, p < alpha); large but not significant is
  reported as noisy.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from xml.etree import ElementTree

from harness.analysis.headline import figure_of
from harness.analysis.plans import index_name
from harness.analysis.stats import mann_whitney_greater, relative_spread
from harness.report.sections import markdown_table
from harness.results.headline import Figure


@dataclass(frozen=True)
class CheckSettings:
    tolerance: float = 0.10  # allowed growth of buffers and rows removed
    factor: float = 1.5  # a timing regression is at least this much slower ...
    alpha: float = 0.01  # ... and this significant
    samples: int = 50  # timed claims (and reference queries) per probe


@dataclass
class Probe:
    """One strategy's dequeue on one backlog: its plan figures and claim timings."""

    strategy: str
    variant: str
    shared_buffers: int
    outer_scan: str
    jobs_scan: str
    rows_removed: int
    flags: list[str]
    claim_ms: list[float] = field(default_factory=list)
    reference_ms: list[float] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return self.strategy, self.variant

    @property
    def ratios(self) -> list[float]:
        """Each claim over the median reference query of the same probe."""
        reference = statistics.median(self.reference_ms)
        return [claim / reference for claim in self.claim_ms]


@dataclass(frozen=True)
class Finding:
    strategy: str
    variant: str
    figure: str
    baseline: str
    candidate: str
    factor: float | None
    verdict: str  # ok, regression, improved, noisy, new
    note: str = ""

    @property
    def message(self) -> str:
        known = self.factor is not None and math.isfinite(self.factor)
        change = f" ({self.factor:.2f}x)" if known else ""
        note = f"; {self.note}" if self.note else ""
        return (
            f"{self.strategy} dequeue on {self.variant}: {self.figure} {self.baseline} -> "
            f"{self.candidate}{change}{note}"
        )


def compare(
    baseline: list[Probe], candidate: list[Probe], settings: CheckSettings
) -> list[Finding]:
    """Every figure of every probe, baseline against candidate, with its verdict."""
    before = {probe.key: probe for probe in baseline}
    findings = []
    for probe in candidate:
        old = before.get(probe.key)
        if old is None:
            findings.append(
                Finding(
                    probe.strategy,
                    probe.variant,
                    "probe",
                    "-",
                    "measured",
                    None,
                    "new",
                    "not in the baseline: --update-baseline",
                )
            )
            continue
        findings += _deterministic(old, probe, settings)
        findings.append(_timing(old, probe, settings))
    return findings


def _deterministic(old: Probe, new: Probe, settings: CheckSettings) -> list[Finding]:
    def finding(
        figure: str, was: str, now: str, factor: float | None, verdict: str, note: str = ""
    ) -> Finding:
        return Finding(new.strategy, new.variant, figure, was, now, factor, verdict, note)

    found = [
        _counted("shared buffers", old.shared_buffers, new.shared_buffers, settings, finding),
        _counted("rows removed by filter", old.rows_removed, new.rows_removed, settings, finding),
    ]
    for figure, was, now in (
        ("index under the Limit", old.outer_scan, new.outer_scan),
        ("jobs scan", old.jobs_scan, new.jobs_scan),
    ):
        found.append(
            finding(
                figure,
                was,
                now,
                None,
                "ok" if was == now else "regression",
                "" if was == now else "the plan changed",
            )
        )
    added = sorted(set(new.flags) - set(old.flags))
    found.append(
        finding(
            "dangerous shapes",
            "; ".join(old.flags) or "none",
            "; ".join(new.flags) or "none",
            None,
            "regression" if added else "ok",
        )
    )
    return found


def _counted(
    figure: str,
    was: int,
    now: int,
    settings: CheckSettings,
    finding: Callable[..., Finding],
) -> Finding:
    factor = now / was if was else (1.0 if now == 0 else float("inf"))
    if now > was * (1 + settings.tolerance) and now - was > 1:
        verdict = "regression"
    elif now < was * (1 - settings.tolerance):
        verdict = "improved"
    else:
        verdict = "ok"
    note = {
        "regression": f"more than {settings.tolerance:.0%} over the baseline",
        "improved": "fewer than the baseline: --update-baseline",
    }.get(verdict, "")
    return finding(figure, f"{was:,}", f"{now:,}", factor, verdict, note)


def _timing(old: Probe, new: Probe, settings: CheckSettings) -> Finding:
    was, now = statistics.median(old.ratios), statistics.median(new.ratios)
    factor = now / was
    p_value = mann_whitney_greater(new.ratios, old.ratios)
    spread = relative_spread(new.ratios)
    if factor >= settings.factor and p_value < settings.alpha:
        verdict, note = "regression", f"p={p_value:.2g}"
    elif factor >= settings.factor:
        verdict, note = "noisy", f"large but not significant (p={p_value:.2g})"
    else:
        verdict, note = "ok", f"p={p_value:.2g}"
    if spread >= 0.10:
        note += f"; noisy: std {spread:.0%} of mean"
    return Finding(
        new.strategy,
        new.variant,
        "claim latency / reference",
        f"{was:.2f}",
        f"{now:.2f}",
        factor,
        verdict,
        note,
    )


_PROBE_COLUMNS = {
    "shared buffers": "buffers",
    "rows removed by filter": "rows removed",
    "index under the Limit": "plan",
    "jobs scan": "plan",
    "dangerous shapes": "flags",
    "claim latency / reference": "claim / reference",
}


_SEVERITY = ["ok", "improved", "noisy", "new", "regression"]


def findings_rows(findings: list[Finding]) -> tuple[list[str], list[list[str]]]:
    """One row per probe: each figure as `baseline -> now`, and the probe's worst verdict."""
    headers = [
        "strategy",
        "backlog",
        "buffers",
        "rows removed",
        "plan",
        "flags",
        "claim / reference",
        "verdict",
    ]
    probes: dict[tuple[str, str], dict[str, str]] = {}
    for f in findings:
        row = probes.setdefault((f.strategy, f.variant), {"verdict": "ok"})
        column = _PROBE_COLUMNS.get(f.figure)
        if column is not None and not (column == "plan" and row.get("plan", "same") != "same"):
            row[column] = _change(f)
        if _SEVERITY.index(f.verdict) > _SEVERITY.index(row["verdict"]):
            row["verdict"] = f.verdict
    return headers, [
        [
            strategy,
            variant,
            *(row.get(h, "-") for h in headers[2:-1]),
            row["verdict"].upper() if row["verdict"] == "regression" else row["verdict"],
        ]
        for (strategy, variant), row in probes.items()
    ]


def _change(f: Finding) -> str:
    if f.figure in ("index under the Limit", "jobs scan"):
        return (
            "same"
            if f.baseline == f.candidate
            else (f"{index_name(f.baseline)} -> {index_name(f.candidate)}")
        )
    if f.figure == "dangerous shapes":
        return "none" if f.candidate == "none" else "NEW" if f.verdict == "regression" else "same"
    factor = "" if f.factor is None or math.isinf(f.factor) else f" ({f.factor:.2f}x)"
    return f"{f.baseline} -> {f.candidate}{factor}"


EXIT_MEANING = {
    0: "no regression",
    1: "regression: a figure is worse than the baseline allows",
    2: "could not run: nothing was measured",
}


def check_markdown(
    findings: list[Finding], code: int, seconds: float, baseline: str, folder: str | None
) -> str:
    """The job summary: the verdict and exit code first, then the table, then each
    regression in a line."""
    headers, rows = findings_rows(findings)
    regressions = [f for f in findings if f.verdict == "regression"]
    verdict = f"{len(regressions)} regression(s)" if regressions else "no regression"
    lines = [
        f"## harness check: {verdict} (exit {code})\n",
        f"{len(rows)} probes, {len(findings)} figures against `{baseline}`, in {seconds:.0f} s."
        + (f" Samples and results: `{folder}`." if folder else "")
        + "\n",
        markdown_table(headers, rows),
        *(f"- REGRESSION: {finding.message}" for finding in regressions),
    ]
    return "\n".join(lines) + "\n"


def baseline_markdown(findings: list[Finding], probes: int, baseline: str) -> str:
    """The job summary of --update-baseline: what was written, and against the old
    baseline, where there was one, what changed."""
    lines = [
        "## harness check: a new baseline (exit 0)\n",
        f"{probes} probes measured and written to `{baseline}`: commit it to check against it."
        + ("" if findings else " There was no baseline to compare with.")
        + "\n",
    ]
    if findings:
        lines.append("Against the old baseline:\n")
        lines.append(markdown_table(*findings_rows(findings)))
    return "\n".join(lines) + "\n"


def not_run_markdown(error: str) -> str:
    """The job summary of a check that could not run (exit 2): why, and what to do."""
    return (
        "## harness check: could not run (exit 2)\n\n"
        "Nothing was measured, so nothing was compared:\n\n"
        f"> {error}\n"
    )


def github_annotations(
    findings: list[Finding], files: Mapping[str, str] | None = None
) -> list[str]:
    """GitHub Actions workflow commands, one per strategy with something to say: an error
    for its regressions, else a warning for its noisy or new figures, each figure a line
    of it. One a strategy, so that a dropped index's regressions over every figure and
    variant do not fill the ten annotations GitHub shows a step; on the strategy's file
    where it is the user's (`files`, --strategies-dir), so GitHub shows it there."""
    said: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.verdict in ("regression", "noisy", "new"):
            said.setdefault(finding.strategy, []).append(finding)
    lines = []
    for strategy, found in said.items():
        regressions = [f for f in found if f.verdict == "regression"]
        shown = regressions or found
        counted = Counter(f.verdict for f in shown)
        title = f"harness check: {strategy}: " + ", ".join(f"{n} {v}" for v, n in counted.items())
        message = "\n".join(f.message for f in shown)
        level = "error" if regressions else "warning"
        lines.append(github_command(level, title, message, (files or {}).get(strategy)))
    return lines


def on_github() -> bool:
    """Whether this runs in a GitHub Actions job, which reads workflow commands."""
    return os.environ.get("GITHUB_ACTIONS") == "true"


def github_command(level: str, title: str, message: str, file: str | None = None) -> str:
    """`::error file=...,title=...::message` with GitHub's escapes: one line whatever it
    says; `file`, where GitHub shows it (a path from the repository's root)."""

    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    where = f"file={prop(file)}," if file else ""
    return f"::{level} {where}title={prop(title)}::{data(message)}"


def junit_xml(findings: list[Finding]) -> bytes:
    """One test case per probe figure; a regression is a failure."""
    failures = [f for f in findings if f.verdict == "regression"]
    suite = ElementTree.Element(
        "testsuite",
        name="harness check",
        tests=str(len(findings)),
        failures=str(len(failures)),
        errors="0",
        skipped="0",
    )
    for finding in findings:
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=f"{finding.strategy}.{finding.variant}",
            name=finding.figure,
        )
        if finding.verdict == "regression":
            ElementTree.SubElement(case, "failure", message=finding.message)
        elif finding.verdict != "ok":
            ElementTree.SubElement(case, "system-out").text = finding.message
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


def not_run_junit(error: str) -> bytes:
    """A check that could not run: one test case in error, saying why."""
    suite = ElementTree.Element(
        "testsuite", name="harness check", tests="1", failures="0", errors="1", skipped="0"
    )
    case = ElementTree.SubElement(suite, "testcase", classname="harness check", name="run")
    ElementTree.SubElement(case, "error", message=f"could not run: {error}")
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


def check_headline(
    scenario: str, measured: list[Probe], baseline: list[Probe] | None, findings: list[Finding]
) -> list[Figure]:
    """results.json of a check: per probe its buffers, rows removed, claim latency and its
    ratio to the reference query; the baseline's figure as the reference, and `within`
    where the check found no regression in it."""
    before = {probe.key: probe for probe in baseline or []}
    worse = {(f.strategy, f.variant, f.figure) for f in findings if f.verdict == "regression"}
    figures = []
    for probe in measured:
        old = before.get(probe.key)
        where = f"{scenario}: {probe.strategy} on {probe.variant}"
        for figure, unit, values, was in (
            ("shared buffers", "buffers", [probe.shared_buffers], _one(old, "shared_buffers")),
            ("rows removed by filter", "rows", [probe.rows_removed], _one(old, "rows_removed")),
            ("claim latency / reference", "x", probe.ratios, _typical(old)),
            ("claim latency", "ms", probe.claim_ms, None),
        ):
            found = figure_of(f"{where}: {figure}", unit, values, True)
            if found is None:
                continue
            if was is not None:
                found.reference = (was, was)
                found.within = (probe.strategy, probe.variant, figure) not in worse
            figures.append(found)
    return figures


def _one(probe: Probe | None, field_name: str) -> float | None:
    return None if probe is None else float(getattr(probe, field_name))


def _typical(probe: Probe | None) -> float | None:
    return None if probe is None else statistics.median(probe.ratios)
