from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest
import yaml

from harness.queues.base import Site, WorkerReport
from harness.queues.catalog import catalog, traits
from harness.queues.contract.jobs import Job
from harness.queues.contract.process import AdapterProcess, run_role
from harness.queues.contract.protocol import Installed, Ready
from harness.queues.contract.queue import ContractSpec, enqueue_all
from harness.queues.contract.reader import WorkerEvents
from harness.queues.sql.queue import SqlQueue
from harness.queues.sql.strategies import Strategy, load_strategies
from harness.run.captures import CaptureRequest
from harness.run.render import Rendered
from harness.run.repetition import Repetition, RepetitionResult
from harness.run.scenario_run import RunOptions, run_scenario
from harness.scenario.inputs import RunInputs
from harness.scenario.loader import load_scenario
from harness.scenario.model import Scenario
from harness.server.connections import connect
from harness.server.kinds import Server, ServerOptions
from harness.server.providers import choose_provider, open_server
from harness.server.schema import recreate
from tests.conftest import SHORT_NOISY

T = TypeVar("T")

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration needs the server: marked `integration`, so that
    `-m "not integration"` leaves them out. (A `pytestmark` in a conftest marks nothing: it
    is not a test module.) The hook sees the whole session's items, hence the path test."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One real embedded PostgreSQL 17 for the integration tests."""
    with open_server(choose_provider(ServerOptions(pg="embedded"), {})) as running:
        yield running


@pytest.fixture(scope="session")
def strategies() -> dict[str, Strategy]:
    return load_strategies()


@pytest.fixture
def queue(server: Server, strategies: dict[str, Strategy]) -> Iterator[psycopg.Connection]:
    """A connection to a fresh copy of the article's schema, in a schema of its own."""
    with connect(server.dsn, schema="queue_test") as conn:
        conn.execute("create schema if not exists queue_test")
        recreate(conn, "queue_test")
        sql_queue(server, strategies["round_robin"], "queue_test").install(conn)
        yield conn
        conn.execute("drop schema queue_test cascade")


def sql_queue(server: Server, strategy: Strategy, schema: str, yaml_text: str = "") -> SqlQueue:
    """A built-in strategy as the seam's queue, for a scenario (by default a small one)."""
    scenario = Scenario.model_validate(yaml.safe_load(yaml_text or SHORT_NOISY))
    return SqlQueue(strategy, Site(server.dsn, schema), RunInputs.of(scenario))


class Quiet:
    """An observer that shows nothing."""

    def repetition_started(self, repetition: Repetition, jobs: int) -> None: ...

    def jobs_done(self, done: int) -> None: ...

    def horizon_progress(self, line: str) -> None: ...

    def repetition_finished(self, result: RepetitionResult) -> None: ...

    def capture_started(self, request: CaptureRequest, executions: int) -> None: ...

    def capture_step(self) -> None: ...


def run_yaml(
    server: Server,
    directory: Path,
    text: str,
    options: RunOptions | None = None,
    strategies_dir: Path | None = None,
    observer: Quiet | None = None,
) -> Rendered:
    """Write a scenario into `directory` and run it there on the test server. Without
    `options`, a run without figures (the tests that look at one ask for them)."""
    path = directory / "scenario.yaml"
    path.write_text(text)
    entries = catalog(strategies_dir)
    loaded = load_scenario(path, traits(entries))
    return run_scenario(
        loaded,
        entries,
        server,
        directory / "results",
        observer or Quiet(),
        options or RunOptions(plots=False),
    )


@pytest.fixture(scope="session")
def short_run(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """The noisy neighbour in small, both strategies, one repetition: a real run folder,
    its figures too."""
    return run_yaml(server, tmp_path_factory.mktemp("short"), SHORT_NOISY, RunOptions())


def worked(
    spec: ContractSpec, batch: list[Job], while_running: Callable[[], T] | None = None
) -> tuple[WorkerReport, T | None]:
    """`spec`'s adapter installed, and a worker of it through `batch`, enqueued at once:
    its task log, once it has reported every job and stopped, and what `while_running`
    returned, called before the stop."""
    run_role(spec.adapter, spec.config("install"), (Installed,))
    worker = AdapterProcess(spec.adapter, spec.config("worker"))
    report = WorkerReport(worker=0)
    try:
        worker.expect(Ready)
        events = WorkerEvents.started(worker, report)
        enqueue_all(spec, [(0.0, batch)])
        events.wait_for(len(batch), 60)
        found = while_running() if while_running is not None else None
        events.stop()
    finally:
        worker.close()
    return report, found
