"""Queue libraries measured through their own code: procrastinate, pgqueuer, pgmq and saq
(Python), pg-boss and graphile-worker (Node). Each mapping of tenants onto a library's knobs is a
queue a scenario names in `strategies:` like a built-in SQL strategy.

Each library is a module of its own that declares its mappings (`entries()`) and
registers its programs as it is imported; adding a library is a new module and a line in
`_LIBRARIES`. A module imports its library only inside the functions that use it, so the
catalog lists every mapping whether or not the library is installed.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.queues.base import QueueEntry


def _libraries() -> list[Callable[[], list[QueueEntry]]]:
    """Each library's entries, one line per library."""
    from harness.queues.libraries import (
        node_queue,
        pgmq_queue,
        pgqueuer_queue,
        procrastinate_queue,
        saq_queue,
    )

    return [
        procrastinate_queue.entries,
        pgqueuer_queue.entries,
        node_queue.entries,
        pgmq_queue.entries,
        saq_queue.entries,
    ]


def entries() -> list[QueueEntry]:
    """The library mappings, for the catalog of queues a scenario may name; docs/real-queues.md
    says what each promises."""
    return [entry for library in _libraries() for entry in library()]


def register_programs() -> None:
    """Every library's programs, registered: each module registers its own as it is
    imported (harness/queues/programs.py)."""
    _libraries()
