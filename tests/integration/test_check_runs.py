"""`harness check` on the real server: it passes unchanged SQL and fails the trap."""

from __future__ import annotations

import io
import json
from pathlib import Path
from xml.etree import ElementTree

import pytest
from rich.console import Console

from harness.check.baseline import BASELINE_FORMAT_VERSION
from harness.check.verdict import CheckSettings
from harness.commands.check import CheckRequest, check_command
from harness.results.contract import OTHER_FOLDERS
from harness.scenario.loader import load_scenario
from harness.server.kinds import Server, ServerOptions
from harness.server.providers import choose_provider
from tests.conftest import ROOT, builtin_traits, harness_cli

PROBES = ROOT / "scenarios/dequeue-check.yaml"
ROUND_ROBIN = ROOT / "harness/queues/sql/strategies/round_robin.sql"


def run_check(
    server: Server,
    baseline: Path,
    strategies_dir: Path | None = None,
    update: bool = False,
    samples: int = 50,
    **outputs: Path,
) -> tuple[int, str]:
    """`results_dir=` among `outputs` keeps the check's run folder there."""
    out = io.StringIO()
    request = CheckRequest(
        baseline=baseline,
        probes=PROBES,
        update_baseline=update,
        settings=CheckSettings(samples=samples),
        **outputs,
    )
    choice = choose_provider(ServerOptions(dsn=server.dsn), {})
    code = check_command(request, choice, strategies_dir, Console(file=out, width=200))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def baseline(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("baseline") / "dequeue.json"
    code, output = run_check(server, path, update=True)
    assert code == 0 and "Baseline written" in output
    return path


def test_a_baseline_records_every_probe_and_its_provenance(baseline: Path) -> None:
    document = json.loads(baseline.read_text())
    assert document["format_version"] == 2
    assert document["metadata"]["postgres"]["server_version_num"] // 10000 == 17
    assert document["pg_version"].startswith("17.")
    probes = load_scenario(PROBES, builtin_traits()).scenario
    assert probes.explain is not None
    expected = {(s, v.name) for s in probes.explain_strategies for v in probes.explain.variants}
    assert {(p["strategy"], p["variant"]) for p in document["probes"]} == expected
    assert len(expected) == 12
    assert all(len(p["claim_ms"]) == 50 for p in document["probes"])


TIMING = "claim latency / reference"
TIMING_ATTEMPTS = 5


def regressions(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("REGRESSION: ")]


def probe_of(line: str) -> str:
    """'REGRESSION: fifo dequeue on skewed: ...' -> 'fifo dequeue on skewed'."""
    return line.removeprefix("REGRESSION: ").split(":")[0]


@pytest.mark.parametrize("checks", [1, pytest.param(3, marks=pytest.mark.thorough)])
def test_unchanged_sql_passes_its_plan_figures_every_time(
    server: Server, baseline: Path, checks: int
) -> None:
    """Unchanged SQL against its own baseline. The plan figures (buffers, rows removed,
    scans, dangerous shapes) do not depend on load: each must pass in each check, no
    retry, whatever the machine is doing; and the exit code must say exactly what the
    findings say, every time. make test checks once, the matrix three times in a row.
    The timing figure is judged below, on a quiet machine."""
    for attempt in range(1, checks + 1):
        code, output = run_check(server, baseline)
        found = regressions(output)
        assert [line for line in found if TIMING not in line] == [], f"attempt {attempt}"
        assert code == (1 if found else 0), f"attempt {attempt}:\n{output}"


# A claim latency against a reference query, in make throughput (make test-matrix): the
# figure of a quiet machine. Beside stress-ng (make test-under-load, 2026-12-03) the
# priority probe on the skewed backlog was flagged in five checks of five against a
# baseline taken a few seconds before under the same load.
@pytest.mark.throughput
def test_unchanged_sql_passes_three_times_timings_on_the_best_of_five(
    server: Server, baseline: Path
) -> None:
    """The timing figure is already relative within one run (the claim over a reference
    query timed alternately), but on this 2-core machine shared with other work the two
    do not slow down alike: unchanged SQL was flagged at 1.75-2.1x under load 6-12. So a
    probe's timing is judged on its best attempt: it fails only if it is flagged in every
    one of up to five checks. A check that flagged unchanged SQL every time (a ratio taken
    against the wrong reference, say) still fails."""
    flagged: set[str] | None = None
    for attempt in range(1, TIMING_ATTEMPTS + 1):
        code, output = run_check(server, baseline)
        found = regressions(output)
        assert [line for line in found if TIMING not in line] == [], f"attempt {attempt}"
        assert code == (1 if found else 0), f"attempt {attempt}:\n{output}"
        timed = {probe_of(line) for line in found}
        flagged = timed if flagged is None else flagged & timed
        print(f"attempt {attempt}: timing flagged for {sorted(timed) or 'no probe'}")
        if attempt >= 3 and not flagged:
            break
    assert flagged == set(), f"flagged in every one of {TIMING_ATTEMPTS} checks: {flagged}"


def test_the_trap_fails_naming_the_strategy_figure_and_factor(
    server: Server, baseline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trap = ROUND_ROBIN.read_text().replace("order by enqueued_at, id", "order by id")
    (tmp_path / "round_robin.sql").write_text(trap)
    junit, markdown = tmp_path / "check.xml", tmp_path / "check.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, output = run_check(
        server,
        baseline,
        tmp_path,
        samples=10,
        junit=junit,
        markdown=markdown,
        results_dir=tmp_path / "results",
    )
    assert code == 1
    (annotation,) = [line for line in output.splitlines() if line.startswith("::error")]
    assert annotation.startswith(
        f"::error file={tmp_path / 'round_robin.sql'},title=harness check%3A round_robin%3A "
    )
    assert "::round_robin dequeue on skewed: shared buffers" in annotation
    (folder,) = (tmp_path / "results" / "check").iterdir()
    written = {path.name for path in folder.iterdir()}
    assert written == {entry.pattern for entry in OTHER_FOLDERS["check"]}
    results = json.loads((folder / "results.json").read_text())
    assert (results["kind"], results["status"], results["run_id"]) == (
        "check",
        "regression",
        folder.name,
    )
    buffers = next(
        f
        for f in results["figures"]
        if f["name"] == "dequeue-check: round_robin on skewed: shared buffers"
    )
    assert buffers["within"] is False and buffers["value"] > 10 * buffers["reference"][0]
    # Only the strategy of --strategies-dir is probed: the check guards the user's SQL.
    assert {f["name"].split(":")[1].split(" on ")[0].strip() for f in results["figures"]} == {
        "round_robin"
    }
    probes = json.loads((folder / "probes.json").read_text())
    assert probes["format_version"] == BASELINE_FORMAT_VERSION  # a baseline
    assert probes["pg_version"].startswith("17.")  # of the major it ran on
    assert markdown.read_text().startswith("## harness check: ")
    assert "(exit 1)" in markdown.read_text().splitlines()[0]
    line = next(
        line
        for line in output.splitlines()
        if line.startswith("REGRESSION: round_robin dequeue on skewed: shared buffers")
    )
    factor = float(line.split("(")[1].split("x)")[0])
    assert factor > 10, line
    suite = ElementTree.parse(junit).getroot()
    assert int(suite.get("failures", "0")) >= 2
    assert "REGRESSION: round_robin dequeue on skewed: shared buffers" in markdown.read_text()


def test_dropping_the_per_tenant_index_fails(
    server: Server, baseline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "round_robin.sql").write_text(
        "-- extends: round_robin\n-- name: setup\ndrop index jobs_queued_tenant;\n"
    )
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, output = run_check(server, baseline, tmp_path, samples=10)
    assert code == 1
    assert "REGRESSION: round_robin dequeue on skewed: jobs scan" in output
    # Its regressions over both variants and several figures: one annotation, on its file.
    (annotation,) = [line for line in output.splitlines() if line.startswith("::error")]
    assert annotation.startswith(f"::error file={tmp_path / 'round_robin.sql'},title=")
    assert "round_robin dequeue on skewed: jobs scan" in annotation


OUR_QUEUE = """\
-- extends: round_robin
-- Our own queue: the harness's round-robin, its rotation under another name.
"""


def test_the_users_own_strategy_is_what_the_check_measures(server: Server, tmp_path: Path) -> None:
    """A strategy of --strategies-dir named like no built-in (sql/our_queue.sql): the
    baseline made with it holds its probes and no built-in's, and the check measures it
    against them."""
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "our_queue.sql").write_text(OUR_QUEUE)
    path = tmp_path / "dequeue.json"
    code, _ = run_check(server, path, sql, update=True, samples=10)
    assert code == 0
    probed = {(p["strategy"], p["variant"]) for p in json.loads(path.read_text())["probes"]}
    assert probed == {("our_queue", "skewed"), ("our_queue", "active-only")}
    markdown = tmp_path / "check.md"
    code, output = run_check(server, path, sql, samples=10, markdown=markdown)
    assert code in (0, 1)  # a busy machine may flag a timing; the plan figures are the same
    assert "| our_queue | skewed |" in markdown.read_text()
    assert "(12 figures" in output


def test_a_bad_baseline_is_exit_2_before_any_server_starts(tmp_path: Path) -> None:
    bad = tmp_path / "dequeue.json"
    bad.write_text("{not json")
    done = harness_cli("check", "--baseline", str(bad), cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {bad}: not JSON")
    assert done.stderr.count("\n") == 1


def test_a_check_that_cannot_run_still_writes_its_reports_saying_why(tmp_path: Path) -> None:
    """Exit 2 (a missing baseline, before any server starts): the job summary and the JUnit
    file say why nothing was measured, and GitHub shows it as an error."""
    markdown, junit = tmp_path / "summary" / "check.md", tmp_path / "check.xml"
    missing = tmp_path / "none.json"
    done = harness_cli(
        "check",
        "--baseline",
        str(missing),
        "--markdown",
        str(markdown),
        "--junit",
        str(junit),
        "--results-dir",
        str(tmp_path / "results"),
        env={"GITHUB_ACTIONS": "true"},
        cwd=ROOT,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    summary = markdown.read_text()
    assert summary.startswith("## harness check: could not run (exit 2)")
    assert f"{missing}: no baseline there" in summary
    case = ElementTree.parse(junit).getroot()
    assert case.get("errors") == "1" and f"{missing}: no baseline there" in ElementTree.tostring(
        case, encoding="unicode"
    )
    assert done.stdout.startswith("::error title=harness check%3A could not run::")
    assert not (tmp_path / "results").exists()  # nothing measured, no run folder
