"""Queue libraries measured through their own code, in the harness's own processes:
procrastinate, pgqueuer, DBOS, awa, pgmq and saq (Python). Each mapping of tenants onto a
library's knobs is a queue a scenario names in `strategies:` like a built-in SQL strategy.
(A queue in any other language is an adapter of the contract, harness/queues/contract/:
pg-boss and graphile-worker in Node, Minion in Perl, Delayed::Job in Ruby; docs/adapters.md.)

Each Python library is a module of its own that declares its mappings (`entries()`) and
registers its programs as it is imported; adding one is a new module and a line in
`_libraries()`. A queue in another language is an adapter: a folder with its manifest, no
line of the harness (docs/adapters.md). A module imports its library only inside the
functions that use it, so the catalog lists every mapping whether or not the library is
installed.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.queues.base import QueueEntry


def _libraries() -> list[Callable[[], list[QueueEntry]]]:
    """Each Python library's entries, one line per library."""
    from harness.queues.libraries import (
        awa_queue,
        dbos_queue,
        pgmq_queue,
        pgqueuer_queue,
        procrastinate_queue,
        saq_queue,
    )

    return [
        procrastinate_queue.entries,
        pgqueuer_queue.entries,
        dbos_queue.entries,
        awa_queue.entries,
        pgmq_queue.entries,
        saq_queue.entries,
    ]


def entries() -> list[QueueEntry]:
    """The library mappings, for the catalog of queues a scenario may name;
    docs/real-queues.md says what each promises."""
    return [entry for library in _libraries() for entry in library()]


def register_programs() -> None:
    """Every library's programs, registered: each module registers its own as it is
    imported (harness/queues/programs.py)."""
    _libraries()
