"""The trust holes of issue 28 that need no server: a fleet assignment's size, a results
document's, the Node binary's pin, a prepared adapter folder's seal, and what a
program's environment keeps of the caller's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.errors import HarnessError
from harness.queues.contract.manifest import SHIPPED
from harness.server import run_user

NODE = SHIPPED / "node"
HUNDRED_MB = 100 * 1024 * 1024


# -- a program's environment --------------------------------------------------------------


def test_a_program_gets_none_of_the_callers_variables_but_the_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("PGPASSWORD", "secret")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = run_user.environment({"LD_LIBRARY_PATH": "/opt/pg/lib"})
    assert "AWS_SECRET_ACCESS_KEY" not in env and "PGPASSWORD" not in env
    assert env["LC_ALL"] == "C.UTF-8" and env["PATH"] == os.environ["PATH"]
    assert env["LD_LIBRARY_PATH"] == "/opt/pg/lib" and {"HOME", "USER", "LOGNAME"} <= set(env)


@pytest.mark.skipif(os.geteuid() == 0, reason="as root, --run-user names the run's user")
def test_run_user_is_refused_where_the_harness_is_not_root() -> None:
    with pytest.raises(HarnessError, match=r"^--run-user: the harness is not running as root"):
        run_user.choose("someone")


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-user is for a root run")
@pytest.mark.parametrize("name", ["root", "nobody"])
def test_run_user_is_never_root_or_nobody(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "noisy-neighbour", "--run-user", name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.strip() == (
        f"error: --run-user: '{name}' is not allowed: a run's programs never run as root "
        "or as the shared nobody; name a user of their own (or leave it out: the harness "
        "makes one)"
    )
