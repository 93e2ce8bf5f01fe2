"""Who runs the programs of a run, and with what environment.

A root run hands none of its programs to root, nor to the shared `nobody`: PostgreSQL,
pgbench, PgBouncer and every queue library's process run as a user of the run's own.
The harness makes one per run (`tqb-<run token>`, a system user with a group of its
own, removed as the harness exits; one a killed run left is removed by the next run),
or runs them as the user `--run-user NAME` names (never root, never nobody). That user
has a private folder of its own (mode 0700; a made user's home), where the passwords its
programs read are written (0600), and it reaches the programs the run copies or
prepares for it in the shared cache, /var/cache/tenant-queue-bench: owned by root, of
mode 0750 and group `tenant-queue-bench`, which only the run users' programs have as a
supplementary group, so that no other user reads or plants anything there.

Every program gets a minimal environment, root run or not: PATH, the locale (LANG,
LANGUAGE, LC_*, TZ), HOME, USER and LOGNAME of the user it runs as, the library paths
its runtime looks in (RUNTIME_PATHS), and what the harness adds for it (a build's
LD_LIBRARY_PATH, libpq's PG* for pgbench); never another variable of the caller's (a
token, a cloud key, PGPASSWORD). Where the harness is not root, its programs run as
the caller, in that same environment: a library's code gets no more of the caller than
a root run gives it, and a run behaves alike whoever starts it.

POSIX only; where the harness is not root nothing here switches users.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from harness.errors import HarnessError
from harness.server.connections import RUN_TOKEN
from harness.server.npm import cache_root

COMMENT = "tenant-queue-bench run"  # the GECOS field of a made user: and its pid, start
GROUP = "tenant-queue-bench"  # the shared cache's group: run users' programs only
SHARED_CACHE = Path("/var/cache/tenant-queue-bench")
INHERITED = "TQB_RUN_USER"  # how a process the harness starts knows the run's user
RUNTIME_PATHS = (
    "LD_LIBRARY_PATH",
    "PERL5LIB",
    "PERL_LOCAL_LIB_ROOT",
    "GEM_HOME",
    "GEM_PATH",
    "RUBYLIB",
    "NODE_PATH",
    "PYTHONPATH",
)
_PASSED = ("PATH", "LANG", "LANGUAGE", "TZ", *RUNTIME_PATHS)
_MADE = re.compile(r"^tqb-[0-9a-f]{16}$")
_PRIVATE_PREFIX = "tqb-run-"
_LOCKED = 10  # useradd, userdel, groupadd: the user database is locked; try again
_ATTEMPTS = 50


class ProgramArgs(TypedDict, total=False):
    """subprocess arguments that run a program as the run's user."""

    user: int
    group: int
    extra_groups: list[int]


class PopenArgs(ProgramArgs, total=False):
    """subprocess arguments of a library's program: its user and its environment."""

    env: dict[str, str]


@dataclass(frozen=True)
class RunUser:
    """The user a root run's programs run as."""

    name: str
    uid: int
    gid: int
    home: str  # HOME in its programs' environment
    private: Path  # a folder of its own for this run, 0700
    shared_gid: int  # the shared cache's group, a supplementary group of its programs

    def popen(self) -> ProgramArgs:
        """subprocess arguments that run a program as this user."""
        return {"user": self.uid, "group": self.gid, "extra_groups": [self.shared_gid]}

    @property
    def groups(self) -> set[int]:
        return {self.gid, self.shared_gid}


_chosen: str | None = None  # --run-user
_current: RunUser | None = None


def is_root() -> bool:
    return os.name == "posix" and os.geteuid() == 0


def choose(name: str | None) -> None:
    """--run-user NAME: checked at once (one line, exit 2), used from the first program
    on. None: a user made for the run, if the harness runs as root."""
    global _chosen
    if name is None:
        return
    if not is_root():
        raise HarnessError(
            "--run-user: the harness is not running as root, and runs its programs as "
            "its own user; --run-user names the user a root run runs them as"
        )
    _named(name, "--run-user")
    _chosen = name


def run_user() -> RunUser | None:
    """The user the run's programs run as: None where the harness is not root (they run
    as the caller); else the one named, or one made for the run (once per harness)."""
    global _current
    if not is_root():
        return None
    if _current is None:
        _current = _settled()
        # What every process the harness starts inherits (its crew's, from a fork server):
        # the same user and private folder, which the harness's exit removes.
        os.environ[INHERITED] = handed_value(_current)
    return _current


def handed() -> str:
    """The run's user as a process the harness starts takes it (`take`): settled now."""
    user = run_user()
    return "" if user is None else handed_value(user)


def handed_value(user: RunUser) -> str:
    return f"{user.name} {user.private}"


def take(inherited: str) -> None:
    """In a process the harness started: the run's user it settled (`handed`)."""
    global _current
    if inherited and os.environ.get(INHERITED) != inherited:
        os.environ[INHERITED] = inherited
        _current = None


def _settled() -> RunUser:
    """The one --run-user names, else the one the harness that started this process
    settled, else one made for the run."""
    if _chosen is not None:
        return _with_private(_named(_chosen, "--run-user"))
    return _inherited() or _make()


def _inherited() -> RunUser | None:
    """The run's user as the harness that started this process settled it; None where
    there is none, or it is gone (its user, or its private folder)."""
    import pwd

    name, _, private = os.environ.get(INHERITED, "").partition(" ")
    try:
        pwd.getpwnam(name)
    except KeyError:
        return None
    user = _named(name, INHERITED)  # never root or nobody, whoever set it
    folder = Path(private)
    if not _ours(folder, user.uid):
        return None
    home = private if _MADE.fullmatch(name) else user.home
    return RunUser(name, user.uid, user.gid, home, folder, user.shared_gid)


def program_args() -> ProgramArgs:
    """subprocess arguments that run a program as the run's user ({} where not root)."""
    user = run_user()
    return {} if user is None else user.popen()


def program_popen() -> PopenArgs:
    """subprocess arguments that run a library's program (an adapter's process, its
    runtime's check): as the run's user, in a program's minimal environment."""
    return {"env": environment(), **program_args()}


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A program's environment: the allow-list of the caller's, the user it runs as,
    and `extra` (what the program needs besides)."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if name in _PASSED or name.startswith("LC_")
    }
    return {**kept, **_identity(run_user()), **(extra or {})}


def _identity(user: RunUser | None) -> dict[str, str]:
    if user is not None:
        return {"HOME": user.home, "USER": user.name, "LOGNAME": user.name}
    import pwd

    own = pwd.getpwuid(os.getuid())
    name = os.environ.get("USER") or own.pw_name
    return {"HOME": os.environ.get("HOME") or own.pw_dir, "USER": name, "LOGNAME": name}


def give(path: Path) -> None:
    """`path` handed to the run's user (a server's folder, a file it reads)."""
    user = run_user()
    if user is not None:
        os.chown(path, user.uid, user.gid)


@contextlib.contextmanager
def secret_file(text: str) -> Iterator[Path]:
    """A file of mode 0600 holding `text`, that the run's user alone reads (in its
    private folder), removed after: how a password reaches a program, never its
    environment or command line."""
    user = run_user()
    folder = None if user is None else str(user.private)
    descriptor, name = tempfile.mkstemp(prefix="tqb-secret-", dir=folder)
    path = Path(name)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
        give(path)
        yield path
    finally:
        path.unlink(missing_ok=True)


# -- the named user -----------------------------------------------------------------------


def _named(name: str, what: str) -> RunUser:
    """The user of that name, if a run may hand its programs to it."""
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise HarnessError(f"{what}: there is no user '{name[:40]}' on this system") from None
    if entry.pw_uid == 0 or name == "nobody" or entry.pw_uid == _nobody_uid():
        raise HarnessError(
            f"{what}: '{name}' is not allowed: a run's programs never run as root or as the "
            "shared nobody; name a user of their own (or leave it out: the harness makes one)"
        )
    return RunUser(name, entry.pw_uid, entry.pw_gid, entry.pw_dir, Path(), _shared_group())


def _nobody_uid() -> int | None:
    import pwd

    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return None


def _with_private(user: RunUser) -> RunUser:
    """The user with a private folder of this run's (removed as the harness exits)."""
    private = Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX))
    os.chown(private, user.uid, user.gid)
    atexit.register(_at_exit, os.getpid(), None, private)
    return RunUser(user.name, user.uid, user.gid, user.home, private, user.shared_gid)


# -- the made user ------------------------------------------------------------------------


def _make() -> RunUser:
    """A system user of the run's own, with a group of its own and its private folder
    as its home; removed as the harness exits."""
    import pwd

    remove_stale()
    shared = _shared_group()
    private = Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX))
    name = f"tqb-{RUN_TOKEN}"
    _useradd(name, private)
    entry = pwd.getpwnam(name)
    os.chown(private, entry.pw_uid, entry.pw_gid)
    atexit.register(_at_exit, os.getpid(), name, private)
    return RunUser(name, entry.pw_uid, entry.pw_gid, str(private), private, shared)


def _useradd(name: str, home: Path) -> None:
    shell = "/usr/sbin/nologin" if Path("/usr/sbin/nologin").exists() else "/bin/false"
    comment = f"{COMMENT} pid {os.getpid()} started {_started(os.getpid())}"
    command = ["useradd", "--system", "--user-group", "--no-create-home"]
    _admin([*command, "--home-dir", str(home), "--shell", shell, "--comment", comment, name])


def _admin(command: list[str]) -> None:
    """useradd, userdel or groupadd, again while another holds the user database's lock;
    one line if it fails."""
    program = shutil.which(command[0], path="/usr/sbin:/sbin:/usr/bin:/bin")
    if program is None:
        raise HarnessError(
            f"running as root, the harness makes a user for the run's programs with "
            f"{command[0]}, which this system lacks; name one with --run-user NAME"
        )
    for _ in range(_ATTEMPTS):
        done = subprocess.run([program, *command[1:]], capture_output=True, text=True, check=False)
        if done.returncode != _LOCKED:
            break
        time.sleep(0.1)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"{' '.join(command[:1] + command[-1:])} failed: {last}")


def _started(pid: int) -> str:
    """When the process started (clock ticks since boot), to tell it from a later one
    of the same pid; '?' where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return "?"
    return fields[19]


def _at_exit(pid: int, made: str | None, private: Path) -> None:
    """As the harness that made them exits (not a process forked from it): the user it
    made, if it made one, and the run's private folder, removed."""
    if os.getpid() != pid:
        return
    if made is not None:
        _remove(made, private)
    shutil.rmtree(private, ignore_errors=True)


def _remove(name: str, private: Path) -> None:
    with contextlib.suppress(HarnessError):
        _admin(["userdel", name])
    shutil.rmtree(private, ignore_errors=True)


def remove_stale() -> list[str]:
    """The users made by runs that were killed (their process gone), removed with their
    home; the names removed. A user whose processes still run is left."""
    import pwd

    removed = []
    for entry in pwd.getpwall():
        if _MADE.fullmatch(entry.pw_name) and _left_behind(entry.pw_gecos):
            home = Path(entry.pw_dir)
            _remove(entry.pw_name, home if _ours(home, entry.pw_uid) else Path("/nonexistent"))
            removed.append(entry.pw_name)
    return removed


def _left_behind(comment: str) -> bool:
    found = re.fullmatch(re.escape(COMMENT) + r" pid (\d+) started (\S+)", comment)
    if found is None:
        return False
    pid, started = int(found[1]), found[2]
    alive = Path(f"/proc/{pid}").exists() if started != "?" else _signalable(pid)
    return not alive or (started != "?" and _started(pid) != started)


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ours(home: Path, uid: int) -> bool:
    """A private folder the harness made (a made user's home): named as it names them, a
    folder (not a link) of `uid`, of mode 0700, in a folder of root's or a sticky one (a
    temporary folder). Not necessarily this process's temporary folder: a process the
    harness starts may have another TMPDIR (a test's), and is still of the same run."""
    try:
        info, parent = home.lstat(), home.parent.stat()
    except OSError:
        return False
    named = home.name.startswith(_PRIVATE_PREFIX)
    private = stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    guarded = parent.st_uid == 0 or bool(parent.st_mode & stat.S_ISVTX)
    return named and private and info.st_uid == uid and guarded


# -- the shared cache ---------------------------------------------------------------------


def _shared_group() -> int:
    import grp

    try:
        return grp.getgrnam(GROUP).gr_gid
    except KeyError:
        _admin(["groupadd", "--system", "-f", GROUP])
    return grp.getgrnam(GROUP).gr_gid


def shared_cache() -> Path:
    """Where the programs a run's user runs are copied or prepared: the caller's cache
    where the harness is not root; else SHARED_CACHE, made (root, 0750, group GROUP) or
    checked, with every folder above it, so that no other user has planted it. One that
    root made and no one else may write to (a `mkdir -p` of a folder inside it, as
    .ci/postgres-image.sh's debootstrap cache, leaves it root's, 0755) is root's alone:
    it is given the group and mode, not refused."""
    if not is_root():
        return cache_root()
    shared = _shared_group()
    for folder in reversed(SHARED_CACHE.parents):  # a sticky /tmp too: none is replaced
        _refuse_untrusted(folder, None, sticky=True)
    with contextlib.suppress(FileExistsError):
        SHARED_CACHE.mkdir(mode=0o750)
    if untrusted(SHARED_CACHE) is None:
        os.chown(SHARED_CACHE, 0, shared)
        SHARED_CACHE.chmod(0o750)
    _refuse_untrusted(SHARED_CACHE, shared)
    return SHARED_CACHE


def _refuse_untrusted(folder: Path, group: int | None, sticky: bool = False) -> None:
    """One line unless `folder` is a real folder of root's that no other user may
    write to (and, for `group`, only root and that group may enter)."""
    problem = untrusted(folder, group, sticky)
    if problem is not None:
        raise HarnessError(
            f"{folder}: {problem}; a root run keeps the programs its users run there, "
            "so another user must not have made it: remove it (as root) and run again"
        )


def untrusted(folder: Path, group: int | None = None, sticky: bool = False) -> str | None:
    """Why `folder` is not one root alone controls, or None. `sticky`: a folder others
    may write to but not rename or remove in (/tmp) will do, as a folder above."""
    try:
        info = folder.lstat()
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder (a link, or a file)"
    if info.st_uid != 0:
        return f"is owned by uid {info.st_uid}, not root"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (
        sticky and info.st_mode & stat.S_ISVTX
    ):
        return f"may be written by other users (mode {stat.S_IMODE(info.st_mode):04o})"
    if group is not None and (info.st_gid != group or info.st_mode & 0o007):
        return f"is not of group {GROUP} and closed to others (mode 0750)"
    return None


# -- what the run's user reaches ----------------------------------------------------------


def out_of_reach(path: Path, executable: bool) -> Path | None:
    """The first folder on the way to `path` (or `path` itself) that the run's user may
    not pass (read, and execute if `executable`); None if it reaches it, or where there
    is no run user."""
    user = run_user()
    if user is None:
        return None
    absolute = path if path.is_absolute() else Path.cwd() / path
    for route in (absolute, absolute.resolve()):
        for folder in reversed(route.parents):
            if not _may(folder, user, 0o1):
                return folder
    need = 0o5 if executable or absolute.is_dir() else 0o4
    return None if _may(absolute, user, need) else absolute


def _may(path: Path, user: RunUser, bits: int) -> bool:
    """Do the classic permission bits give `user` these (r 4, w 2, x 1) on `path`?"""
    try:
        info = path.stat()
    except OSError:
        return False
    if info.st_uid == user.uid:
        granted = info.st_mode >> 6
    elif info.st_gid in user.groups:
        granted = info.st_mode >> 3
    else:
        granted = info.st_mode
    return granted & bits == bits


def refuse_out_of_reach(what: str, program: Path, folder: Path) -> None:
    """One line if the run's user cannot run `program` in `folder`, naming what to do."""
    user = run_user()
    for path, executable in ((program, True), (folder, True)):
        blocked = out_of_reach(path, executable)
        if user is not None and blocked is not None:
            raise HarnessError(
                f"{what}: {path} is out of reach of {user.name}, the user a root run runs "
                f"its programs as ({blocked} is closed to it); install it where other users "
                "can read it (not under a private home such as /root: e.g. a virtual "
                "environment made from /usr/bin/python3), or run the harness as another user"
            )
