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

from harness.server.builds import CELERP
from harness.server.embedded import reachable_install
from harness.server.kinds import Server, ServerOptions
from harness.server.providers import choose_provider, open_server


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
    expected = "nobody" if os.geteuid() == 0 else None
    if expected:
        assert server.details["run_as"] == expected
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


@pytest.mark.skipif(os.geteuid() != 0, reason="only root needs a copy nobody can reach")
def test_binaries_out_of_nobodys_reach_are_copied_where_it_can_run_them() -> None:
    original = CELERP.locate(17)
    assert original is not None
    private = Path(tempfile.mkdtemp(prefix="tqb-private-"))  # 0700, root's
    try:
        shutil.copytree(original.bin.parent, private / "pginstall", symlinks=True)
        hidden = replace(original, bin=private / "pginstall" / "bin")
        usable = reachable_install(hidden)
        assert usable.bin.is_relative_to(tempfile.gettempdir())
        assert not usable.bin.is_relative_to(private)
        version = subprocess.run(
            [str(usable.program("postgres")), "--version"],
            user="nobody",
            capture_output=True,
            text=True,
            check=True,
        )
        assert "17.10" in version.stdout
    finally:
        shutil.rmtree(private)
