"""The comparison of `harness check`, on probes made by hand."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import pytest

from harness.analysis.plans import WALKS_GLOBAL_INDEX
from harness.check.probes import probed_strategies
from harness.check.verdict import CheckSettings, Probe, compare, findings_rows, junit_xml
from harness.errors import HarnessError
from harness.scenario.loader import load_scenario
from tests.conftest import ROOT, builtin_traits, harness_cli

SETTINGS = CheckSettings()


def probe(claim_scale: float = 1.0, spread: float = 0.02, seed: int = 1, n: int = 50) -> Probe:
    rng = random.Random(seed)
    return Probe(
        strategy="round_robin",
        variant="skewed",
        shared_buffers=400,
        outer_scan="Index Scan using queue_tenants_last_served_idx on queue_tenants",
        jobs_scan="Index Scan using jobs_queued_tenant on jobs",
        rows_removed=0,
        flags=[],
        claim_ms=[0.4 * claim_scale * rng.gauss(1, spread) for _ in range(n)],
        reference_ms=[0.1 * rng.gauss(1, spread) for _ in range(n)],
    )


def verdicts(old: Probe, new: Probe) -> dict[str, str]:
    return {f.figure: f.verdict for f in compare([old], [new], SETTINGS)}


def test_the_same_dequeue_is_no_regression() -> None:
    assert set(verdicts(probe(seed=1), probe(seed=2)).values()) == {"ok"}


def test_more_buffers_than_the_tolerance_is_a_regression() -> None:
    found = verdicts(probe(), replace(probe(), shared_buffers=441))
    assert found["shared buffers"] == "regression"
    assert verdicts(probe(), replace(probe(), shared_buffers=439))["shared buffers"] == "ok"


def test_fewer_buffers_is_an_improvement_not_a_failure() -> None:
    assert verdicts(probe(), replace(probe(), shared_buffers=100))["shared buffers"] == "improved"


def test_another_plan_or_a_new_flag_is_a_regression() -> None:
    trap = replace(
        probe(),
        jobs_scan="Index Scan using jobs_queued_fifo on jobs",
        flags=[WALKS_GLOBAL_INDEX],
        rows_removed=4_000_000,
    )
    found = verdicts(probe(), trap)
    assert found["jobs scan"] == found["dangerous shapes"] == "regression"
    assert found["rows removed by filter"] == "regression"
    assert found["index under the Limit"] == "ok"


def test_a_large_significant_slowdown_is_a_regression() -> None:
    findings = compare([probe(seed=1)], [probe(claim_scale=2.0, seed=2)], SETTINGS)
    timing = next(f for f in findings if f.figure == "claim latency / reference")
    assert timing.verdict == "regression"
    assert 1.9 < timing.factor < 2.1  # type: ignore[operator]
    assert timing.message.startswith("round_robin dequeue on skewed: claim latency / reference")


def test_a_small_slowdown_is_not_a_regression() -> None:
    found = verdicts(probe(seed=1), probe(claim_scale=1.3, seed=2))
    assert found["claim latency / reference"] == "ok"


def test_a_large_but_insignificant_change_is_noisy() -> None:
    old = replace(probe(), claim_ms=[1.0, 2.0, 3.0, 4.0, 5.0], reference_ms=[1.0] * 5)
    new = replace(old, claim_ms=[1.0, 2.0, 6.0, 7.0, 8.0])  # median 3 -> 6, p = 0.2
    found = compare([old], [new], SETTINGS)[-1]
    assert found.factor == 2.0
    assert (found.verdict, found.note.split(";")[0]) == (
        "noisy",
        "large but not significant (p=0.2)",
    )


def test_a_probe_missing_from_the_baseline_is_new() -> None:
    findings = compare([], [probe()], SETTINGS)
    assert [f.verdict for f in findings] == ["new"]


def test_tables_and_junit_name_the_regression() -> None:
    findings = compare([probe()], [replace(probe(), shared_buffers=41_010)], SETTINGS)
    headers, rows = findings_rows(findings)
    assert rows[0][headers.index("buffers")] == "400 -> 41,010 (102.53x)"
    assert rows[0][-1] == "REGRESSION"
    suite = ElementTree.fromstring(junit_xml(findings))
    assert suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure is not None
    assert "shared buffers 400 -> 41,010 (102.53x)" in failure.get("message", "")


@pytest.mark.parametrize(
    "path", sorted((ROOT / "baselines").glob("dequeue-pg*.json")), ids=lambda path: path.name
)
def test_the_committed_baselines_match_the_probes(path: Path) -> None:
    probes = load_scenario(ROOT / "scenarios/dequeue-check.yaml", builtin_traits())
    document = json.loads(path.read_text())
    assert document["probes_sha256"] == probes.sha256
    measured = {(p["strategy"], p["variant"]) for p in document["probes"]}
    expected = {
        (s, v.name)
        for s in probes.scenario.explain_strategies
        for v in probes.scenario.explain.variants
    }  # type: ignore[union-attr]
    assert measured == expected


BUILTINS = ["fifo", "round_robin", "capped"]
THEIRS = {"our_queue": Path("sql/our_queue.sql"), "round_robin": Path("sql/round_robin.sql")}
KNOWN = [*BUILTINS, "our_queue"]


def test_the_check_probes_the_users_strategies_else_the_probes_own() -> None:
    sql = Path("sql")
    assert probed_strategies(BUILTINS, KNOWN, THEIRS, (), sql) == ["our_queue", "round_robin"]
    assert probed_strategies(BUILTINS, KNOWN, THEIRS, ["our_queue"], sql) == ["our_queue"]
    assert probed_strategies(BUILTINS, BUILTINS, {}, (), None) == BUILTINS
    assert probed_strategies(BUILTINS, BUILTINS, {}, ["fifo", "fifo"], None) == ["fifo"]


@pytest.mark.parametrize(
    ("theirs", "named", "said"),
    [
        (
            {},
            (),
            "sql: --strategies-dir: the check would measure none of its strategies (it "
            "holds no .sql file); name one with --strategy, or leave --strategy out",
        ),
        (
            THEIRS,
            ["fifo"],
            "sql: --strategies-dir: the check would measure none of its "
            "strategies (its strategies are our_queue, round_robin); name one with --strategy, "
            "or leave --strategy out",
        ),
        (
            THEIRS,
            ["ours"],
            "--strategy: no strategy named ours; the built-ins and those of "
            "--strategies-dir are capped, fifo, our_queue, round_robin",
        ),
    ],
)
def test_a_check_that_would_measure_none_of_the_users_sql_is_refused(
    theirs: dict[str, Path], named: list[str], said: str
) -> None:
    with pytest.raises(HarnessError) as refused:
        probed_strategies(BUILTINS, KNOWN, theirs, named, Path("sql"))
    assert str(refused.value) == said


def test_an_empty_strategies_dir_is_exit_2_before_any_server_starts(tmp_path: Path) -> None:
    done = harness_cli("check", "--strategies-dir", str(tmp_path), cwd=ROOT)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {tmp_path}: --strategies-dir: the check would measure")
