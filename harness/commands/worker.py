"""`harness worker`: join a fleet run as one of its members, on any host."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from harness.errors import HarnessError
from harness.run.fleet import check_fleet_id
from harness.run.member import serve
from harness.server.kinds import ServerOptions
from harness.server.providers import choose_provider


def worker_command(
    dsn: str | None,
    fleet_id: str,
    strategies_dir: Path | None,
    console: Console,
    adapters_dir: Path | None = None,
    join_timeout_s: float = 0.0,
) -> None:
    """Work the fleet run's repetitions until it ends; its failure is ours (exit 1)."""
    options = ServerOptions(pg="external", dsn=dsn, allow_version_mismatch=True)
    choice = choose_provider(options, os.environ)
    if not fleet_id:
        raise HarnessError("--run: the fleet run's id, as `harness run --fleet N` printed it")
    check_fleet_id(fleet_id, "--run")
    # The host's name and the run's errors are text of others: never read as markup.
    serve(
        choice.dsn,
        fleet_id,
        lambda line: console.print(line, markup=False, highlight=False),
        strategies_dir,
        adapters_dir,
        join_timeout_s,
    )
