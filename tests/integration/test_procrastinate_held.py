"""procrastinate under a held snapshot, in `make test` (test_procrastinate_faults.py
says why)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.server.kinds import Server
from tests.conftest import harness_cli
from tests.integration.test_procrastinate_faults import JOBS


def test_procrastinate_under_a_held_snapshot_leaves_dead_versions_in_its_own_table(
    server: Server, tmp_path: Path
) -> None:
    """A snapshot held from 0.5 s for 1.5 s while procrastinate works (a held snapshot is
    a scenario's long_transaction, measured apart from `faults`): every job done once,
    and its own jobs table sampled during the hold with dead versions it cannot prune.
    Its fetches are explained (explain_fetches): the jobs are all queued at the start
    and take 3 s of work at least, so its workers fetch in every phase, and each job's
    one fetch is a plan that returned it."""
    path = tmp_path / "held.yaml"
    path.write_text(HELD)
    results = tmp_path / "results"
    options = ["--dsn", server.dsn, "--results-dir", str(results), "--no-plots"]
    done = harness_cli("run", str(path), *options, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    run = (results / "latest").resolve()
    (entry,) = json.loads((run / "run.json").read_text())["repetitions"]
    assert (entry["books"], entry["jobs"]) == ("balanced", JOBS), entry
    samples = pd.read_csv(run / "bloat.csv")
    held = samples[samples["phase"] == "during"]
    assert held["holder_xmin_age"].notna().all()
    dead = [column for column in samples if column.endswith("jobs_dead_versions")]
    assert dead and held[dead].max().max() > 0, list(samples)
    fetches = pd.read_csv(run / "fetch-plans.csv")
    assert set(fetches["phase"]) == {"before", "during", "after"}, fetches["phase"].value_counts()
    assert (fetches["rows"] == 1).sum() == JOBS
    assert (fetches["shared_buffers"] == fetches["shared_hit"] + fetches["shared_read"]).all()
    assert fetches["at_s"].is_monotonic_increasing and fetches["top_node"].notna().all()
    hold = entry["long_transaction"]
    assert (hold["explained_fetches"], hold["fetches_skipped"]) == (len(fetches), None)
    summary = pd.read_csv(run / "bloat-summary.csv")
    assert summary[[f"fetches_{p}" for p in ("before", "during", "after")]].min().min() > 0


HELD = f"""\
name: procrastinate-held
strategies: [procrastinate]
workers: 2
repetitions: 1
poll_interval_ms: 50
timeout_s: 15
long_transaction: {{from_s: 0.5, for_s: 1.5, explain_fetches: true}}
tenant_groups:
  - {{name: large, tenants: 1, jobs_per_tenant: {JOBS}, duration_ms: 30}}
"""
