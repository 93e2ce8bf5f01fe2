"""What a run records about its environment: every package, the lock, libpq."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import psycopg

from harness.report.html import _provenance
from harness.results.document import RunDocument, ScenarioRef
from harness.server.provenance import collect_lock, collect_python, cpu_ticks, over_the_run
from tests.conftest import ROOT

LOCK = ROOT / "uv.lock"


def test_a_run_records_libpq_every_package_and_the_lock() -> None:
    python = collect_python()
    assert python["libpq"]["version_num"] == psycopg.pq.version()
    assert re.fullmatch(r"\d+\.\d+", python["libpq"]["version"])
    for name in ("numpy", "psycopg", "psycopg-binary", "typer", "pyyaml"):
        assert python["installed"][name] == version(name)
    assert python["lock"]["sha256"] == hashlib.sha256(LOCK.read_bytes()).hexdigest()


def test_the_lock_names_each_package_installed_at_another_version(tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text(
        'version = 1\n[[package]]\nname = "tenant-queue-bench"\nsource = { editable = "." }\n'
        '[[package]]\nname = "NumPy"\nversion = "2.4.6"\n'
        '[[package]]\nname = "numpy"\nversion = "2.5.5"\n'
        '[[package]]\nname = "Typing_Extensions"\nversion = "4.0.0"\n'
    )
    installed = {"numpy": "2.5.5", "typing-extensions": "4.16.0", "pip": "23.2.1"}
    recorded = collect_lock(lock, installed)
    assert recorded is not None
    assert recorded["differs"] == {
        "typing-extensions": {"locked": ["4.0.0"], "installed": "4.16.0"}
    }
    assert collect_lock(tmp_path / "absent.lock", installed) is None


def test_the_dev_tools_are_pinned_and_make_bootstraps_the_locked_uv() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    dev = pyproject["dependency-groups"]["dev"]  # the repository's tools, never published
    assert "dev" not in project.get("optional-dependencies", {})
    assert all("==" in requirement for requirement in dev), dev
    packages = tomllib.loads(LOCK.read_text())["package"]
    locked_uv = {p["version"] for p in packages if p["name"] == "uv"}
    pinned = re.search(r"^UV_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert pinned is not None and {pinned[1]} == locked_uv
    assert "numpy" in {re.split(r"[<>=;\[ ]", r)[0] for r in project["dependencies"]}


def test_the_lock_is_up_to_date_with_pyproject() -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv is not None, "uv is part of the dev tools (make venv)"
    done = subprocess.run(
        [uv, "lock", "--check", "--offline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"uv.lock is stale: make lock\n{done.stderr}"


def test_the_report_shows_libpq_and_the_lock() -> None:
    python = collect_python()
    document = RunDocument(
        run_id="r",
        started_at="2026-01-01T00:00:00Z",
        scenario=ScenarioRef(name="s", path="s.yaml", sha256="0" * 64, seed=1),
        metadata={"python": python, "provider": {"kind": "embedded"}},
    )
    page = _provenance(document)
    assert f"<td class='text'>{python['libpq']['version']} (psycopg " in page
    assert f"uv.lock sha256 {python['lock']['sha256'][:12]}; not as locked: " in page


def test_the_environment_is_read_once_and_each_run_gets_its_own_copy() -> None:
    first = collect_python()
    first["installed"]["numpy"] = "0"  # a run's document changed after the fact
    second = collect_python()
    assert second["installed"]["numpy"] == version("numpy")
    assert second["lock"] == collect_python()["lock"]


STAT = "cpu  {user} 0 {system} {idle} {iowait} 0 {softirq} 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def test_the_machine_over_the_run_is_its_cpu_ticks_busy_between_start_and_end() -> None:
    """/proc/stat's first line at the start and at the end: of 1,000 ticks, 250 busy
    (user, system, softirq), 750 idle or waiting on I/O: 25 %, the run's own included."""
    start = cpu_ticks(STAT.format(user=100, system=50, idle=800, iowait=50, softirq=0))
    assert start == {"busy": 150, "total": 1000}
    end = cpu_ticks(STAT.format(user=300, system=90, idle=1500, iowait=100, softirq=10))
    over = over_the_run({"cpu_ticks": start}, now=end)
    assert over["cpu_busy_share"] == 0.25
    assert over_the_run({"cpu_ticks": None}, now=end)["cpu_busy_share"] is None
    assert over_the_run({"cpu_ticks": end}, now=start)["cpu_busy_share"] is None  # no time
    assert cpu_ticks("intr 1 2 3\n") is None and cpu_ticks("") is None
    here = cpu_ticks()  # this machine's, where it has /proc
    assert here is None or 0 <= here["busy"] <= here["total"]


def test_the_report_says_how_busy_the_machine_was_over_the_run() -> None:
    host = {
        "cpu_count": 2,
        "load_average": [0.5, 0.25, 0.125],
        "over_the_run": {"cpu_busy_share": 0.25, "load_average_end": [1.0, 0.75, 0.5]},
    }
    document = RunDocument(
        run_id="r",
        started_at="2026-01-01T00:00:00Z",
        scenario=ScenarioRef(name="s", path="s.yaml", sha256="0" * 64, seed=1),
        metadata={"host": host},
    )
    page = _provenance(document)
    assert (
        "load average (1/5/15 min) 0.50/0.25/0.12 at the start, 1.00/0.75/0.50 at the end; "
        "25% of its 2 CPUs&#x27; time busy over the run" in page
    )
    del host["over_the_run"]  # a run.json from before: the start's load alone
    assert "0.50/0.25/0.12 at the start</td>" in _provenance(document)
