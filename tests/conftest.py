from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ProviderUnavailable
from harness.queues.catalog import catalog, traits
from harness.scenario.traits import QueueTraits
from harness.server.builds import DEFAULT_MAJOR, locate
from harness.server.embedded import reachable_install
from tests.forked_cli import ForkedCli
from tests.module_order import ModuleClock, heaviest_first, known_seconds

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
FORKED = ForkedCli()  # harness_cli's processes
CLOCK = ModuleClock()  # each module's seconds, for the next run's order


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a shell without job control (`make test &`
    in a script) inherits SIGINT and SIGQUIT ignored, and so does every process it
    starts: the interrupt tests' Ctrl-C would reach no harness, and the stand-in server
    of a killed harness would not die of its parent-death SIGQUIT (PostgreSQL sets its
    own). Their defaults back, for this process and the ones it starts."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        _copy_the_build_once()


def pytest_unconfigure(config: pytest.Config) -> None:
    FORKED.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heaviest modules first (tests/module_order.py)."""
    heaviest_first(items, known_seconds(config))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    CLOCK.add(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the process that saw every report
        CLOCK.keep(session.config)


def _copy_the_build_once() -> None:
    """pytest-xdist's controller, before its workers start: the default PostgreSQL build
    copied where the server's user runs it (as root, a cache in /tmp that
    reachable_install makes once), so that the workers, each starting its own server at
    the same moment, find the copy made instead of making it at once over one another. A
    build that is missing is left for the tests to report."""
    with contextlib.suppress(ProviderUnavailable):
        reachable_install(locate(DEFAULT_MAJOR))


@pytest.fixture
def write_yaml(tmp_path: Path):
    """Write a scenario file and return its path."""

    def write(text: str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


def builtin_traits() -> dict[str, QueueTraits]:
    """What each queue of the catalog cannot take, as the commands pass it to the loader."""
    return traits(catalog())


SHORT_NOISY = """\
name: short-noisy
workers: 2
strategies: [fifo, round_robin]
repetitions: 1
poll_interval_ms: 5
timeout_s: 60
tenant_groups:
  - name: large
    tenants: 1
    jobs_per_tenant: 200
    duration_ms: 5
  - name: small
    tenants: 5
    jobs_per_tenant: 2
    duration_ms: 5
    enqueue_at_s: 0.2
"""


def harness_cli(
    *args: str, timeout: float = 60, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m harness ARGS` to its end, as a user runs it: its output and exit code.
    `env`: variables set on top of this process's environment. A fork of a process that
    imported the harness once (tests/forked_cli.py), unless TQB_FORKED_CLI=0."""
    if os.environ.get("TQB_FORKED_CLI", "1") != "0":
        return FORKED.run(list(args), timeout, cwd, {**os.environ, **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env={**os.environ, **env} if env else None,
    )


# Every test this session collected, and its markers: tests/unit/test_markers.py reads
# them, when the session collected the whole suite, instead of collecting it again in a
# subprocess (10 s of a make test). Deselected ones (`-m`, `-k`) count: pytest says which.
COLLECTED = pytest.StashKey[dict[str, list[str]]]()
_DESELECTED = pytest.StashKey[list[pytest.Item]]()


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        items[0].config.stash.setdefault(_DESELECTED, []).extend(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    whole = [Path(arg).resolve() for arg in session.config.args] == [ROOT / "tests"]
    if not whole:
        return
    every = [*session.items, *session.config.stash.get(_DESELECTED, [])]
    session.config.stash[COLLECTED] = {
        item.nodeid: sorted({mark.name for mark in item.iter_markers()}) for item in every
    }
