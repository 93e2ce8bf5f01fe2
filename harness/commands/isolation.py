"""`harness isolation`: SET and SET LOCAL through each pool."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.errors import HarnessError
from harness.experiments.isolation import (
    POOLS,
    TABLE_HEADERS,
    IsolationSettings,
    PoolKind,
    run_isolation,
    set_local_leaked,
    table_rows,
    write_results,
)
from harness.report.console import console_table
from harness.server.kinds import ProviderChoice
from harness.server.pgbouncer import pgbouncer_version
from harness.server.provenance import collect_all
from harness.server.providers import open_server


def isolation_command(
    settings: IsolationSettings,
    pool: str,
    strict: bool,
    choice: ProviderChoice,
    results_dir: Path,
    console: Console,
) -> int:
    """SET and SET LOCAL through each pool; with `strict`, exit 1 if SET LOCAL leaked."""
    pools = _pools(pool)
    console.print(f"Starting PostgreSQL ({choice.kind})...", highlight=False)
    with open_server(choice) as server:
        results = run_isolation(server.dsn, settings, pools)
        metadata = collect_all(server.dsn, {"kind": server.provider, **server.details})
    if "pgbouncer" in pools:
        metadata["pgbouncer"] = pgbouncer_version()
    folder = write_results(results_dir, settings, results, metadata)
    title = f"Tenant isolation: SET vs SET LOCAL ({settings.jobs} jobs per pool and mode)"
    console.print(console_table(title, TABLE_HEADERS, table_rows(results)))
    console.print(f"Results: {folder.path}", highlight=False)
    leaked = set_local_leaked(results)
    if leaked:
        console.print("SET LOCAL leaked: see jobs.csv", highlight=False)
    return 1 if strict and leaked else 0


def _pools(pool: str) -> list[PoolKind]:
    if pool == "all":
        return list(POOLS)
    if pool not in POOLS:
        raise HarnessError(f"--pool: unknown pool '{pool}'; allowed: {', '.join(POOLS)}, all")
    return [pool]  # type: ignore[list-item]  # checked against POOLS just above
