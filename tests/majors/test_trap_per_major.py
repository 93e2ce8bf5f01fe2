"""The article's trap and its fix on every PostgreSQL major installed (14, 15, 16, 17,
18), asserted per major from the captured plans (EXPLAIN ANALYZE, BUFFERS, JSON): the
buffers, how each job is reached and how often, the dangerous shapes.

The backlog is the article's (scenarios/skewed-backlog.yaml): 100,000 queued jobs of one
tenant, one job each for ten small tenants, 989 idle tenants first in the rotation. The
figures are deterministic: the same rows loaded the same way give the same pages, on
every major. Measured on all five (docs/postgres-majors.md): the same plan and the same
buffers everywhere; what differs is pinned below with why.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from harness.analysis.plans import WALKS_GLOBAL_INDEX, Capture, PlanFigures, nodes
from harness.queues.catalog import catalog, traits
from harness.run.captures import CaptureRequest
from harness.run.render import load_captures
from harness.run.repetition import Repetition, RepetitionResult
from harness.run.scenario_run import RunOptions, run_scenario
from harness.scenario.loader import load_scenario
from harness.server.kinds import Server
from tests.conftest import SCENARIOS

STRATEGIES = ["round_robin_by_id", "round_robin", "round_robin_active"]
VARIANTS = ["idle-989", "active-only"]
ROWS_PER_LOOP = 100_010  # the large tenant's 100,000 jobs and the small tenants' 10


class Quiet:
    def repetition_started(self, repetition: Repetition, jobs: int) -> None: ...

    def jobs_done(self, done: int) -> None: ...

    def horizon_progress(self, line: str) -> None: ...

    def repetition_finished(self, result: RepetitionResult) -> None: ...

    def capture_started(self, request: CaptureRequest, executions: int) -> None: ...

    def capture_step(self) -> None: ...


@pytest.fixture(scope="module")
def captured(major_server: Server, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The trap, the fix and round_robin_active on each major: one JSON execution each
    (after the text form's, the warm-up), in a run folder of its own."""
    folder = tmp_path_factory.mktemp("majors")
    scenario = yaml.safe_load((SCENARIOS / "skewed-backlog.yaml").read_text())
    scenario["explain"]["repeat"] = 1
    scenario.pop("reference")
    path = folder / "skewed-backlog.yaml"
    path.write_text(yaml.safe_dump(scenario))
    entries = catalog()
    options = RunOptions(timed=False, explain_strategies=STRATEGIES, explain_variants=VARIANTS)
    loaded = load_scenario(path, traits(entries))
    rendered = run_scenario(loaded, entries, major_server, folder / "results", Quiet(), options)
    captures = load_captures(rendered.folder.path, rendered.document)
    return {
        "server": rendered.document.servers[0],
        "captures": {(c.variant, c.strategy): c for c in captures},
    }


def figures(captured: dict[str, Any], variant: str, strategy: str) -> PlanFigures:
    capture: Capture = captured["captures"][(variant, strategy)]
    assert capture.skipped is None and len(capture.plans) == 1
    return capture.figures[0]


def jobs_scan_node(captured: dict[str, Any], variant: str, strategy: str) -> dict[str, Any]:
    capture: Capture = captured["captures"][(variant, strategy)]
    root = capture.plans[0][0]["Plan"]
    (scan,) = [node for node in nodes(root) if node.get("Relation Name") == "jobs"]
    return scan


def test_each_major_runs_on_its_own_server(
    request: pytest.FixtureRequest, captured: dict[str, Any]
) -> None:
    server = captured["server"]
    assert server.major == request.node.callspec.params["major_server"]
    assert {c.pg_version for c in captured["captures"].values()} == {server.pg_version}


def test_the_trap_walks_a_million_buffers_on_every_major(captured: dict[str, Any]) -> None:
    """Ordered by id, the sub-select walks jobs_queued_fifo (the queue in id order)
    filtering on tenant_id, once per tenant ahead of the large one in the rotation: 990
    walks of the large tenant's 100,010 rows, 1,000,903 buffers, on every major. No
    major's planner finds the per-tenant index for it."""
    trap = figures(captured, "idle-989", "round_robin_by_id")
    assert trap.shared_buffers == 1_000_903
    assert trap.jobs_scan == "Index Scan using jobs_queued_fifo on jobs"
    assert trap.jobs_loops == 990
    assert trap.rows_removed == 990 * ROWS_PER_LOOP
    assert WALKS_GLOBAL_INDEX in trap.flags


def test_the_fix_reads_three_buffers_per_tenant_on_every_major(captured: dict[str, Any]) -> None:
    """Ordered by enqueued_at, id, the sub-select takes jobs_queued_tenant (tenant_id,
    enqueued_at, id): one descent per tenant, nothing filtered, 2,984 buffers for the
    same 990 tenants; four orders of magnitude fewer than the trap, on every major."""
    fixed = figures(captured, "idle-989", "round_robin")
    assert fixed.shared_buffers == 2_984
    assert fixed.jobs_scan == "Index Scan using jobs_queued_tenant on jobs"
    assert (fixed.jobs_loops, fixed.rows_removed, fixed.flags) == (990, 0, ())
    trap = figures(captured, "idle-989", "round_robin_by_id")
    assert trap.shared_buffers > 300 * fixed.shared_buffers
    # Time, as a ratio within one run on one server: the trap walks, the fix descends.
    assert trap.execution_ms > 100 * fixed.execution_ms


def test_only_tenants_with_work_take_eight_buffers_on_every_major(
    captured: dict[str, Any],
) -> None:
    """With only the 11 active tenants registered, or with round_robin_active (which
    keeps only tenants with queued work in its rotation), the first tenant has a job:
    one probe, 8 buffers."""
    for variant, strategy in (("active-only", "round_robin"), ("idle-989", "round_robin_active")):
        found = figures(captured, variant, strategy)
        assert (found.shared_buffers, found.jobs_loops) == (8, 1), (variant, strategy)
        assert found.jobs_scan == "Index Scan using jobs_queued_tenant on jobs"


def test_the_trap_with_only_active_tenants_is_one_walk(captured: dict[str, Any]) -> None:
    """The trap's cost is the idle tenants ahead of the large one: with none, its one
    walk finds a small tenant's job after the large tenant's rows, 1,015 buffers."""
    trap = figures(captured, "active-only", "round_robin_by_id")
    assert (trap.shared_buffers, trap.jobs_loops) == (1_015, 1)
    assert WALKS_GLOBAL_INDEX in trap.flags


def test_18_counts_the_index_searches_of_the_trap_and_earlier_majors_do_not(
    captured: dict[str, Any],
) -> None:
    """What differs: EXPLAIN of PostgreSQL 18 counts each index scan's B-tree descents
    ("Index Searches", new with 18's skip scan). On the trap's jobs scan it is 990, one
    descent per loop: 18 does not skip-scan jobs_queued_fifo for a tenant (tenant_id is
    not in it), it walks it from the start each time, as 14-17 do. 14-17 have no such
    field; the plan and the buffers are the same."""
    scan = jobs_scan_node(captured, "idle-989", "round_robin_by_id")
    if captured["server"].major >= 18:
        assert scan["Index Searches"] == 990
    else:
        assert "Index Searches" not in scan
