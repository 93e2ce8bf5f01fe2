"""The life of one program's process, whatever queue it belongs to.

A spawned process ignores Ctrl-C (it reaches the whole process group; the runner decides
when its children stop), dies with the harness if the harness is killed outright,
runs its body (which connects and says it is ready: the SQL strategies' through one
connection opened here, a library's through its own), and always sends back its
report: the error it failed with, if it did.

This module imports little: every spawned worker and enqueuer process loads it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from collections.abc import Callable
from typing import Any

import psycopg

from harness.queues.base import Signals, Site, WorkerReport
from harness.server.connections import connect, session_name
from harness.server.processes import signal_on_parent_death

Body = Callable[[WorkerReport], None]
Connected = Callable[[psycopg.Connection[Any], int, Signals, WorkerReport], None]


def run_program(index: int, signals: Signals, body: Body) -> None:
    """The process of every program, the SQL strategies' and the libraries': run `body`
    (which connects and sets its ready slot), and always send its report, the error it
    failed with if it did."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    report = WorkerReport(worker=index)
    try:
        body(report)
    except Exception:
        report.error = traceback.format_exc(limit=6)
    signals.reports.put(report)


def run_connected(
    index: int, site: Site, signals: Signals, body: Connected, application_name: str | None = None
) -> None:
    """`run_program` of a body that works on one connection to the site's schema, opened
    here (named `application_name`, else the run's sessions' name): the slot is ready
    once it is."""
    name = application_name or session_name()

    def connected(report: WorkerReport) -> None:
        with connect(site.dsn, schema=site.schema, application_name=name) as conn:
            signals.ready[index] = 1
            body(conn, index, signals, report)

    run_program(index, signals, connected)


def die_with_parent() -> None:
    """The kernel kills this process when the harness dies (Linux's PR_SET_PDEATHSIG);
    elsewhere the runner's own stop is all there is.

    The signal only covers a parent that dies from now on: one killed while this process
    was still starting (importing, on a loaded machine) left it an orphan that waits for
    a start that never comes. So a process whose parent is gone already leaves."""
    signal_on_parent_death("SIGKILL")
    parent = multiprocessing.parent_process()  # the harness, even through a fork server
    if parent is not None and not parent.is_alive():
        os._exit(1)  # no report: nobody is left to read it
