"""The throughput scenario in small: a drained backlog through every library's one-queue
mapping, default and tuned, in one run. Slow (minutes): outside `make test`, in `make
throughput` (the `throughput` marker), which .ci/run runs too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.queues.contract.manifest import load_adapters
from harness.server.kinds import Server
from tests.integration.conftest import run_yaml

pytestmark = pytest.mark.throughput

LIBRARIES = [
    "procrastinate",
    "procrastinate_tuned",
    "pgqueuer",
    "pgqueuer_tuned",
    "pgboss_tuned",
    "graphile_worker",
    "graphile_worker_tuned",
]
DRAIN = {
    "name": "drain-small",
    "workers": 24,
    "repetitions": 1,
    "poll_interval_ms": 10,
    "timeout_s": 300,
    "backlog": {
        "drain": True,
        "groups": [{"name": "one", "tenants": 1, "jobs_per_tenant": 3000, "duration_ms": 0}],
    },
}


def test_every_one_queue_mapping_drains_the_backlog_default_and_tuned(
    server: Server, tmp_path: Path
) -> None:
    """Books balanced for each (or the run fails); the throughput table has every mapping,
    each library's default beside its tuned one; the Python libraries' claims are timed;
    graphile-worker's local queue and batched completion outrun its default job by job."""
    node = {m.strategy for adapter in load_adapters().values() for m in adapter.manifest.mappings}
    names = [name for name in LIBRARIES if name not in node or shutil.which("npm")]
    scenario = {**DRAIN, "strategies": ["fifo", *names]}
    outcome = run_yaml(server, tmp_path, yaml.safe_dump(scenario))
    table = outcome.tables.throughput
    assert table is not None
    by = table.set_index("strategy")
    assert sorted(by.index) == sorted(scenario["strategies"])
    assert (by["jobs"] == 3000).all()
    for python in ("procrastinate", "procrastinate_tuned", "pgqueuer", "pgqueuer_tuned"):
        assert by.loc[python, "claim_p50_ms"] > 0
    summary = (outcome.folder.path / "summary.md").read_text()
    said = {line for line in summary.splitlines() if "`pgqueuer_tuned` (pgqueuer, tuned): " in line}
    assert len(said) == 1, said  # the same line under each table that names it
    settings = set(said.pop().split(": ", 1)[1].split(", "))
    assert {"batch_size=10", "queue_managers=5"} <= settings, settings
    if "graphile_worker" in by.index:
        assert by.loc["graphile_worker_tuned", "jobs_s"] > 2 * by.loc["graphile_worker", "jobs_s"]
