"""What a queue needs beyond the harness's own dependencies: checked before any server
starts, one line naming what to install, exit 2; never a traceback from an import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.queues.base import Missing, QueueEntry
from harness.queues.catalog import catalog, require, unmet
from harness.queues.contract import runtime
from harness.queues.contract.manifest import HARNESS_PYTHON, load_adapters
from harness.scenario.traits import QueueTraits
from tests.conftest import ROOT, SHORT_NOISY, harness_cli


class Tracked:
    """A requirement that says whether it is met and counts its preparations."""

    def __init__(self, missing: Missing | None) -> None:
        self.absent, self.prepared = missing, 0

    def missing(self) -> Missing | None:
        return self.absent

    def prepare(self, say: object) -> None:
        self.prepared += 1


def entry(name: str, *requires: object) -> QueueEntry:
    return QueueEntry(name, QueueTraits(), lambda site, inputs: None, requires=requires)  # type: ignore[arg-type, return-value]


PYTHON_LIBRARIES = {  # adapter -> the modules it imports of the `libraries` extra
    "procrastinate": "procrastinate",
    "pgqueuer": "pgqueuer",
    "dbos": "dbos",
    "awa": "awa",
    "pgmq": "pgmq",
    "saq": "saq",
    "pgqrs": "pgqrs",
}


def test_the_queues_needing_one_install_share_one_sentence_and_nothing_is_prepared() -> None:
    lacking = Missing("frobnicate", "pip install frobnicate")
    met = Tracked(None)
    entries = {
        "a": entry("a", Tracked(lacking)),
        "b": entry("b", Tracked(lacking), met),
        "c": entry("c", Tracked(Missing("npm", "apt-get install npm"))),
        "d": entry("d"),
    }
    with pytest.raises(HarnessError) as refused:
        require(entries, ["a", "b", "c", "d"], "mix.yaml", print)
    line = str(refused.value)
    assert "\n" not in line
    assert line == (
        "mix.yaml: strategies a, b need frobnicate, not installed: pip install frobnicate; "
        "strategy c needs npm, not installed: apt-get install npm"
    )
    assert met.prepared == 0  # nothing made ready while something is missing
    require(entries, ["b", "d"][1:], "mix.yaml", print)  # d needs nothing
    assert list(unmet(entries, ["d"])) == []


def test_what_is_met_is_made_ready_before_the_server() -> None:
    met = Tracked(None)
    require({"a": entry("a", met)}, ["a"], "x.yaml", print)
    assert met.prepared == 1


def test_every_library_mapping_declares_what_it_needs() -> None:
    """Every adapter's mappings need its runtime; a Python library's is its modules, of
    the `libraries` extra, which its manifest names."""
    entries = catalog()
    adapters = load_adapters()
    for adapter in adapters.values():
        for declared in adapter.manifest.mappings:
            requires = entries[declared.strategy].requires
            assert requires == (runtime.AdapterRuntime(adapter),), declared.strategy
    for name, module in PYTHON_LIBRARIES.items():
        manifest = adapters[name].manifest
        assert manifest.command[0] == HARNESS_PYTHON, name
        (needs,) = manifest.requires
        assert needs.python_modules is not None and module in needs.python_modules, name
        assert "tenant-queue-bench[libraries]" in needs.install, name
    assert all(not entries[name].requires for name in ("fifo", "round_robin"))


def test_an_adapter_whose_runtime_is_absent_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no node, perl or ruby on it
    for adapter in load_adapters().values():
        if adapter.name in PYTHON_LIBRARIES:
            continue  # the harness's own interpreter: on no PATH
        absent = runtime.AdapterRuntime(adapter).missing()
        assert absent is not None, adapter.name
        assert absent.what.endswith("fails here") and absent.install, adapter.name


def test_without_go_a_river_strategy_is_one_line_naming_it_before_any_server(
    tmp_path: Path,
) -> None:
    """The River adapter is built by Go on first use: where no `go` is on PATH, a run that
    names a River strategy says so in one line, with where to get it, exit 2."""
    scenario = tmp_path / "river.yaml"
    scenario.write_text(SHORT_NOISY.replace("[fifo, round_robin]", "[fifo, river_tuned]"))
    no_go = {"PATH": str(Path(sys.executable).parent)}  # the harness's interpreter, no go
    done = harness_cli("run", str(scenario), "--results-dir", str(tmp_path / "r"), env=no_go)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "strategy river_tuned needs `go version` fails here" in done.stderr
    assert "Go 1.26 or newer" in done.stderr and "https://go.dev/dl/" in done.stderr
    assert "Starting PostgreSQL" not in done.stdout
    assert not (tmp_path / "r").exists()  # no run folder: nothing was measured


# The libraries' modules made unimportable, as in an install without the `libraries` extra.
WITHOUT_LIBRARIES = """
import runpy, sys
for name in ("procrastinate", "pgqueuer", "asyncpg"):
    sys.modules[name] = None
sys.argv = ["harness", *sys.argv[1:]]
runpy.run_module("harness", run_name="__main__")
"""


@pytest.mark.parametrize("verb", ["run", pytest.param("explain", marks=pytest.mark.thorough)])
def test_without_the_libraries_extra_real_queues_is_one_line_before_any_server(
    verb: str, tmp_path: Path
) -> None:
    scenario = "real-queues" if verb == "run" else "real-queues-plans"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LIBRARIES, verb, scenario, "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "procrastinate, pgqueuer, asyncpg, not installed" in done.stderr
    assert "tenant-queue-bench[libraries]" in done.stderr
    assert "Starting PostgreSQL" not in done.stdout
    assert list(tmp_path.iterdir()) == []  # no run folder: nothing was measured


def test_an_adapters_preparation_shows_its_progress_as_it_goes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A stand-in npm that downloads three packages: each progress line counts its output
    so far, and the last says how it ended."""
    npm = tmp_path / "npm"
    npm.write_text(
        "#!/bin/sh\n"
        'test "$1" = ci || exit 9\n'
        'for p in a b c; do echo "npm http fetch GET 200 https://registry/$p 5ms" >&2; done\n'
        "echo 'added 3 packages in 1s'\n"
    )
    npm.chmod(0o755)
    monkeypatch.setattr(runtime, "PROGRESS_S", 0.0)
    said: list[str] = []
    code, last = runtime._run_showing_progress([str(npm), "ci"], tmp_path, "npm", said.append)
    assert (code, last) == (0, "added 3 packages in 1s")
    assert said[:3] == [f"npm: {n} lines of output, 0 s" for n in (1, 2, 3)]
    assert said[-1].startswith("npm: done in ") and said[-1].endswith("(added 3 packages in 1s)")
    failing = tmp_path / "fails"
    failing.write_text("#!/bin/sh\necho 'ERR! no network'\nexit 3\n")
    failing.chmod(0o755)
    assert runtime._run_showing_progress([str(failing)], tmp_path, "npm", said.append) == (
        3,
        "ERR! no network",
    )


def test_a_preparation_that_hangs_without_output_is_killed_at_its_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(runtime, "PREPARE_TIMEOUT_S", 0.5)
    hangs = tmp_path / "hangs"
    hangs.write_text("#!/bin/sh\nexec sleep 30\n")
    hangs.chmod(0o755)
    said: list[str] = []
    assert runtime._run_showing_progress([str(hangs)], tmp_path, "npm", said.append) == (
        1,
        "timed out after 0.5 s",
    )


JVM_SCENARIO = """
name: jvm-missing
workers: 2
strategies: [fifo, dbscheduler]
tenant_groups:
  - {name: a, tenants: 1, jobs_per_tenant: 2, duration_ms: 1}
"""


def test_without_a_jdk_and_maven_the_jvm_queue_is_one_line_before_any_server(
    tmp_path: Path,
) -> None:
    """db-scheduler's adapter on a machine without java (PATH holds neither a JDK nor
    Maven): one line naming the Debian packages, exit 2, no server, no run folder."""
    scenario = tmp_path / "jvm-missing.yaml"
    scenario.write_text(JVM_SCENARIO)
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(scenario), "--results-dir", str(results)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "strategy dbscheduler needs `java -version` fails here" in done.stderr
    assert "apt-get install default-jdk-headless" in done.stderr
    assert "Starting PostgreSQL" not in done.stdout
    assert not results.exists() or list(results.iterdir()) == []
