"""The adversarial scenarios' shapes, small, through the harness's own strategies on a
real server with pg_stat_statements loaded: a sybil's keys, a tenant's job types, a hot
tenant's backlog, and an idle window's fetches (scenarios/sybil.yaml, cross-task.yaml,
hot-tenant-100k.yaml, queue-per-tenant-poll.yaml at full size are run by hand: their
figures are in docs/real-queues.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from harness.results.jobs import load_jobs
from harness.run.render import Rendered
from harness.run.scenario_run import RunOptions
from harness.server.kinds import Server, ServerOptions
from harness.server.providers import choose_provider, open_server
from tests.integration.conftest import run_yaml

KEYED = """\
name: keyed
workers: 2
strategies: [fifo, round_robin, capped]
repetitions: 1
poll_interval_ms: 5
timeout_s: 60
tenant_cap: 1
report: {{mappings: true}}
tenant_groups:
  - {{name: flood, tenants: 1, keys: {keys}, jobs_per_tenant: 60, duration_ms: 2}}
  - {{name: small, tenants: 3, jobs_per_tenant: 2, duration_ms: 2, enqueue_at_s: 0.05}}
"""

HOT = """\
name: hot
workers: 4
strategies: [fifo, round_robin]
repetitions: 1
poll_interval_ms: 5
timeout_s: 60
report: {mappings: true}
tenant_groups:
  - {name: hot, tenants: 1, jobs_per_tenant: 2000, duration_ms: 0}
  - {name: small, tenants: 3, jobs_per_tenant: 2, duration_ms: 0, enqueue_at_s: 0.1,
     repeat: 3, every_s: 0.2}
"""

POLL = """\
name: poll
workers: [1, 4]
strategies: [fifo]
repetitions: 1
poll_interval_ms: 100
timeout_s: 60
idle: {from_s: 1, for_s: 2}
report: {mappings: true}
tenant_groups:
  - {name: tenants, tenants: 5, jobs_per_tenant: 2, duration_ms: 1}
  - {name: late, tenants: 1, jobs_per_tenant: 1, duration_ms: 1, enqueue_at_s: 3.3}
"""


@pytest.fixture(scope="module")
def counted_server() -> Iterator[Server]:
    """An embedded server as a scenario with an idle window gets it: pg_stat_statements."""
    choice = choose_provider(ServerOptions(pg="embedded"), {})
    with open_server(replace(choice, statement_stats=True)) as running:
        yield running


def table(run: Rendered, name: str) -> pd.DataFrame:
    return pd.read_csv(run.folder.path / name)


@pytest.mark.parametrize("keys", [20, 3])  # sybil.yaml's and cross-task.yaml's
def test_a_tenant_under_keys_is_many_to_the_queue_and_one_in_the_figures(
    server: Server, tmp_path: Path, keys: int
) -> None:
    run = run_yaml(server, tmp_path, KEYED.format(keys=keys), RunOptions(plots=False))
    jobs = load_jobs(run.folder.path)
    assert len(jobs) == 3 * (60 + 3 * 2)
    flood = jobs[jobs["tenant_class"] == "flood"]
    assert (flood.groupby("strategy")["tenant_id"].nunique() == keys).all()
    assert (flood.groupby(["strategy", "tenant_id"]).size() == 60 // keys).all()
    tenants = table(run, "tenants.csv")
    assert (tenants.groupby("strategy").size() == 1 + 3).all()  # the flood is one tenant
    assert set(tenants.loc[tenants["tenant_class"] == "flood", "jobs"]) == {60}
    mappings = table(run, "mappings.csv")
    assert list(mappings["strategy"]) == ["fifo", "round_robin", "capped"]
    assert set(mappings["flood_class"]) == {"flood"}
    assert mappings.loc[0, "flood_vs_first"] == 1
    assert mappings["jain_index"].between(0, 1).all()


def test_a_hot_tenants_backlog_and_the_small_tenants_beside_it(
    server: Server, tmp_path: Path
) -> None:
    run = run_yaml(server, tmp_path, HOT, RunOptions(plots=False))
    jobs = load_jobs(run.folder.path)
    assert jobs.groupby("strategy").size().to_dict() == {"fifo": 2018, "round_robin": 2018}
    waits = (jobs["started_at"] - jobs["enqueued_at"]).dt.total_seconds()
    small = waits[jobs["tenant_class"] == "small"].groupby(jobs["strategy"]).median()
    # FIFO serves the small tenants after the hot tenant's backlog; round-robin does not
    assert small["fifo"] > small["round_robin"]
    assert set(table(run, "mappings.csv")["flood_class"]) == {"hot"}


def test_an_idle_queues_fetches_are_counted_and_grow_with_its_workers(
    counted_server: Server, tmp_path: Path
) -> None:
    run = run_yaml(counted_server, tmp_path, POLL, RunOptions(plots=False))
    idle = table(run, "idle.csv").set_index("workers")
    assert (idle["jobs_done"] == 0).all()  # the window was idle
    assert (idle["fetches"] > 0).all()
    assert (idle["statements"] >= idle["fetches"]).all()
    assert idle["unmeasured"].isna().all()
    assert (idle["fetch_marker"] == "skip locked").all()
    # each worker polls on its own (every 0.1 s): four poll about four times as often
    assert idle.loc[4, "fetches"] > 2 * idle.loc[1, "fetches"]
    assert idle["server_cpu_s"].notna().all()
    results = (run.folder.path / "results.json").read_text()
    assert "poll: fifo, 4 workers: idle fetches a second" in results


LIBRARY_POLL = """\
name: library-poll
workers: 2
strategies: [fifo, awa, awa_weighted_queues]
repetitions: 1
poll_interval_ms: 200
timeout_s: 120
idle: {from_s: 6, for_s: 3}
tenant_groups:
  - {name: tenants, tenants: 12, jobs_per_tenant: 1, duration_ms: 1}
  - {name: late, tenants: 1, jobs_per_tenant: 1, duration_ms: 1, enqueue_at_s: 9.5}
"""


@pytest.mark.libraries
def test_a_queue_per_tenant_polls_each_queue_where_one_queue_polls_once(
    counted_server: Server, tmp_path: Path
) -> None:
    """awa's weighted queues, one per tenant, each its own dispatcher: idle, they fetch
    about as often as there are queues, where its one queue fetches once a poll."""
    run = run_yaml(counted_server, tmp_path, LIBRARY_POLL, RunOptions(plots=False))
    idle = table(run, "idle.csv").set_index("strategy")
    assert list(idle.index) == ["fifo", "awa", "awa_weighted_queues"]
    assert (idle["jobs_done"] == 0).all()
    assert (idle["fetches"] > 0).all()
    assert idle.loc["awa_weighted_queues", "fetches"] > 3 * idle.loc["awa", "fetches"]
