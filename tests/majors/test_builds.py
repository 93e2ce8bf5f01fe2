"""What a major's build lacks, said rather than failed: the pgserver wheel's PostgreSQL 16
has no contrib modules, so no auto_explain, with which a queue library's fetch is
captured from its own sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.queues.catalog import catalog, traits
from harness.run.scenario_run import RunOptions, run_scenario
from harness.scenario.loader import load_scenario
from harness.server.providers import open_server
from tests.majors.conftest import major_choice
from tests.majors.test_trap_per_major import Quiet

LIBRARY_PLANS = {
    "name": "library-plans",
    "workers": 2,
    "strategies": ["fifo", "procrastinate_lock_per_tenant"],
    "repetitions": 1,
    "backlog": {
        "groups": [
            {"name": "large", "tenants": 1, "jobs_per_tenant": 50},
            {"name": "idle", "tenants": 5, "jobs_per_tenant": 0},
        ]
    },
    "explain": {"repeat": 1},
}


def test_16_without_auto_explain_skips_a_librarys_capture_saying_why(tmp_path: Path) -> None:
    """On 16 (the pgserver wheel) `load 'auto_explain'` fails: the library's capture is
    skipped with the reason, in a second, where its worker's sessions would fail to
    start; the strategies the harness explains itself are captured as on every major."""
    choice = major_choice(16)
    if choice.target.install is not None and "pgserver" not in choice.target.install.source:
        pytest.skip(f"16 is {choice.target.install.source} here, not the pgserver wheel")
    path = tmp_path / "library-plans.yaml"
    path.write_text(yaml.safe_dump(LIBRARY_PLANS))
    entries = catalog()
    with open_server(choice) as server:
        rendered = run_scenario(
            load_scenario(path, traits(entries)),
            entries,
            server,
            tmp_path / "results",
            Quiet(),
            RunOptions(timed=False),
        )
    skipped = {entry.strategy: entry.skipped for entry in rendered.document.plans}
    assert skipped["fifo"] is None
    reason = skipped["procrastinate_lock_per_tenant"] or ""
    assert reason.startswith("no auto_explain: its fetch is captured with auto_explain")
