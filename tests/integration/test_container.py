"""The container provider on a real Docker engine: PostgreSQL 17 from the image (on this
project's machines the local stand-in that .ci/postgres-image.sh builds), its own URL,
one-line errors, a crash and a restart on the same address, and no container left on
any path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pandas as pd
import pytest

from harness.errors import ProviderUnavailable
from harness.run.faults import OUTCOMES
from harness.server import container as provider
from harness.server.connections import connect
from harness.server.container import OWNER_LABEL, docker_engine_answers, owner
from harness.server.kinds import ServerOptions
from harness.server.providers import choose_provider, open_server
from tests.conftest import SHORT_NOISY

IMAGE = "postgres:17"


def _why_not() -> str | None:
    if not docker_engine_answers(os.environ):
        return "no Docker engine answered (.ci/run starts one where it can)"
    done = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False)
    if done.returncode != 0:
        return f"no {IMAGE} image on the engine (.ci/postgres-image.sh builds a local stand-in)"
    return None


pytestmark = [
    pytest.mark.container,
    pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""),
]


def ours(*harnesses: int) -> list[str]:
    """The ids of every container made by this test process or by one of the harness
    processes `harnesses`, running or not. The engine may be shared: containers of other
    runs (another checkout's tests) carry another owner and are none of ours."""
    owners = [owner(pid) for pid in (os.getpid(), *harnesses)]
    found = []
    for value in owners:
        done = subprocess.run(
            ["docker", "ps", "--all", "--quiet", "--filter", f"label={OWNER_LABEL}={value}"],
            capture_output=True,
            text=True,
            check=True,
        )
        found += done.stdout.split()
    return found


@pytest.fixture(autouse=True)
def started() -> Iterator[list[int]]:
    """The harness processes the test starts; none may leave a container behind."""
    assert ours() == [], "a container of an earlier test is still there"
    pids: list[int] = []
    yield pids
    assert ours(*pids) == [], "the container was not removed"


def derived_image(name: str, entrypoint: str) -> Iterator[str]:
    """postgres:17 with another entrypoint; removed afterwards."""
    created = subprocess.run(
        ["docker", "create", IMAGE], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(
        ["docker", "commit", "--change", f"ENTRYPOINT {entrypoint}", created, name],
        capture_output=True,
        check=True,
    )
    subprocess.run(["docker", "rm", created], capture_output=True, check=True)
    yield name
    subprocess.run(["docker", "rmi", "--force", name], capture_output=True, check=False)


@pytest.fixture(scope="module")
def broken_image() -> Iterator[str]:
    """Its entrypoint fails at once."""
    yield from derived_image(
        "tqb-test-broken:latest", '["sh", "-c", "echo broken on purpose >&2; exit 3"]'
    )


@pytest.fixture(scope="module")
def silent_image() -> Iterator[str]:
    """Its entrypoint starts no server and waits."""
    yield from derived_image("tqb-test-silent:latest", '["sleep", "600"]')


def harness(started: list[int], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m harness ARGS` to its end, its pid among those `started`."""
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(run.pid)
    out, err = run.communicate(timeout=300)
    return subprocess.CompletedProcess(run.args, run.returncode, out, err)


def test_the_server_is_postgres_17_reached_by_the_containers_own_url() -> None:
    with open_server(choose_provider(ServerOptions(pg="container"), {})) as server:
        (container_id,) = ours()
        with connect(server.dsn) as conn:
            version = conn.info.server_version
            user, database = conn.execute("select current_user, current_database()").fetchone()
        env = subprocess.run(
            ["docker", "inspect", "--format", "{{json .Config.Env}}", container_id],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert version // 10000 == 17
    url = urlsplit(server.dsn)
    variables = dict(item.split("=", 1) for item in json.loads(env))
    assert (unquote(url.username or ""), unquote(url.password or "")) == (
        variables["POSTGRES_USER"],
        variables["POSTGRES_PASSWORD"],
    )
    assert (user, database) == (variables["POSTGRES_USER"], variables["POSTGRES_DB"])
    assert variables["POSTGRES_PASSWORD"] != "test"  # a password of its own, not the default
    assert url.hostname in ("localhost", "127.0.0.1")
    assert server.details["image"] == IMAGE and variables["POSTGRES_PASSWORD"] not in str(
        server.details
    )


def test_a_run_balances_its_books_and_leaves_no_container(
    started: list[int], tmp_path: Path
) -> None:
    done = harness(started, "run", "--pg", "container", "large-tenant-alone", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = json.loads((tmp_path / "results" / "latest" / "run.json").read_text())
    assert run["status"] == "complete"
    assert [rep["books"] for rep in run["repetitions"]] == ["balanced"] * 4
    assert run["servers"][0]["postgres"]["server_version_num"] // 10000 == 17
    assert run["servers"][0]["provider"]["kind"] == "container"
    assert run["servers"][0]["provider"]["image"] == IMAGE


def test_a_crash_and_a_restart_keep_the_data_and_the_address() -> None:
    """The server crashed (SIGQUIT: no checkpoint) and started again in the same
    container, on the port its URL names: a row committed before the crash is there, read
    through the same URL, and the server's log says it replayed the WAL. A restart (fast
    shutdown) the same way, with nothing to recover."""
    with open_server(choose_provider(ServerOptions(pg="container"), {})) as server:
        assert server.crash is not None and server.restart is not None
        with connect(server.dsn) as conn:
            conn.execute("create table kept as select generate_series(1, 1000) as n")
        recovery = server.crash(0.2)
        with connect(server.dsn) as conn:
            assert conn.execute("select count(*) from kept").fetchone() == (1000,)
            conn.execute("insert into kept values (1001)")
        server.restart()
        with connect(server.dsn) as conn:
            assert conn.execute("select count(*) from kept").fetchone() == (1001,)
        (_,) = ours()  # the one container, started again
    assert recovery[0].startswith("database system was interrupted"), recovery
    assert any(said.startswith("redo starts at") for said in recovery), recovery


CRASHED = """\
name: container-crash
strategies: [fifo, procrastinate]
workers: 2
repetitions: 1
poll_interval_ms: 20
timeout_s: 10
faults:
  server_crash: {at_s: 0.5, down_s: 0.5}
  restart_exited_after_s: 0.2
tenant_groups:
  - {name: large, tenants: 1, jobs_per_tenant: 60, duration_ms: 30}
"""


def test_a_server_crash_in_the_container_leaves_every_job_counted(
    started: list[int], tmp_path: Path
) -> None:
    """faults.server_crash on --pg container: the harness's fifo and procrastinate each
    through an immediate shutdown at 0.5 s, up again 0.5 s later on its crash recovery.
    fifo's books balance (every job done once); procrastinate's jobs are each in one
    outcome, none run twice; each crash happened, and its recovery replayed the WAL."""
    scenario = tmp_path / "crash.yaml"
    scenario.write_text(CRASHED)
    done = harness(started, "run", "--pg", "container", str(scenario), "--no-plots", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = tmp_path / "results" / "latest"
    fifo, procrastinate = json.loads((folder / "run.json").read_text())["repetitions"]
    faults, library = fifo["faults"], procrastinate["library_faults"]
    assert (fifo["books"], fifo["jobs"], faults["lost"]) == ("balanced", 60, 0), faults
    assert faults["duplicates"] == faults["stuck"] == 0, faults
    assert sum(library[outcome] for outcome in OUTCOMES) == 60, library
    assert library["duplicated"] == 0, library
    for recovery in (faults["crash_recovery"], library["crash_recovery"]):
        assert any(said.startswith("redo starts at") for said in recovery), recovery
    assert library["server_crashes"] == 1 and library["back_at_s"] >= 1.0, library
    table = pd.read_csv(folder / "faults.csv")
    assert table["server_crashes"].tolist() == [1], table


def test_an_image_that_cannot_be_pulled_is_one_line_and_exit_2(
    started: list[int], tmp_path: Path
) -> None:
    done = harness(
        started, "run", "--image", "tqb-test-absent:1", "large-tenant-alone", cwd=tmp_path
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        "error: --pg container: the image tqb-test-absent:1 is not on this Docker engine "
        "and could not be pulled ("
    )
    assert not (tmp_path / "results").exists()


def test_a_container_that_exits_at_start_is_one_line_and_removed(
    broken_image: str, started: list[int], tmp_path: Path
) -> None:
    done = harness(started, "run", "--image", broken_image, "large-tenant-alone", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: --pg container: the container of {broken_image} exited at start: "
        "broken on purpose\n"
    )


def test_a_server_that_never_answers_is_one_line_and_removed(
    silent_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provider, "READY_TIMEOUT_S", 3)
    choice = choose_provider(ServerOptions(image=silent_image), {})
    began = time.monotonic()
    with (
        pytest.raises(ProviderUnavailable, match="did not accept connections in 3 s: "),
        open_server(choice),
    ):
        pass
    assert time.monotonic() - began < 30


@pytest.mark.parametrize("moment", ["starting", "running"])
def test_ctrl_c_removes_the_container(moment: str, started: list[int], tmp_path: Path) -> None:
    scenario = tmp_path / "long.yaml"
    scenario.write_text(SHORT_NOISY.replace("jobs_per_tenant: 200", "jobs_per_tenant: 5000"))
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "--pg", "container", str(scenario)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(run.pid)
    deadline = time.monotonic() + 120
    while not _reached(moment, run) and time.monotonic() < deadline:
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, out + err
    assert err.startswith("interrupted:")


def _reached(moment: str, run: subprocess.Popen[str]) -> bool:
    if moment == "starting":
        return bool(ours(run.pid))
    assert run.stdout is not None
    return "short-noisy:" in run.stdout.readline()


def _majors_missing(images: tuple[str, ...]) -> str | None:
    for image in images:
        done = subprocess.run(
            ["docker", "image", "inspect", image], capture_output=True, check=False
        )
        if done.returncode != 0:
            return f"no {image} image on the engine (.ci/postgres-image.sh {image} builds one)"
    return None


MAJOR_IMAGES = ("postgres:15", "postgres:18")


@pytest.mark.skipif(
    _majors_missing(MAJOR_IMAGES) is not None, reason=_majors_missing(MAJOR_IMAGES) or ""
)
def test_each_major_runs_in_its_own_image(started: list[int], tmp_path: Path) -> None:
    """--pg container --pg-version 15,18: postgres:15, then postgres:18, one run folder."""
    done = harness(
        started,
        "explain",
        "dequeue-check",
        "--pg",
        "container",
        "--pg-version",
        "15,18",
        "--strategy",
        "fifo",
        "--variant",
        "skewed",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    run = json.loads((tmp_path / "results" / "latest" / "run.json").read_text())
    servers = run["servers"]
    assert [server["provider"]["image"] for server in servers] == list(MAJOR_IMAGES)
    assert [server["postgres"]["server_version_num"] // 10000 for server in servers] == [15, 18]
    assert [entry["pg_version"] for entry in run["plans"]] == [s["pg_version"] for s in servers]
