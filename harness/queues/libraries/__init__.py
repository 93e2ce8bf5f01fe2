"""Queue libraries measured through their own code: procrastinate and pgqueuer (Python),
pg-boss and graphile-worker (Node). Each mapping of tenants onto a library's knobs is a
queue a scenario names in `strategies:` like a built-in SQL strategy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.queues.base import Missing, PythonPackages, Queue, QueueEntry, Requirement, Say, Site
from harness.scenario.inputs import RunInputs

# name -> (library, mapping); docs/real-queues.md says what each promises.
MAPPINGS: dict[str, tuple[str, str]] = {
    "procrastinate": ("procrastinate", "one_queue"),
    "procrastinate_lock_per_tenant": ("procrastinate", "lock_per_tenant"),
    "procrastinate_queue_per_tenant": ("procrastinate", "queue_per_tenant"),
    "pgqueuer": ("pgqueuer", "one_entrypoint"),
    "pgqueuer_entrypoint_per_tenant": ("pgqueuer", "entrypoint_per_tenant"),
    "pgqueuer_concurrency_limit": ("pgqueuer", "concurrency_limit"),
    "pgboss": ("pgboss", "one_queue"),
    "pgboss_group_concurrency": ("pgboss", "group_concurrency"),
    "graphile_worker": ("graphile", "one_queue"),
    "graphile_worker_queue_per_tenant": ("graphile", "queue_per_tenant"),
}


def make(name: str) -> Callable[[Site, RunInputs], Queue]:
    library, mapping = MAPPINGS[name]

    def factory(site: Site, inputs: RunInputs) -> Queue:
        if library == "procrastinate":
            from harness.queues.libraries.procrastinate_queue import ProcrastinateQueue

            return ProcrastinateQueue(name, mapping, site, inputs)
        if library == "pgqueuer":
            from harness.queues.libraries.pgqueuer_queue import PgqueuerQueue

            return PgqueuerQueue(name, mapping, site, inputs)
        from harness.queues.libraries.node_queue import NodeQueue

        return NodeQueue(name, library, mapping, site, inputs)

    return factory


@dataclass(frozen=True)
class NodeRunner:
    """pg-boss and graphile-worker run in a Node runner whose packages (Node 22 among them)
    npm installs on first use: `npm` is needed until it is installed."""

    def missing(self) -> Missing | None:
        from harness.queues.libraries import node_queue

        if node_queue.runner_installed() or node_queue.npm() is not None:
            return None
        return Missing(
            "npm (it installs their Node runner once)",
            "apt-get install npm (Debian), or Node.js with npm from nodejs.org",
        )

    def prepare(self, say: Say) -> None:
        from harness.queues.libraries import node_queue

        node_queue.install_runner(say)


# What each library needs beyond the harness's own dependencies.
REQUIRES: dict[str, tuple[Requirement, ...]] = {
    "procrastinate": (PythonPackages(("procrastinate",), "libraries"),),
    "pgqueuer": (PythonPackages(("pgqueuer", "asyncpg"), "libraries"),),
    "pgboss": (NodeRunner(),),
    "graphile": (NodeRunner(),),
}


def entries() -> list[QueueEntry]:
    """The library mappings, for the catalog of queues a scenario may name."""
    from harness.queues.libraries.common import LIBRARY_TRAITS

    return [
        QueueEntry(name, LIBRARY_TRAITS, make(name), requires=REQUIRES[library])
        for name, (library, _) in MAPPINGS.items()
    ]


def register_programs() -> None:
    """Every library's programs, registered: each module registers its own as it is
    imported (harness/queues/programs.py)."""
    from harness.queues.libraries import (  # noqa: F401
        node_queue,
        pgqueuer_queue,
        procrastinate_queue,
    )
