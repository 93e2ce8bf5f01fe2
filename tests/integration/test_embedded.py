"""The embedded provider: a real PostgreSQL 17.10, stopped and removed afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from harness.server.builds import CELERP, Wheel
from harness.server.embedded import reachable_install
from harness.server.kinds import Server, ServerOptions
from harness.server.providers import choose_provider, open_server
from harness.server.run_user import program_args, run_user, shared_cache


def command_lines() -> dict[int, str]:
    """Every running process's command line, by pid."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
    return found


def postgres_processes(data_dir: str) -> list[str]:
    """Command lines of running processes that mention the data directory."""
    return [cmdline for cmdline in command_lines().values() if data_dir in cmdline]


def test_the_server_is_postgres_17_on_a_unix_socket(server: Server) -> None:
    with psycopg.connect(server.dsn) as conn:
        assert conn.info.server_version // 10000 == 17
        listen = conn.execute("show listen_addresses").fetchone()
        assert listen == ("",)
        assert conn.info.host.startswith("/")


def test_it_runs_unprivileged_even_for_root(server: Server) -> None:
    user = run_user()
    if user is not None:  # root: the run's own user, never root or nobody
        assert server.details["run_as"] == user.name and user.uid not in (0, 65534)
    with psycopg.connect(server.dsn) as conn:
        row = conn.execute("select pg_read_file('postmaster.pid')").fetchone()
    assert row is not None and row[0].splitlines()[1] == server.details["data_dir"]


def test_nothing_is_left_after_it_stops() -> None:
    with open_server(choose_provider(ServerOptions(), {})) as running:
        data_dir = running.details["data_dir"]
        assert postgres_processes(data_dir)
    assert postgres_processes(data_dir) == []
    assert not Path(data_dir).exists()


def test_it_stops_when_the_body_raises() -> None:
    with (
        pytest.raises(RuntimeError, match="boom"),
        open_server(choose_provider(ServerOptions(), {})) as running,
    ):
        data_dir = running.details["data_dir"]
        raise RuntimeError("boom")
    assert postgres_processes(data_dir) == []
    assert not Path(data_dir).parent.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root needs a copy its run's user reaches")
def test_binaries_out_of_the_run_users_reach_are_copied_where_it_can_run_them() -> None:
    original = CELERP.locate(17)
    assert original is not None
    private = Path(tempfile.mkdtemp(prefix="tqb-private-"))  # 0700, root's
    try:
        shutil.copytree(original.bin.parent, private / "pginstall", symlinks=True)
        hidden = replace(original, bin=private / "pginstall" / "bin")
        usable = reachable_install(hidden)
        assert usable.bin.is_relative_to(shared_cache())
        assert not usable.bin.is_relative_to(private)
        version = subprocess.run(
            [str(usable.program("postgres")), "--version"],
            capture_output=True,
            text=True,
            check=True,
            **program_args(),
        )
        assert "17.10" in version.stdout
    finally:
        shutil.rmtree(private)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root needs a copy its run's user reaches")
def test_a_wheels_build_is_copied_with_the_libraries_its_programs_load() -> None:
    """The pgserver wheel (16) keeps libpq beside the package (pgserver.libs), where
    initdb's rpath looks relative to its own folder. Out of the run user's reach, the copy
    takes those libraries along and its programs run with LD_LIBRARY_PATH set to them:
    without it, the copied initdb finds no libpq."""
    wheel = Wheel("pgserver", "pgserver==0.1.4")
    original = wheel.locate(16)
    if original is None:
        pytest.skip("the pgserver wheel is not installed (make installs the postgres-majors extra)")
    assert original.libraries, "the wheel's libpq beside the package"
    private = Path(tempfile.mkdtemp(prefix="tqb-private-"))  # 0700, root's
    try:
        shutil.copytree(original.bin.parent, private / "pginstall", symlinks=True)
        shutil.copytree(original.libraries[0], private / "libs", symlinks=True)
        hidden = replace(original, bin=private / "pginstall" / "bin", libraries=(private / "libs",))
        usable = reachable_install(hidden)
        assert not usable.bin.is_relative_to(private) and len(usable.libraries) == 1
        initdb = [str(usable.program("initdb")), "--version"]
        ran = subprocess.run(
            initdb, capture_output=True, text=True, env=usable.environment(), **program_args()
        )
        assert ran.returncode == 0 and "16.2" in ran.stdout, ran.stderr
        bare = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        alone = subprocess.run(initdb, capture_output=True, text=True, env=bare, **program_args())
        assert alone.returncode != 0 and "libpq" in alone.stderr
    finally:
        shutil.rmtree(private)
