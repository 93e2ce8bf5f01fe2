"""The trust holes of issue 28, each on a real server: a root run's programs run as a user
of the run's own with nothing of the caller's environment; the server's build is copied
where no other user can plant it; a Delayed::Job row rewritten to another class is
refused, not performed; a schema holding another role's object is never dropped."""

from __future__ import annotations

import grp
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from harness.errors import HarnessError
from harness.queues.base import Site
from harness.queues.contract.process import AdapterProcess, run_role
from harness.queues.contract.protocol import (
    Enqueued,
    Installed,
    JobDone,
    JobStarted,
    Ready,
    Stopped,
    command,
    enqueue_command,
)
from harness.queues.contract.queue import ContractSpec
from harness.server import run_user
from harness.server.builds import CELERP
from harness.server.connections import connect
from harness.server.embedded import client_program, reachable_install
from harness.server.kinds import Server, ServerOptions
from harness.server.pgbouncer import login_for, running_pgbouncer, unavailable_reason
from harness.server.providers import choose_provider, open_server
from harness.server.schema import MARK, own_schema
from tests.integration.test_adapters import shipped

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="only a root run hands its programs on")
CANARY = "TQB_TRUST_CANARY"


def identity(pid: int) -> tuple[int, dict[str, str]]:
    """A process's real uid and its environment, as /proc shows them."""
    status = Path(f"/proc/{pid}/status").read_text()
    uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (entry.decode().partition("=") for entry in raw if entry)
    return uid, {name: value for name, _, value in pairs}


def pid_of(argument: str) -> int:
    """The one process whose command line has `argument`."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if argument.encode() in (proc / "cmdline").read_bytes().split(b"\0"):
                    return int(proc.name)
            except OSError:
                continue
    raise AssertionError(f"no process runs with {argument}")


def assert_the_run_users(pid: int) -> None:
    user = run_user.run_user()
    assert user is not None and user.uid != 0 and user.name != "nobody"
    uid, env = identity(pid)
    assert uid == user.uid, f"process {pid} runs as uid {uid}, not the run's user"
    assert CANARY not in env, f"process {pid} has the caller's {CANARY}"
    assert env["HOME"] == user.home and env.get("USER") == user.name


# -- a root run's programs ------------------------------------------------------------


@root_only
def test_a_root_runs_processes_run_as_its_own_user_with_no_caller_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL, PgBouncer and an adapter's process: the run's own user (not root, not
    nobody), and not one variable of the caller's beyond what they need."""
    monkeypatch.setenv(CANARY, "the caller's secret")
    with open_server(choose_provider(ServerOptions(pg="embedded"), {})) as server:
        data = Path(server.details["data_dir"])
        assert_the_run_users(int((data / "postmaster.pid").read_text().split()[0]))
        if unavailable_reason() is None:
            login = replace(login_for(server.dsn), password="unused")  # the socket trusts
            with running_pgbouncer(login, 2) as pooled:
                folder = psycopg.conninfo.conninfo_to_dict(pooled)["host"]
                assert_the_run_users(pid_of(f"{folder}/pgbouncer.ini"))
        adapter = shipped("delayed_job")
        spec = ContractSpec(adapter, "one_queue", Site(server.dsn, "public"), 10)
        process = AdapterProcess(adapter, spec.config("worker"))
        try:
            process.expect(Ready)
            assert_the_run_users(process.process.pid)
        finally:
            process.close(bound_s=10)


@root_only
def test_nobody_cannot_reach_the_servers_socket(server: Server) -> None:
    """The socket trusts whoever reaches its folder: the run's user alone (and root),
    never the shared nobody, which got a superuser (and COPY TO PROGRAM) when the server
    ran as nobody."""
    folder = psycopg.conninfo.conninfo_to_dict(server.dsn)["host"]
    info = Path(str(folder)).stat()
    assert (info.st_mode & 0o777, info.st_uid) == (0o700, run_user.run_user().uid)  # type: ignore[union-attr]
    psql = [str(client_program("psql")), "-h", str(folder), "-U", "postgres", "-c", "select 1"]
    done = subprocess.run(psql, user="nobody", capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Permission denied" in done.stderr, done.stdout


@root_only
def test_a_process_the_harness_starts_with_another_tmpdir_is_of_the_same_run(
    server: Server, tmp_path: Path
) -> None:
    """A harness started by the harness (a fleet member, a coordinator, as the tests start
    them) with another TMPDIR took the run's private folder for another's and made a user
    of its own: its adapters could not reach the server's socket (Permission denied)."""
    tmp_path.chmod(0o1777)
    shown = "from harness.server import run_user; print(run_user.run_user().name)"
    done = subprocess.run(
        [sys.executable, "-c", shown],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == server.details["run_as"] == run_user.run_user().name  # type: ignore[union-attr]


@root_only
@pytest.mark.parametrize(
    "what", ["mode 0755", "a link", "another name", "in a folder another user may write"]
)
def test_a_private_folder_not_as_the_harness_makes_it_is_not_taken(
    tmp_path: Path, what: str
) -> None:
    """Only a folder as the harness makes it is taken for the run's private folder."""
    parent = tmp_path / "parent"
    parent.mkdir(mode=0o755)
    made = parent / "tqb-run-made"
    made.mkdir(mode=0o700)
    assert run_user._ours(made, os.getuid())
    folder = made
    if what == "mode 0755":
        made.chmod(0o755)
    elif what == "a link":
        folder = parent / "tqb-run-link"
        folder.symlink_to(made)
    elif what == "another name":
        folder = parent / "elsewhere"
        made.rename(folder)
    else:
        os.chown(parent, 65534, -1)
    assert not run_user._ours(folder, os.getuid())


# -- the server's copy --------------------------------------------------------------------


@pytest.fixture
def hidden_build() -> Iterator[object]:
    """PostgreSQL 17's build where the run's user cannot reach it (root's 0700 folder)."""
    original = CELERP.locate(17)
    assert original is not None
    private = Path(tempfile.mkdtemp(prefix="tqb-private-"))
    shutil.copytree(original.bin.parent, private / "pginstall", symlinks=True)
    yield replace(original, bin=private / "pginstall" / "bin")
    shutil.rmtree(private)


@root_only
def test_a_copy_path_planted_in_tmp_is_never_used(hidden_build: object) -> None:
    """Any local user could make /tmp/tenant-queue-bench-pg-<build> before a root run: a
    link there made the copy fail with a traceback. The copy is in root's own cache now."""
    postgres = hidden_build.program("postgres").stat()  # type: ignore[attr-defined]
    key = f"17-{postgres.st_size}-{int(postgres.st_mtime)}"
    planted = Path(tempfile.gettempdir()) / f"tenant-queue-bench-pg-{key}"
    decoy = Path(tempfile.mkdtemp(prefix="tqb-decoy-"))
    if planted.is_dir() and not planted.is_symlink():
        shutil.rmtree(planted)  # an earlier harness's copy
    planted.unlink(missing_ok=True)
    planted.symlink_to(decoy)
    try:
        usable = reachable_install(hidden_build)  # type: ignore[arg-type]
        assert usable.bin.is_relative_to(run_user.shared_cache())
        assert not any(decoy.iterdir())
    finally:
        planted.unlink()
        shutil.rmtree(decoy)


@root_only
def test_a_planted_shared_cache_is_refused_in_one_line(
    hidden_build: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the shared cache is not root's alone (another user made it), nothing is
    copied into it: one line naming it and what to do."""
    planted = tmp_path / "cache"
    planted.mkdir(mode=0o755)
    os.chown(planted, 65534, 65534)
    monkeypatch.setattr(run_user, "SHARED_CACHE", planted)
    with pytest.raises(HarnessError) as refused:
        reachable_install(hidden_build)  # type: ignore[arg-type]
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{planted}: is owned by uid 65534, not root")
    assert "remove it (as root) and run again" in line and not any(planted.iterdir())


@root_only
def test_a_shared_cache_root_made_for_another_use_is_taken_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """.ci/postgres-image.sh keeps debootstrap's packages inside the shared cache: its
    `mkdir -p` left the cache root's, mode 0755, group root, before the first run, and
    every root run then stopped in one line (a fresh machine's `make test`). A folder
    root made and no one else may write to is root's alone: given the group and mode,
    what is in it kept."""
    cache = tmp_path / "cache"
    (cache / "debootstrap").mkdir(parents=True, mode=0o755)
    cache.chmod(0o755)
    (cache / "debootstrap" / "kept.deb").write_text("a package")
    monkeypatch.setattr(run_user, "SHARED_CACHE", cache)
    assert run_user.shared_cache() == cache
    info = cache.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o750, 0)
    assert grp.getgrgid(info.st_gid).gr_name == run_user.GROUP
    assert (cache / "debootstrap" / "kept.deb").read_text() == "a package"
    cache.chmod(0o775)  # written by the group: not root's alone, refused as ever
    with pytest.raises(HarnessError, match="may be written by other users"):
        run_user.shared_cache()


# -- Delayed::Job's handler -------------------------------------------------------------

# Delayed::Job's own loader builds this and calls its perform: Kernel.sleep(0), or any
# method of any class with any arguments.
OTHER_CLASS = (
    "--- !ruby/object:Delayed::PerformableMethod\n"
    "object: !ruby/class 'Kernel'\nmethod_name: :sleep\nargs:\n- 0\n"
)


@pytest.fixture
def dj_schema(server: Server) -> Iterator[str]:
    schema = f"trust_dj_{os.getpid()}"
    with own_schema(server.dsn, schema):
        yield schema


def _enqueue(spec: ContractSpec, jobs: list[list[float]]) -> None:
    enqueuer = AdapterProcess(spec.adapter, spec.config("enqueuer"))
    try:
        enqueuer.expect(Ready)
        enqueuer.send(enqueue_command(jobs))  # type: ignore[arg-type]
        assert enqueuer.expect(Enqueued).count == len(jobs)
        enqueuer.send(command("stop"))
        enqueuer.expect(Stopped)
    finally:
        enqueuer.close()


def _rows(server: Server, schema: str) -> list[tuple[int, bool, str | None]]:
    with connect(server.dsn, schema=schema) as conn:
        found = conn.execute(
            "select id, failed_at is not null, last_error from delayed_jobs order by id"
        )
        return [(int(row[0]), bool(row[1]), row[2]) for row in found]


def _settled(server: Server, schema: str) -> list[tuple[int, bool, str | None]]:
    """The rows once one is left, failed (DJ deletes a job it performed), or in 30 s."""
    deadline = time.monotonic() + 30
    while (rows := _rows(server, schema)) and time.monotonic() < deadline:
        if len(rows) == 1 and rows[0][1]:
            break
        time.sleep(0.1)
    return rows


@pytest.mark.adapters
def test_a_delayed_job_handler_rewritten_to_another_class_is_refused_not_run(
    server: Server, dj_schema: str
) -> None:
    """A row's handler is data: one rewritten to Delayed::PerformableMethod (which
    performs any method) fails unperformed, its error naming the class; an honest job
    beside it runs."""
    adapter = shipped("delayed_job")
    spec = ContractSpec(adapter, "one_queue", Site(server.dsn, dj_schema), 10)
    run_role(adapter, spec.config("install"), Installed)
    _enqueue(spec, [[1, 1, 0], [2, 1, 0]])
    first = _rows(server, dj_schema)[0][0]
    with connect(server.dsn, schema=dj_schema) as conn:
        conn.execute("update delayed_jobs set handler = %s where id = %s", (OTHER_CLASS, first))
    worker = AdapterProcess(adapter, spec.config("worker"))
    try:
        worker.expect(Ready)
        worker.send(command("start"))
        # the honest one, started and done; the rewritten one never started
        events = [worker.next_event(), worker.next_event()]
        assert [(type(e), getattr(e, "job", None)) for e in events] == [
            (JobStarted, 2),
            (JobDone, 2),
        ]
        rows = _settled(server, dj_schema)
        worker.send(command("stop"))
        worker.expect(Stopped)
    finally:
        worker.close()
    assert len(rows) == 1 and rows[0][:2] == (first, True), rows
    assert "unspecified class: Delayed::PerformableMethod" in (rows[0][2] or "")


# -- schemas the harness does not own ----------------------------------------------------


@pytest.fixture
def other_role(server: Server) -> Iterator[str]:
    name = f"tqb_other_{os.getpid()}"
    with connect(server.dsn) as conn:
        conn.execute(sql.SQL("create role {}").format(sql.Identifier(name)))
    yield name
    with connect(server.dsn) as conn:
        conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


def _marked_with_theirs(server: Server, schema: str, role: str) -> None:
    """A schema as a killed run leaves it (our mark, a token no session has), holding a
    table that `role` owns."""
    leftover = f"{MARK} run {secrets.token_hex(8)}"
    ident = sql.Identifier(schema)
    with connect(server.dsn) as conn:
        conn.execute(sql.SQL("create schema {}").format(ident))
        conn.execute(sql.SQL("comment on schema {} is {}").format(ident, sql.Literal(leftover)))
        conn.execute(sql.SQL("create table {}.theirs (id int)").format(ident))
        owner = sql.SQL("alter table {}.theirs owner to {}")
        conn.execute(owner.format(ident, sql.Identifier(role)))


def _theirs_survives(server: Server, schema: str) -> bool:
    with connect(server.dsn) as conn:
        return conn.execute(
            "select to_regclass(%s) is not null", (f"{schema}.theirs",)
        ).fetchone() == (True,)


def _drop(server: Server, schema: str) -> None:
    with connect(server.dsn) as conn:
        conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))


def test_a_marked_awa_with_another_owners_table_survives(server: Server, other_role: str) -> None:
    """A leftover `awa` of a killed run holding a table another role made there is
    refused, not dropped with it: one line naming the table and its owner."""
    _marked_with_theirs(server, "awa", other_role)
    try:
        with (
            pytest.raises(HarnessError) as refused,
            own_schema(server.dsn, "trust_awa", outside=("awa",)),
        ):
            pass
        line = str(refused.value)
        assert "\n" not in line and "is not dropped: 1 object in it is another role's" in line
        assert f"(table awa.theirs of {other_role})" in line
        assert _theirs_survives(server, "awa")
    finally:
        _drop(server, "awa")


def test_an_awa_the_harness_did_not_make_is_refused_with_the_line_that_drops_it(
    server: Server,
) -> None:
    with connect(server.dsn) as conn:
        conn.execute("create schema awa")
    try:
        with (
            pytest.raises(HarnessError) as refused,
            own_schema(server.dsn, "trust_awa", outside=("awa",)),
        ):
            pass
        line = str(refused.value)
        assert "\n" not in line and "the harness did not create it" in line
        assert line.endswith("drop it first: `drop schema awa cascade;`")
    finally:
        _drop(server, "awa")


def test_reuse_schema_leaves_a_leftover_holding_another_roles_table(
    server: Server, other_role: str
) -> None:
    schema = f"trust_reuse_{os.getpid()}"
    _marked_with_theirs(server, schema, other_role)
    try:
        with pytest.raises(HarnessError) as refused, own_schema(server.dsn, schema, reuse=True):
            pass
        line = str(refused.value)
        assert line.startswith(f"--reuse-schema: schema {schema} is not taken over: 1 object")
        assert f"drop schema {schema} cascade removes it and them" in line
        assert _theirs_survives(server, schema)
    finally:
        _drop(server, schema)
