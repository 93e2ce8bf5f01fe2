"""A PgBouncer of our own in transaction mode, in front of the server, always stopped.

Started from the `pgbouncer` binary (Debian package `pgbouncer`) on a unix socket in a
fresh temporary directory, never the system's service. As root it runs as the run's
own user, like the embedded PostgreSQL (harness/server/run_user.py). Clients
authenticate by trust (the socket's directory is private to that user); PgBouncer logs
in to the server as the given role with its password, which is in its configuration
file, of mode 0600.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from harness.errors import ProviderUnavailable
from harness.server.processes import spawn_server_process, stop_escalating, wait_until_accepting
from harness.server.run_user import environment, give

PORT = 6432
_SBIN = Path("/usr/sbin/pgbouncer")  # Debian's place, often not on a non-root PATH


@dataclass(frozen=True)
class Login:
    """Who PgBouncer logs in as, and where the server is."""

    user: str
    password: str
    dbname: str
    host: str
    port: str


def pgbouncer_binary() -> Path | None:
    found = shutil.which("pgbouncer")
    if found:
        return Path(found)
    return _SBIN if _SBIN.is_file() else None


def unavailable_reason() -> str | None:
    """Why PgBouncer cannot be used here, or None if it can."""
    if pgbouncer_binary() is None:
        return "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
    return None


def pgbouncer_version() -> str | None:
    """The first line of `pgbouncer --version`, for the provenance."""
    binary = pgbouncer_binary()
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0] if lines else None


def login_for(dsn: str) -> Login:
    """Where and as whom PgBouncer logs in: the server, user and password of `dsn`."""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    user = str(params["user"])
    return Login(
        user=user,
        password=str(params.get("password") or ""),
        dbname=str(params.get("dbname") or user),
        host=str(params.get("host") or "/var/run/postgresql"),
        port=str(params.get("port") or "5432"),
    )


def config_text(login: Login, socket_dir: Path, pool_size: int) -> str:
    """pgbouncer.ini: transaction pooling, `pool_size` server connections, unix socket only.

    In transaction mode PgBouncer hands a server connection to a client for one
    transaction and runs no reset query between clients: a session SET stays behind.
    """
    server = (
        f"host={login.host} port={login.port} dbname={login.dbname} "
        f"user={login.user} password={login.password}"
    )
    return "\n".join(
        [
            "[databases]",
            f"{login.dbname} = {server}",
            "[pgbouncer]",
            "listen_addr =",
            f"listen_port = {PORT}",
            f"unix_socket_dir = {socket_dir}",
            "auth_type = trust",
            f"auth_file = {socket_dir / 'userlist.txt'}",
            "pool_mode = transaction",
            f"default_pool_size = {pool_size}",
            "min_pool_size = 0",
            "reserve_pool_size = 0",
            "max_client_conn = 200",
            f"logfile = {socket_dir / 'pgbouncer.log'}",
            "",
        ]
    )


@contextlib.contextmanager
def running_pgbouncer(login: Login, pool_size: int) -> Iterator[str]:
    """Start PgBouncer; yield the DSN its clients use; stop it and remove its directory."""
    binary = pgbouncer_binary()
    if binary is None:
        raise ProviderUnavailable(unavailable_reason() or "no pgbouncer")
    workdir = Path(tempfile.mkdtemp(prefix="tqb-pgbouncer-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        _write_config(workdir, login, pool_size)
        process = _start(binary, workdir)
        dsn = f"host={workdir} port={PORT} dbname={login.dbname} user={login.user}"
        _wait_until_ready(dsn, process, workdir)
        yield dsn
    finally:
        if process is not None:
            stop_pgbouncer(process)
        shutil.rmtree(workdir, ignore_errors=True)


def _write_config(workdir: Path, login: Login, pool_size: int) -> None:
    config = workdir / "pgbouncer.ini"
    config.touch(mode=0o600)  # it holds the server's password
    config.write_text(config_text(login, workdir, pool_size))
    # With auth_type = trust a user must still be listed; the password is not checked.
    (workdir / "userlist.txt").write_text(f'"{login.user}" ""\n')
    for path in (workdir, *workdir.iterdir()):
        give(path)


def _start(binary: Path, workdir: Path) -> subprocess.Popen[bytes]:
    command = [str(binary), str(workdir / "pgbouncer.ini")]
    return spawn_server_process(command, workdir / "stdout.log", workdir, environment())


def _wait_until_ready(dsn: str, process: subprocess.Popen[bytes], workdir: Path) -> None:
    logs = [workdir / "pgbouncer.log", workdir / "stdout.log"]
    wait_until_accepting("pgbouncer", dsn, process, logs, timeout_s=30, prepare_threshold=None)


def stop_pgbouncer(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM is PgBouncer's immediate shutdown; kill if it hangs. Never raises."""
    stop_escalating(process, [(signal.SIGTERM, 10), (signal.SIGKILL, 10)])
