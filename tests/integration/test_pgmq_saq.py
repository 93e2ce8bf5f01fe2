"""pgmq's and saq's fetches as their own workers run them, and what saq's group_key does
to jobs without a group: plan shapes on a small skewed backlog (`libraries`: make
test-libraries), and the cost of each fetch as the backlog grows (`heavy`: make
test-heavy); both in make test-matrix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from harness.analysis.plans import GROWS_WITH_BACKLOG, READS_BACKLOG, nodes
from harness.run.scenario_run import RunOptions
from harness.server.kinds import Server
from tests.adapter_modules import adapter_module
from tests.integration.conftest import run_yaml

saq = adapter_module("saq")

LARGE = 2_000  # queued jobs of the large tenant: READS BACKLOG needs 1,000 or more
SKEWED = {
    "name": "fair-fetches",
    "strategies": ["pgmq", "pgmq_round_robin", "pgmq_group_head", "saq", "saq_group_key"],
    "backlog": {
        "groups": [
            {"name": "large", "tenants": 1, "jobs_per_tenant": LARGE},
            {"name": "small", "tenants": 3, "jobs_per_tenant": 1},
        ]
    },
    "explain": {"repeat": 2},
}
QUEUE_TABLE = {"pgmq": "q_harness", "saq": "saq_jobs"}


def _scans(outcome: Any, variant: str, strategy: str) -> list[set[tuple[str, str]]]:
    """Per captured fetch (the later ones, in plans.csv): each scan of the library's queue
    table, as (node type, index or '')."""
    table = QUEUE_TABLE[strategy.split("_")[0]]
    saved = outcome.folder.path / "explain" / variant / f"{strategy}.json"
    plans = json.loads(saved.read_text())["plans"]
    return [
        {
            (node["Node Type"], node.get("Index Name", ""))
            for node in nodes(plan[0]["Plan"])
            if node.get("Relation Name") == table and node["Node Type"] != "ModifyTable"
        }
        for plan in plans
    ]


@pytest.fixture(scope="module")
def skewed(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Any:
    directory = tmp_path_factory.mktemp("fair-fetches")
    return run_yaml(server, directory, yaml.safe_dump(SKEWED), RunOptions(timed=False, plots=False))


def _runs(outcome: Any, strategy: str) -> pd.DataFrame:
    runs = outcome.tables.runs
    assert runs is not None
    return runs[runs["strategy"] == strategy]


@pytest.mark.libraries
def test_pgmq_read_takes_the_head_of_its_index(skewed: Any) -> None:
    """`read`: the first visible message in msg_id order, by the primary key; a few rows
    read, whatever the backlog."""
    for scans in _scans(skewed, "backlog", "pgmq"):
        assert ("Index Scan", "q_harness_pkey") in scans
        assert not any(kind == "Seq Scan" for kind, _ in scans)
    runs = _runs(skewed, "pgmq")
    assert (runs["rows_read"] < 10).all() and (runs["flags"] == "").all()


@pytest.mark.libraries
@pytest.mark.parametrize("strategy", ["pgmq_round_robin", "pgmq_group_head"])
def test_pgmq_grouped_reads_scan_the_whole_queue(skewed: Any, strategy: str) -> None:
    """The FIFO-group reads find each group's head by a GROUP BY over every message: a
    Seq Scan of the queue on every read, flagged READS BACKLOG."""
    for scans in _scans(skewed, "backlog", strategy):
        assert ("Seq Scan", "") in scans
    runs = _runs(skewed, strategy)
    assert (runs["rows_read"] >= LARGE + 3).all()
    assert (runs["flags"] == READS_BACKLOG).all()


@pytest.mark.libraries
def test_saq_group_key_passes_over_the_active_groups_backlog(skewed: Any) -> None:
    """With the large tenant's first job active, saq's dequeue walks its index in
    `priority, scheduled` order and filters the large tenant's queued jobs away (the
    `group_key NOT IN` active groups) before it reaches a small tenant's."""
    runs = _runs(skewed, "saq_group_key")
    # saq stamps `scheduled` in whole seconds, and the harness enqueues a thousand jobs at
    # once over its pool (ENQUEUE_CHUNK): large jobs of the small ones' second and batch
    # may sit after them in the index (1,833 of 2,000 were before them at load 2), the
    # earlier batches' may not.
    assert (runs["rows_removed"] >= LARGE - saq.ENQUEUE_CHUNK).all()
    assert (runs["flags"] == READS_BACKLOG).all()
    plain = _runs(skewed, "saq")
    assert (plain["rows_removed"] == 0).all() and (plain["flags"] == "").all()


GROWING = {
    **SKEWED,
    "name": "fair-fetches-growing",
    "strategies": ["pgmq", "pgmq_round_robin", "saq_group_key"],
    "explain": {
        "repeat": 2,
        "variants": [
            {"name": "queued-10k", "jobs_per_tenant": {"large": 10_000}},
            {"name": "queued-100k", "jobs_per_tenant": {"large": 100_000}},
        ],
    },
}


@pytest.mark.heavy
def test_a_fetch_whose_cost_follows_the_backlog_shows_it(server: Server, tmp_path: Path) -> None:
    """Ten times the backlog: pgmq's round-robin read and saq's group_key dequeue read ten
    times the rows and touch several times the buffers, flagged GROWS WITH BACKLOG in the
    plans table; pgmq's `read` reads the same few, unflagged."""
    outcome = run_yaml(
        server, tmp_path, yaml.safe_dump(GROWING), RunOptions(timed=False, plots=False)
    )
    runs = outcome.tables.runs
    assert runs is not None
    medians = runs.groupby(["strategy", "variant"])[["rows_read", "shared_buffers"]].median()

    def growth(strategy: str, figure: str) -> float:
        return float(
            medians.loc[(strategy, "queued-100k"), figure]
            / medians.loc[(strategy, "queued-10k"), figure]
        )

    for strategy in ("pgmq_round_robin", "saq_group_key"):
        assert growth(strategy, "rows_read") > 8
        assert growth(strategy, "shared_buffers") > 3  # saq's: 4.7 here (index pages)
    assert growth("pgmq", "rows_read") < 1.5
    assert growth("pgmq", "shared_buffers") < 1.5
    plans = outcome.plans
    assert plans is not None
    flags = plans.groupby("strategy")["flags"].apply(list)
    for strategy in ("pgmq_round_robin", "saq_group_key"):
        assert all(GROWS_WITH_BACKLOG in flag for flag in flags[strategy])
    assert all(flag == "" for flag in flags["pgmq"])
