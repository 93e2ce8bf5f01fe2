"""The harness's own image (Dockerfile): built where a Docker engine runs, and
`docker run IMAGE harness --version` answers with this harness's version. Where no
registry is reachable the base comes from Debian's packages (.ci/harness-image.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from harness.server.container import docker_engine_answers
from tests.conftest import ROOT, harness_cli

TAG = "tenant-queue-bench:test"


def _why_not() -> str | None:
    if not docker_engine_answers(os.environ):
        return "no Docker engine answered (.ci/run starts one where it can)"
    if shutil.which("debootstrap") is None:
        return "no debootstrap to build a base image from Debian's packages"
    if not (ROOT / ".venv" / "bin" / "uv").exists():
        return "no uv in .venv (make venv installs it) to export the locked versions"
    return None


pytestmark = [
    pytest.mark.container,
    pytest.mark.slow,  # a Docker build: about a minute
    pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""),
]


def test_the_image_builds_and_runs_harness_version() -> None:
    done = subprocess.run(
        [str(ROOT / ".ci" / "harness-image.sh"), TAG],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    version = subprocess.run(
        ["docker", "run", "--rm", TAG, "harness", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    assert version == harness_cli("--version").stdout.strip()
    subprocess.run(["docker", "image", "rm", TAG], capture_output=True, check=False)
