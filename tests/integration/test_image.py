"""The harness's own image (Dockerfile): built where a Docker engine runs, and
`docker run IMAGE harness --version` answers with this harness's version. Where no
registry is reachable the base comes from Debian's packages (.ci/harness-image.sh).

Then the fleet of deploy/compose.yaml as users bring it up: the coordinator and its three
members in that image, against a PostgreSQL server in a container of the same project,
with Compose v2 (`docker compose`) where it is installed, else Debian's docker-compose
(1.29, bookworm's). The books balance, every member's work is counted, and `down`
leaves no container, network or volume of the project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.scenario.inputs import RunInputs
from harness.scenario.model import Scenario
from harness.server.container import docker_engine_answers
from tests.conftest import ROOT, harness_cli

TAG = "tenant-queue-bench:test"
SERVER_IMAGE = "postgres:17"  # the local stand-in (.ci/postgres-image.sh) where no registry is
SHIPPED = ROOT / "deploy" / "compose.yaml"


def _why_not() -> str | None:
    if not docker_engine_answers(os.environ):
        return "no Docker engine answered (.ci/run starts one where it can)"
    if shutil.which("debootstrap") is None:
        return "no debootstrap to build a base image from Debian's packages"
    if not (ROOT / ".venv" / "bin" / "uv").exists():
        return "no uv in .venv (make venv installs it) to export the locked versions"
    return None


def compose_command() -> list[str] | None:
    """Compose v2 as a Docker CLI plugin, else the docker-compose program (Debian's)."""
    if shutil.which("docker") is not None:
        plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if plugin.returncode == 0:
            return ["docker", "compose"]
    found = shutil.which("docker-compose")
    return [found] if found is not None else None


def _why_no_fleet() -> str | None:
    if compose_command() is None:
        return (
            "no Compose: neither `docker compose` nor docker-compose (apt install docker-compose)"
        )
    found = subprocess.run(
        ["docker", "image", "inspect", SERVER_IMAGE], capture_output=True, check=False
    )
    if found.returncode != 0:
        return f"no {SERVER_IMAGE} image (.ci/postgres-image.sh {SERVER_IMAGE} builds one)"
    return None


pytestmark = [
    pytest.mark.container,
    pytest.mark.slow,  # a Docker build: about a minute
    pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""),
]


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The image built once for the module's tests, removed after them."""
    done = subprocess.run(
        [str(ROOT / ".ci" / "harness-image.sh"), TAG],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    yield TAG
    subprocess.run(["docker", "image", "rm", TAG], capture_output=True, check=False)


def test_the_image_builds_and_runs_harness_version(image: str) -> None:
    version = subprocess.run(
        ["docker", "run", "--rm", image, "harness", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    assert version == harness_cli("--version").stdout.strip()


def _override(image: str) -> dict[str, object]:
    """What the test adds to the shipped file, and nothing else: a server for bench.env to
    name (users name their own), and the image this module built in place of
    tenant-queue-bench:latest (a user's own build of that name is left as it is)."""
    return {
        "services": {
            "postgres": {
                "image": SERVER_IMAGE,
                "environment": {
                    "POSTGRES_USER": "bench",
                    "POSTGRES_PASSWORD": "compose-test",
                    "POSTGRES_DB": "bench",
                },
            },
            "coordinator": {"image": image},
            "member": {"image": image},
        }
    }


def _left(project: str) -> list[str]:
    """The project's containers, networks and volumes the engine still has."""
    label = f"label=com.docker.compose.project={project}"
    found = []
    for kind in ("container", "network", "volume"):
        listed = subprocess.run(
            ["docker", kind, "ls", *(["-a"] if kind == "container" else []), "-q", "-f", label],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        found += [f"{kind} {name}" for name in listed]
    return found


@pytest.mark.skipif(_why_no_fleet() is not None, reason=_why_no_fleet() or "")
def test_the_shipped_compose_fleet_balances_its_books_and_leaves_nothing(
    image: str, tmp_path: Path
) -> None:
    """deploy/compose.yaml up as it ships (its command, bench.env, ./results, three
    member replicas started beside the coordinator), then down with its volumes."""
    (tmp_path / "bench.env").write_text(
        "PGHOST=postgres\nPGUSER=bench\nPGPASSWORD=compose-test\nPGDATABASE=bench\n"
    )
    override = tmp_path / "server.yaml"
    override.write_text(yaml.safe_dump(_override(image)))
    project = f"tqb-compose-{os.getpid()}"
    compose = [
        *(compose_command() or []),
        *("-f", str(SHIPPED), "-f", str(override)),
        *("--project-directory", str(tmp_path), "-p", project),
    ]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*compose, *args], capture_output=True, text=True, timeout=120, check=False
        )

    try:
        server = run("up", "-d", "postgres")
        assert server.returncode == 0, server.stderr
        ready = ("exec", "-T", "postgres", "pg_isready", "-q", "-U", "bench", "-d", "bench")
        deadline = time.monotonic() + 120
        while run(*ready).returncode != 0:
            assert time.monotonic() < deadline, run("logs", "postgres").stdout
            time.sleep(0.5)
        up = run("up", "-d")
        assert up.returncode == 0, up.stderr
        (coordinator,) = run("ps", "-a", "-q", "coordinator").stdout.split()
        members = run("ps", "-a", "-q", "member").stdout.split()
        assert len(members) == 3  # deploy.replicas
        codes = subprocess.run(
            ["docker", "wait", coordinator, *members],
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        ).stdout.split()
        logs = run("logs", "--no-color", "coordinator", "member").stdout
        assert codes == ["0"] * 4, logs[-4000:]
    finally:
        down = run("down", "--volumes", "--remove-orphans", "--timeout", "5")
    assert down.returncode == 0, down.stderr
    assert _left(project) == []

    folder = tmp_path / "results" / "latest"
    document = json.loads((folder / "run.json").read_text())
    assert document["status"] == "complete", document["error"]
    command = yaml.safe_load(SHIPPED.read_text())["services"]["coordinator"]["command"]
    scenario = Scenario.model_validate(
        yaml.safe_load((ROOT / "scenarios" / f"{command[2]}.yaml").read_text())
    )
    total = RunInputs.of(scenario).total_jobs
    repetitions = document["repetitions"]
    assert len(repetitions) == len(scenario.strategies) * scenario.repetitions
    assert [(entry["books"], entry["jobs"]) for entry in repetitions] == [
        ("balanced", total)
    ] * len(repetitions)
    assert all(len(entry["fleet"]) == 3 for entry in repetitions)
    jobs = pd.read_csv(folder / "jobs.csv")
    each = jobs.groupby(["strategy", "workers", "repetition"])["job_id"]
    assert each.nunique().tolist() == each.size().tolist() == [total] * len(repetitions)
    assert set(jobs["member"]) >= {1, 2, 3}  # every member's claims counted
    assert jobs["host"].nunique() >= 3  # each in its own container
