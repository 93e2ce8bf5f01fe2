"""No password where another local user reads it, and --listen is no open door: an
embedded server listening on loopback TCP asks for its password there; library workers
and every adapter's processes (Node, Perl, Ruby) given a password in their DSN never show
it in the process table; settings whose names suggest a secret are not in the run
folder."""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import psycopg
import pytest
import yaml
from psycopg import sql

from harness.queues.contract import runtime
from harness.queues.contract.manifest import load_adapters
from harness.results.redaction import REDACTED
from harness.server.connections import connect
from harness.server.kinds import Server, ServerOptions
from harness.server.providers import choose_provider, open_server
from tests.conftest import harness_cli
from tests.integration.conftest import run_yaml
from tests.integration.test_libraries import SMALL


@pytest.fixture(scope="module")
def listening() -> Iterator[Server]:
    """An embedded server of this module's own, also on loopback TCP (--listen)."""
    choice = choose_provider(ServerOptions(pg="embedded", listen="127.0.0.1:0"), {})
    with open_server(choice) as server:
        yield server


def _without_query(url: str) -> str:
    return url.partition("?")[0]


def test_listen_asks_for_the_password_on_tcp(listening: Server) -> None:
    """No password, or a wrong one: refused. The TCP DSN names a 0600 password file of
    the harness's user, which holds the right one; the socket stays as it was."""
    tcp = listening.details["tcp_dsn"]
    bare = _without_query(tcp)
    for dsn in (bare, f"{bare}?password=wrong"):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(dsn, connect_timeout=10).close()
    with psycopg.connect(tcp, connect_timeout=10) as conn:
        row = conn.execute("select current_user, inet_server_addr()::text").fetchone()
        assert row == ("postgres", "127.0.0.1/32")
    passfile = Path(unquote(tcp.partition("passfile=")[2]))
    info = passfile.stat()
    assert (info.st_mode & 0o777, info.st_uid) == (0o600, os.getuid())
    password = passfile.read_text().strip().rsplit(":", 1)[1]
    assert len(password) >= 32 and password not in str(listening.details)
    with connect(listening.dsn) as conn:  # the unix socket, in a directory of its own
        assert conn.execute("select 1").fetchone() == (1,)


@pytest.fixture
def role_with_password(listening: Server) -> Iterator[tuple[str, str]]:
    """A login role with a password of its own: (its name, the password)."""
    name, password = f"tqb_secret_{os.getpid()}", f"Pw-{secrets.token_hex(12)}"
    with connect(listening.dsn) as conn:
        conn.execute(f"create role {name} login superuser password '{password}'")  # type: ignore[arg-type]
    yield name, password
    with connect(listening.dsn) as conn:
        conn.execute(f"drop owned by {name}")  # type: ignore[arg-type]
        conn.execute(f"drop role {name}")  # type: ignore[arg-type]


# Each adapter's process as the process table shows it: its command's script.
ADAPTER_PROCESSES = {
    "pgboss": b"runner.mjs",
    "minion": b"minion.pl",
    "delayed_job": b"delayed_job.rb",
}


def adapters_here() -> list[str]:
    """The adapters among ADAPTER_PROCESSES whose runtime this machine has."""
    adapters = load_adapters()
    return [name for name in ADAPTER_PROCESSES if runtime.missing(adapters[name]) is None]


class CommandLines(threading.Thread):
    """Samples every process's command line until stopped: which held `needle`, and
    which adapters' processes were seen."""

    def __init__(self, needle: str) -> None:
        super().__init__(daemon=True)
        self.needle = needle.encode()
        self.stopped = threading.Event()
        self.leaks: list[str] = []
        self.seen: set[str] = set()

    def run(self) -> None:
        while not self.stopped.wait(0.02):
            for path in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    line = path.read_bytes()
                except OSError:
                    continue  # the process ended meanwhile
                self.seen |= {name for name, mark in ADAPTER_PROCESSES.items() if mark in line}
                if self.needle in line:
                    self.leaks.append(path.parent.name)


@pytest.mark.adapters  # every language: make test-adapters
def test_no_password_in_the_process_table_while_library_workers_run(
    listening: Server, role_with_password: tuple[str, str], tmp_path: Path
) -> None:
    """Every adapter this machine can run (pg-boss in Node, Minion in Perl, Delayed::Job
    in Ruby), procrastinate and pgqueuer, over TCP with the password in the DSN: the run
    is done (the password reached each one), each adapter's process was seen, and no
    process's command line ever held the password."""
    adapters = adapters_here()
    name, password = role_with_password
    port = _without_query(listening.details["tcp_dsn"]).rsplit(":", 1)[1].split("/")[0]
    dsn = f"postgresql://{name}:{password}@127.0.0.1:{port}/bench"
    strategies = [*adapters, "procrastinate", "pgqueuer"]
    scenario = yaml.safe_dump({**SMALL, "strategies": strategies})
    sampler = CommandLines(password)
    sampler.start()
    try:
        outcome = run_yaml(Server(dsn=dsn, provider="external"), tmp_path, scenario)
    finally:
        sampler.stopped.set()
        sampler.join(timeout=10)
    assert outcome.document.status == "complete"
    assert sampler.seen == set(adapters), "the sampler saw each adapter's process"
    assert sampler.leaks == []
    for path in (tmp_path / "results").rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path


@pytest.mark.adapters  # every language: make test-adapters
def test_library_workers_find_the_password_through_the_password_file(
    listening: Server, tmp_path: Path
) -> None:
    """The DSN a fleet member is told (`passfile=`, no password): an adapter, which may
    read no password file (node-postgres does not), is handed the password on its stdin;
    pgqueuer's asyncpg reads the file; the password is on no command line."""
    adapters = adapters_here()
    tcp = listening.details["tcp_dsn"]
    password = Path(unquote(tcp.partition("passfile=")[2])).read_text().strip()
    sampler = CommandLines(password.rsplit(":", 1)[1])
    sampler.start()
    try:
        scenario = yaml.safe_dump({**SMALL, "strategies": [*adapters, "pgqueuer"]})
        outcome = run_yaml(Server(dsn=tcp, provider="external"), tmp_path, scenario)
    finally:
        sampler.stopped.set()
        sampler.join(timeout=10)
    assert outcome.document.status == "complete"
    assert sampler.seen == set(adapters) and sampler.leaks == []


def _set_and_wait(conn: psycopg.Connection, setting: str, value: str) -> None:
    name = sql.Identifier(setting)
    conn.execute(sql.SQL("alter system set {} = {}").format(name, sql.Literal(value)))
    conn.execute("select pg_reload_conf()")
    deadline = time.monotonic() + 10
    while conn.execute(sql.SQL("show {}").format(name)).fetchone() != (value,):
        assert time.monotonic() < deadline, f"{setting} not reloaded"
        time.sleep(0.05)


def test_settings_that_suggest_a_secret_are_not_in_the_run_folder(
    listening: Server, tmp_path: Path
) -> None:
    """restore_command and primary_conninfo, as a standby has them: recorded in run.json
    as redacted; work_mem, changed too, is kept. (archive_command would do as well, but
    the server shows it as `(disabled)` unless archive_mode is on, which needs a restart.)"""
    secret = f"S3cret-{secrets.token_hex(8)}"
    values = {
        "restore_command": f"aws s3 cp s3://bucket/%f %p --secret {secret}",
        "primary_conninfo": f"host=primary user=replicator password={secret}",
        "work_mem": "5MB",
    }
    with connect(listening.dsn) as conn:
        for setting, value in values.items():
            _set_and_wait(conn, setting, value)
    try:
        outcome = run_yaml(listening, tmp_path, yaml.safe_dump({**SMALL}))
    finally:
        with connect(listening.dsn) as conn:
            conn.execute("alter system reset all")
            conn.execute("select pg_reload_conf()")
    recorded = outcome.document.servers[0].postgres["non_default_settings"]
    for setting in ("restore_command", "primary_conninfo"):
        assert recorded[setting]["setting"] == REDACTED
        assert recorded[setting]["shown"] == REDACTED
    assert recorded["work_mem"]["shown"] == "5MB"
    for path in (tmp_path / "results").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "adapters"


@pytest.mark.parametrize(
    "role",
    [
        pytest.param("install", marks=pytest.mark.thorough),
        pytest.param("versions", marks=pytest.mark.thorough),
        "ledger",
    ],
)
def test_an_adapter_that_dies_is_one_line_without_its_password(
    listening: Server, role_with_password: tuple[str, str], tmp_path: Path, role: str
) -> None:
    """An adapter that dies in a one-shot role with the password it was given on its
    stderr (a driver's error may quote its connection): one line, exit 1, no traceback,
    the password nowhere in what the harness said or kept."""
    name, password = role_with_password
    port = _without_query(listening.details["tcp_dsn"]).rsplit(":", 1)[1].split("/")[0]
    dsn = f"postgresql://{name}:{password}@127.0.0.1:{port}/bench"
    scenario = tmp_path / "dies.yaml"
    scenario.write_text(yaml.safe_dump({**SMALL, "strategies": [f"fails_{role}"]}))
    done = harness_cli(
        "run",
        str(scenario),
        "--adapters-dir",
        str(FIXTURES),
        "--dsn",
        dsn,
        "--results-dir",
        str(tmp_path / "results"),
        timeout=120,
        env={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("run failed: ") and f"adapter fails_{role}" in line, line
    assert "Traceback (most recent call last)" not in done.stderr
    assert password not in done.stdout + done.stderr
    for path in (tmp_path / "results").rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
