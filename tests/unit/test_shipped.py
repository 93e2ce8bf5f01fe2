"""The shipped scenarios and baseline, by name and from any folder; the scenario schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from harness.commands.check import PROBES, baseline_file, check_paths
from harness.commands.schema import scenario_schema
from harness.errors import HarnessError
from harness.shipped import scenario_file, shipped_dir, shipped_scenarios
from tests.conftest import ROOT, SCENARIOS, SHORT_NOISY, harness_cli

SCHEMA_FILE = ROOT / "docs" / "scenario.schema.json"


def test_every_shipped_scenario_has_a_name() -> None:
    assert set(shipped_scenarios()) == {path.stem for path in SCENARIOS.glob("*.yaml")}
    assert shipped_dir("baselines") == ROOT / "baselines"  # a checkout reads its own folders


def test_a_name_is_the_shipped_scenario_and_a_file_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shipped = SCENARIOS / "noisy-neighbour.yaml"
    assert scenario_file(Path("noisy-neighbour")) == shipped
    assert scenario_file(Path("noisy-neighbour.yaml")) == shipped
    (tmp_path / "noisy-neighbour.yaml").write_text(SHORT_NOISY)
    assert scenario_file(Path("noisy-neighbour.yaml")) == Path("noisy-neighbour.yaml")
    elsewhere = Path("elsewhere/noisy-neighbour.yaml")  # a path is never a name
    assert scenario_file(elsewhere) == elsewhere


def test_a_misspelt_name_says_the_one_meant_and_another_lists_them(tmp_path: Path) -> None:
    done = harness_cli("validate", "noisy-neighbor", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr == (
        "error: noisy-neighbor: no such file, nor a shipped scenario of that name; did you "
        "mean noisy-neighbour? (harness scenarios)\n"
    )
    other = harness_cli("validate", "nosy", cwd=tmp_path)
    assert other.returncode == 2 and "; shipped: awa-queues, " in other.stderr
    assert "noisy-neighbour, " in other.stderr


def test_validate_and_scenarios_work_from_an_empty_folder(tmp_path: Path) -> None:
    done = harness_cli("validate", "noisy-neighbour", "skewed-backlog.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "noisy-neighbour.yaml: ok (1,050 jobs per repetition" in done.stdout
    listed = harness_cli("scenarios", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for name in shipped_scenarios():
        assert f"│ {name} " in listed.stdout
    assert "One large tenant's 1,000-job import" in listed.stdout


def test_the_check_reads_the_current_folder_first_and_writes_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    BASELINE = baseline_file(17)  # noqa: N806
    shipped = (ROOT / BASELINE, ROOT / PROBES)
    assert check_paths(None, None, update_baseline=False) == shipped
    assert check_paths(None, None, update_baseline=True) == (BASELINE, ROOT / PROBES)
    (tmp_path / "baselines").mkdir()
    (tmp_path / BASELINE).write_text("{}")
    assert check_paths(None, None, update_baseline=False) == (BASELINE, ROOT / PROBES)
    assert check_paths(Path("b.json"), Path("p.yaml"), False) == (Path("b.json"), Path("p.yaml"))


def test_version_is_the_package_version() -> None:
    from importlib.metadata import version

    done = harness_cli("--version", cwd=ROOT)
    assert done.returncode == 0
    assert done.stdout == f"harness (tenant-queue-bench) {version('tenant-queue-bench')}\n"


def test_the_committed_schema_is_what_harness_schema_prints(tmp_path: Path) -> None:
    done = harness_cli("schema", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == SCHEMA_FILE.read_text(encoding="utf-8"), (
        "docs/scenario.schema.json is stale: harness schema > docs/scenario.schema.json"
    )
    assert json.loads(done.stdout) == scenario_schema()


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_the_schema_accepts_every_shipped_scenario(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), scenario_schema())


def test_the_schema_refuses_what_the_loader_refuses() -> None:
    scenario = yaml.safe_load(SHORT_NOISY)
    schema = scenario_schema()
    for broken in (
        {**scenario, "wokers": 2},
        {**scenario, "workers": 0},
        {**scenario, "tenant_groups": [{**scenario["tenant_groups"][0], "duration_ms": -1}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)
    with pytest.raises(HarnessError):
        scenario_file(Path("no-such-scenario"))
