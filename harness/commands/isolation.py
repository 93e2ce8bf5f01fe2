"""`harness isolation`: SET and SET LOCAL through each pool."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.errors import HarnessError
from harness.experiments.isolation import (
    POOLS,
    TABLE_HEADERS,
    IsolationFolder,
    IsolationSettings,
    PoolKind,
    PoolResult,
    progress_line,
    run_isolation,
    set_local_leaked,
    table_rows,
)
from harness.report.console import console_table
from harness.results.folder import check_results_dir
from harness.server.kinds import ProviderChoice, Server
from harness.server.pgbouncer import pgbouncer_version
from harness.server.provenance import collect_all, collect_local
from harness.server.providers import open_server


def isolation_command(
    settings: IsolationSettings,
    pool: str,
    strict: bool,
    choice: ProviderChoice,
    results_dir: Path,
    console: Console,
) -> int:
    """SET and SET LOCAL through each pool, on each server of `choice` in turn, each in a
    folder of its own; with `strict`, exit 1 if SET LOCAL leaked."""
    pools = _pools(pool)
    check_results_dir(results_dir, ["isolation"])
    codes = [
        _isolation_on(one, settings, pools, strict, results_dir, console) for one in choice.each()
    ]
    return max(codes)


def _isolation_on(
    choice: ProviderChoice,
    settings: IsolationSettings,
    pools: list[PoolKind],
    strict: bool,
    results_dir: Path,
    console: Console,
) -> int:
    """The folder is made first, before the server starts, and kept whatever happens:
    marked interrupted or failed, with what was measured until then."""
    measured: list[PoolResult] = []
    results = IsolationFolder.create(results_dir, settings, collect_local())
    try:
        console.print(choice.starting, highlight=False)
        with open_server(choice) as server:
            results.record_provenance(_provenance(server, pools))
            run_isolation(server.dsn, settings, pools, _shown(measured, console), _said(console))
    except BaseException as error:
        results.close(settings, measured, error)
        raise
    results.close(settings, measured, None)
    title = f"Tenant isolation: SET vs SET LOCAL ({settings.jobs} jobs per pool and mode)"
    console.print(console_table(title, TABLE_HEADERS, table_rows(measured)), crop=False)
    console.print(f"Results: {results.folder.path}", highlight=False)
    leaked = set_local_leaked(measured)
    if leaked:
        console.print("SET LOCAL leaked: see jobs.csv", highlight=False)
    return 1 if strict and leaked else 0


def _provenance(server: Server, pools: list[PoolKind]) -> dict[str, Any]:
    metadata = collect_all(server.dsn, {"kind": server.provider, **server.details})
    if "pgbouncer" in pools:
        metadata["pgbouncer"] = pgbouncer_version()
    return metadata


def _shown(measured: list[PoolResult], console: Console) -> Callable[[PoolResult], None]:
    """Keeps each result as it comes in, and says so: one line per pool and mode."""

    def show(result: PoolResult) -> None:
        measured.append(result)
        console.print(progress_line(result), highlight=False)

    return show


def _said(console: Console) -> Callable[[str], None]:
    """What the experiment says of leftovers, dropped or left: a line each."""
    return lambda line: console.print(line, highlight=False, markup=False)


def _pools(pool: str) -> list[PoolKind]:
    if pool == "all":
        return list(POOLS)
    if pool not in POOLS:
        raise HarnessError(f"--pool: unknown pool '{pool}'; allowed: {', '.join(POOLS)}, all")
    return [pool]  # type: ignore[list-item]  # checked against POOLS just above
