"""A server that is not the harness's own keeps what is not ours: a user's view on one of
our tables, a schema of another role, a schema a live run works in, the pgstattuple
another run samples with, and nothing of a killed isolation run is left for good. An
interrupt ends the harness in seconds, whatever statement it interrupted."""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
import pytest

from harness.errors import HarnessError
from harness.queues.base import Site
from harness.queues.catalog import catalog, traits
from harness.queues.sql.strategies import Strategy
from harness.run.long_transaction import Holder
from harness.run.repetition import RepetitionResult
from harness.run.scenario_run import RunOptions, run_scenario
from harness.scenario.loader import load_scenario
from harness.scenario.model import LongTransaction
from harness.server.connections import connect, session_name
from harness.server.kinds import Server
from harness.server.schema import (
    CLEANUP_LOCK_TIMEOUT_S,
    SchemaKept,
    depended_on,
    mark,
    own_schema,
    recreate,
)
from tests.conftest import harness_cli
from tests.integration.conftest import Quiet, sql_queue
from tests.integration.test_cli_runs import (
    ONE_STRATEGY,
    left_behind,
    marked_env,
    server_programs,
)

# A token no live run has: what a run killed outright leaves in its schema's comment.
DEAD = "0123456789abcdef"


# --- an interrupt ends in seconds --------------------------------------------------------

# Near the scenario's limit of jobs in all: its load runs for many seconds on any machine.
LONG_LOAD = (
    ONE_STRATEGY
    + """\
backlog:
  groups: [{name: old, tenants: 1, jobs_per_tenant: 4900000, duration_ms: 0}]
explain:
  variants: [{name: deep}]
"""
)
# A liveness bound, not a timing: the harness left in under a second once it cancelled
# the load, and waited out the rest of the load (12 s here, on 2 cores) when it did not.
GONE_WITHIN_S = 10


def start_explain(tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    scenario = tmp_path / "long-load.yaml"
    scenario.write_text(LONG_LOAD)
    results = str(tmp_path / "results")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "explain",
            str(scenario),
            "--results-dir",
            results,
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=marked_env(),
    )


def loading_dsn(harness: subprocess.Popen[str], external: str | None) -> str:
    """The server the harness loads its backlog into: the external one, or the embedded
    one it started (found by its socket directory on its postmaster's command line).
    Only a descendant of this harness: the matrix runs other tests' servers beside it,
    and one may end between being listed and being read (CI once read a gone pid)."""
    if external is not None:
        return external
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and harness.poll() is None:
        for pid in server_programs():
            try:
                if not _descends(pid, harness.pid):
                    continue
                words = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            except (FileNotFoundError, ProcessLookupError):
                continue  # gone since it was listed
            if "-k" in words:
                socket = words[words.index("-k") + 1]
                return f"host={socket} port=5432 user=postgres dbname=bench"
        time.sleep(0.1)
    raise AssertionError("the harness started no server")


def _descends(pid: int, ancestor: int) -> bool:
    """Whether `ancestor` is among `pid`'s parents (by /proc's ppid, up to init)."""
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state
        if pid == ancestor:
            return True
    return False


def wait_for_the_load(harness: subprocess.Popen[str], dsn: str) -> None:
    """Until the backlog's INSERT runs on the server (pg_stat_activity)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and harness.poll() is None:
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
                loading = conn.execute(
                    "select count(*) from pg_stat_activity where state = 'active' "
                    "and query like 'insert into jobs%%generate_series%%'"
                ).fetchone()
            if loading is not None and loading[0]:
                return
        except psycopg.OperationalError:
            pass  # the server is still starting
        time.sleep(0.1)
    raise AssertionError(f"no backlog load seen; the harness: {harness.poll()}")


# make test: on --dsn (its schema dropped); the matrix: on the embedded server too (its
# server stopped, as the interrupt tests of test_cli_runs.py check at other moments).
@pytest.mark.parametrize(
    "provider", [pytest.param("embedded", marks=pytest.mark.thorough), "external"]
)
def test_sigterm_during_a_backlog_load_ends_the_harness_in_seconds(
    server: Server, tmp_path: Path, provider: str
) -> None:
    """The load's INSERT is cancelled (it is the harness's own session), so the cleanup
    does not wait for it: the harness is gone, its embedded server stopped, or on an
    external server its schema dropped, long before the load would have ended."""
    external = server.dsn if provider == "external" else None
    before = server_programs()
    harness = start_explain(tmp_path, *(["--dsn", external] if external else []))
    try:
        wait_for_the_load(harness, loading_dsn(harness, external))
        time.sleep(1)  # well under way: every lock the INSERT takes is taken
        harness.send_signal(signal.SIGTERM)
        _, stderr = harness.communicate(timeout=GONE_WITHIN_S)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.communicate()
    assert harness.returncode == 130, stderr
    assert stderr.strip().splitlines() == [
        "interrupted: everything the harness started is stopped; a run it cut short keeps "
        "what it measured, marked interrupted in its run.json"
    ]
    assert left_behind(before) == set()
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        left = conn.execute("select nspname from pg_namespace where nspname like 'harness%'")
        assert left.fetchall() == []
        running = conn.execute(
            "select count(*) from pg_stat_activity where query like 'insert into jobs%%'"
            " and state = 'active'"
        )
        assert running.fetchone() == (0,)


# --- what others built on our schema ----------------------------------------------------


def test_a_users_view_on_one_of_our_tables_keeps_our_schema(server: Server) -> None:
    """The cleanup's drop would take the view with it (cascade): it drops nothing, and
    says what depends on the schema and how to remove both."""
    try:
        with (
            own_schema(server.dsn, "ours_viewed") as owned,
            psycopg.connect(server.dsn, autocommit=True) as conn,
        ):
            conn.execute("create table ours_viewed.jobs (id int)")
            conn.execute("create view public.users_jobs as select id from ours_viewed.jobs")
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert conn.execute("select count(*) from public.users_jobs").fetchone() == (0,)
        assert owned.left == (
            "schema ours_viewed is left on the server: 1 object outside it depends on it "
            "(view public.users_jobs); drop schema ours_viewed cascade removes it and them"
        )
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("drop schema if exists ours_viewed cascade")


def test_a_lock_held_by_someone_else_leaves_the_schema_and_says_so(server: Server) -> None:
    """The cleanup waits for a lock at most CLEANUP_LOCK_TIMEOUT_S, then leaves the
    schema and says why; it never ends a session that is not the run's own."""
    reader = psycopg.connect(server.dsn)  # not the harness's: a user reading our table
    release = threading.Timer(60, reader.close)  # on a harness that waits, the test ends
    try:
        with own_schema(server.dsn, "ours_locked") as owned:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                conn.execute("create table ours_locked.jobs (id int)")
            reader.execute("select count(*) from ours_locked.jobs")  # its lock, until commit
            release.start()
        assert owned.left == (
            f"schema ours_locked is left on the server: another session held a lock on it for "
            f"{CLEANUP_LOCK_TIMEOUT_S} s; drop schema ours_locked cascade removes it"
        )
        assert reader.execute("select count(*) from ours_locked.jobs").fetchone() == (0,)
    finally:
        release.cancel()
        reader.close()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("drop schema if exists ours_locked cascade")


def test_what_depends_on_a_schema_from_outside_is_read_from_pg_depend(server: Server) -> None:
    """Every kind of dependent a cascade would take, named as the server names it; what
    the schema holds itself (a view on its own table, a sequence, its default privileges,
    which pgmq's install script sets) is not counted."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("create schema ours_deps")
        conn.execute("create table ours_deps.t (id int primary key)")
        conn.execute("create view ours_deps.inner_view as select id from ours_deps.t")
        conn.execute("create sequence ours_deps.s")
        conn.execute(
            "alter default privileges in schema ours_deps grant select on tables to pg_monitor"
        )
        conn.execute(
            "create function ours_deps.f() returns trigger language plpgsql as "
            "'begin return new; end'"
        )
        assert depended_on(conn, "ours_deps") is None
        conn.execute("create schema theirs")
        conn.execute("create view theirs.v as select id from ours_deps.t")
        conn.execute(
            "create table theirs.r (id int references ours_deps.t, "
            "n bigint default nextval('ours_deps.s'))"
        )
        conn.execute(
            "create trigger tr before insert on theirs.r "
            "for each row execute function ours_deps.f()"
        )
        try:
            assert depended_on(conn, "ours_deps") == (
                "4 objects outside it depend on it (default value for theirs.r.n, table "
                "constraint r_id_fkey on theirs.r, trigger tr on theirs.r and 1 more)"
            )
            assert depended_on(conn, "theirs") is None
        finally:
            conn.execute("drop schema theirs cascade")
            conn.execute("drop schema ours_deps cascade")


class ViewAfterTheFirst(Quiet):
    """Builds a user's view on the run's jobs table once the first repetition is done."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn, self.schema = dsn, schema

    def repetition_finished(self, result: RepetitionResult) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"create view public.mid_run as select id from {self.schema}.jobs")


def test_a_view_built_mid_run_stops_the_run_and_survives_it(server: Server, tmp_path: Path) -> None:
    """The next repetition would empty the schema by dropping it: the run stops there,
    failed, with the first repetition kept; the view and the schema stay."""
    path = tmp_path / "scenario.yaml"
    path.write_text(ONE_STRATEGY.replace("repetitions: 1", "repetitions: 2"))
    entries = catalog()
    loaded = load_scenario(path, traits(entries))
    options = RunOptions(schema="ours_mid_run", plots=False)
    observer = ViewAfterTheFirst(server.dsn, "ours_mid_run")
    try:
        with pytest.raises(SchemaKept) as kept:
            run_scenario(loaded, entries, server, tmp_path / "results", observer, options)
        assert str(kept.value) == (
            "schema ours_mid_run is left on the server: 1 object outside it depends on it "
            "(view public.mid_run), so no repetition can start from an empty schema (the run "
            "keeps what it measured); drop schema ours_mid_run cascade removes it and them"
        )
        document = json.loads((tmp_path / "results" / "latest" / "run.json").read_text())
        assert (document["status"], len(document["repetitions"])) == ("failed", 1)
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert conn.execute("select count(*) from public.mid_run").fetchone() == (210,)
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("drop schema if exists ours_mid_run cascade")


# --- --reuse-schema takes over only a leftover of ours ------------------------------------


def reuse(server: Server, tmp_path: Path, schema: str) -> subprocess.CompletedProcess[str]:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(ONE_STRATEGY)
    return harness_cli(
        *("run", str(scenario), "--results-dir", str(tmp_path / "results"), "--no-plots"),
        *("--dsn", server.dsn, "--schema", schema, "--reuse-schema"),
        timeout=120,
    )


@contextmanager
def leftover(server: Server, schema: str, comment: str, owner: str | None = None) -> Iterator[None]:
    """A schema with a table in it, as a run killed outright leaves one, or as it looks."""
    authorization = f" authorization {owner}" if owner else ""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"create schema {schema}{authorization}")
        conn.execute(f"comment on schema {schema} is '{comment}'")
        conn.execute(f"create table {schema}.jobs (id int)")
        conn.execute(f"insert into {schema}.jobs values (7)")
    try:
        yield
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"drop schema if exists {schema} cascade")


def still_there(server: Server, schema: str) -> bool:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        return conn.execute(f"select id from {schema}.jobs").fetchall() == [(7,)]


@pytest.fixture
def other_role(server: Server) -> Iterator[str]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("create role someone_else nologin")
    yield "someone_else"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("drop role someone_else")


def test_a_schema_of_another_role_with_our_mark_is_not_taken_over(
    server: Server, tmp_path: Path, other_role: str
) -> None:
    with leftover(server, "theirs_marked", mark(DEAD), owner=other_role):
        done = reuse(server, tmp_path, "theirs_marked")
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == (
            "error: --reuse-schema: schema theirs_marked is owned by someone_else, not by the "
            "role this run connects as; the harness takes over only a schema of its own role"
        )
        assert still_there(server, "theirs_marked")


def test_a_comment_that_only_begins_with_our_mark_is_not_ours(
    server: Server, tmp_path: Path
) -> None:
    with leftover(server, "almost_marked", "created by tenant-queue-bench, or so it says"):
        done = reuse(server, tmp_path, "almost_marked")
        assert done.returncode == 2, done.stderr
        assert "schema almost_marked was not created by the harness" in done.stderr
        assert still_there(server, "almost_marked")


def test_the_schema_of_a_run_still_connected_is_not_taken_over(
    server: Server, tmp_path: Path
) -> None:
    live = "fedcba9876543210"
    with (
        leftover(server, "live_run", mark(live)),
        psycopg.connect(server.dsn, application_name=session_name(live)),
    ):
        done = reuse(server, tmp_path, "live_run")
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == (
            f"error: --reuse-schema: schema live_run is in use: run {live} that created it "
            "has 1 session(s) connected; it is not left behind"
        )
        assert still_there(server, "live_run")


def test_a_leftover_with_a_users_view_on_it_is_not_taken_over(
    server: Server, tmp_path: Path
) -> None:
    with leftover(server, "left_viewed", mark(DEAD)):
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("create view public.on_leftover as select id from left_viewed.jobs")
        try:
            done = reuse(server, tmp_path, "left_viewed")
            assert done.returncode == 2, done.stderr
            assert done.stderr.strip() == (
                "error: --reuse-schema: schema left_viewed is not taken over: 1 object outside "
                "it depends on it (view public.on_leftover), which dropping it would drop too; "
                "drop schema left_viewed cascade removes it and them"
            )
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                assert conn.execute("select id from public.on_leftover").fetchall() == [(7,)]
        finally:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                conn.execute("drop view if exists public.on_leftover")


# --- pgstattuple: never dropped while another run samples with it ------------------------

HOLD = LongTransaction(from_s=0, for_s=600, sample_ms=50)


def installed_pgstattuple(server: Server) -> str | None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        found = conn.execute(
            "select extnamespace::regnamespace::text from pg_extension "
            "where extname = 'pgstattuple'"
        ).fetchone()
    return found[0] if found else None


@contextmanager
def sampling(server: Server, strategies: dict[str, Strategy], schema: str) -> Iterator[Holder]:
    """A run's schema with a queue's tables, and its long transaction's sampler."""
    with own_schema(server.dsn, schema):
        with connect(server.dsn, schema=schema) as conn:
            sql_queue(server, strategies["fifo"], schema).install(conn)
        start = multiprocessing.get_context("spawn").Event()
        with Holder(Site(server.dsn, schema), HOLD, start) as holder:
            start.set()
            yield holder


def sampled_dead_versions(holder: Holder, after: int = 0) -> None:
    """Waits for a sample past the first `after` with pgstattuple's figures in it."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        samples = holder.record.samples[after:]
        if samples and samples[-1]["jobs_dead_versions"] is not None:
            return
        time.sleep(0.02)
    raise AssertionError("no sample with pgstattuple's figures")


def test_pgstattuple_is_not_dropped_while_another_run_samples_with_it(
    server: Server, strategies: dict[str, Strategy]
) -> None:
    """Run A creates the extension, run B samples with it too; A ends first: its cleanup
    leaves the extension to B, whose samples go on; the last one to use it drops it."""
    assert installed_pgstattuple(server) is None
    with ExitStack() as b_run:
        with sampling(server, strategies, "sampler_a") as a:
            sampled_dead_versions(a)
            b = b_run.enter_context(sampling(server, strategies, "sampler_b"))
            sampled_dead_versions(b)
        assert installed_pgstattuple(server) == "harness_pgstattuple"
        sampled_dead_versions(b, after=len(b.record.samples))
    assert installed_pgstattuple(server) is None


def test_the_sampler_gives_up_pgstattuple_before_its_backend_ends(
    server: Server, strategies: dict[str, Strategy], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A closed connection's backend ends a moment later and holds its locks until then:
    the sampling connection gives up its shared lock before it closes, so that its own
    run's drop of the extension is not refused by it. Its close is made to leave its
    backend running, as a slow exit does on a busy machine."""
    assert installed_pgstattuple(server) is None
    with sampling(server, strategies, "sampler_slow_exit") as holder:
        sampled_dead_versions(holder)
        lingering = holder._sampling
        assert lingering is not None
        monkeypatch.setattr(lingering, "close", lambda: None)
    try:
        assert installed_pgstattuple(server) is None
    finally:
        psycopg.Connection.close(lingering)


def test_a_pgstattuple_installed_by_someone_else_stays(
    server: Server, strategies: dict[str, Strategy]
) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("create schema their_tools")
        conn.execute("create extension pgstattuple schema their_tools")
    try:
        with sampling(server, strategies, "sampler_c") as c:
            sampled_dead_versions(c)
        assert installed_pgstattuple(server) == "their_tools"
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("drop schema their_tools cascade")


# --- a killed isolation run's role ------------------------------------------------------


def test_a_killed_isolation_runs_role_and_schema_are_dropped_by_the_next(
    server: Server, tmp_path: Path
) -> None:
    """Named and marked with the dead run's token: found and dropped, and said. A live
    run's role and a role merely named like ours are left alone."""
    live, unmarked = "fedcba9876543210", "harness_app_00000000000000aa"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for token in (DEAD, live):
            conn.execute(f"create role harness_app_{token} login")
            conn.execute(f"comment on role harness_app_{token} is '{mark(token)}'")
        conn.execute(f"create role {unmarked} login")
        conn.execute(f"create schema harness_isolation_{DEAD}")
        conn.execute(f"comment on schema harness_isolation_{DEAD} is '{mark(DEAD)}'")
        conn.execute(f"grant usage on schema harness_isolation_{DEAD} to harness_app_{DEAD}")
    try:
        with psycopg.connect(server.dsn, application_name=session_name(live)):
            done = harness_cli(
                *("isolation", "--jobs", "20", "--pool", "psycopg", "--dsn", server.dsn),
                *("--results-dir", str(tmp_path / "results")),
                timeout=120,
            )
        assert done.returncode == 0, done.stderr
        assert (
            f"dropped role harness_app_{DEAD}, left by a harness isolation that was killed\n"
            in (done.stdout)
        )
        assert f"dropped schema harness_isolation_{DEAD}, left by run {DEAD} that was killed\n" in (
            done.stdout
        )
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            roles = conn.execute(
                "select rolname from pg_roles where rolname like 'harness_app_%' order by 1"
            ).fetchall()
            assert roles == [(unmarked,), (f"harness_app_{live}",)]
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"drop schema if exists harness_isolation_{DEAD} cascade")
            for role in (f"harness_app_{DEAD}", f"harness_app_{live}", unmarked):
                conn.execute(f"drop role if exists {role}")


# --- a schema a library insists on by name (awa's `awa`) ----------------------------------


def _exists(server: Server, schema: str) -> bool:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        found = conn.execute("select 1 from pg_namespace where nspname = %s", (schema,))
        return found.fetchone() is not None


def test_a_fixed_name_schema_the_harness_did_not_create_refuses_the_run(server: Server) -> None:
    """A library's schema of a fixed name that is a user's (their own awa) is never taken:
    the run is refused before anything is created, and it stays."""
    with leftover(server, "fixed_users", "their own"):
        with (
            pytest.raises(HarnessError) as refused,
            own_schema(server.dsn, "run_beside", outside=("fixed_users",)),
        ):
            pass
        assert str(refused.value) == (
            "schema fixed_users exists already on this server and the harness did not create "
            "it: a library of this run keeps its tables in a schema of that fixed name "
            "(docs/real-queues.md); run it on a database without one, or, if nothing in it "
            "is to be kept, drop it first: `drop schema fixed_users cascade;`"
        )
        assert still_there(server, "fixed_users") and not _exists(server, "run_beside")


def test_a_fixed_name_schema_of_a_live_run_is_not_taken(server: Server) -> None:
    live = "fedcba9876543211"
    with (
        leftover(server, "fixed_live", mark(live)),
        psycopg.connect(server.dsn, application_name=session_name(live)),
    ):
        with (
            pytest.raises(HarnessError, match=f"in use by run {live} of the harness"),
            own_schema(server.dsn, "run_beside", outside=("fixed_live",)),
        ):
            pass
        assert still_there(server, "fixed_live")


def test_a_fixed_name_schema_is_the_runs_made_afresh_and_dropped_with_it(server: Server) -> None:
    """One a killed run left is dropped as the run starts; each repetition makes it afresh
    (marked as this run's), beside the run's schema; the end drops both."""
    with leftover(server, "fixed_left", mark(DEAD)):
        with own_schema(server.dsn, "run_beside", outside=("fixed_left",)):
            assert not _exists(server, "fixed_left")
            with connect(server.dsn) as conn:
                recreate(conn, "run_beside", ("fixed_left",))
                conn.execute("create table fixed_left.jobs (id int)")
                recreate(conn, "run_beside", ("fixed_left",))
                found = conn.execute("select to_regclass('fixed_left.jobs')").fetchone()
                assert found == (None,)
                comment = "select obj_description('fixed_left'::regnamespace, 'pg_namespace')"
                assert conn.execute(comment).fetchone() == (mark(),)
        assert not _exists(server, "fixed_left") and not _exists(server, "run_beside")
