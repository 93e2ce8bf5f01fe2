"""`harness adapter-test`: the conformance kit on one declared adapter; exit 0 when every
check passes, 1 with a line per failed check (docs/adapters.md)."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from harness.errors import HarnessError
from harness.queues.contract import runtime
from harness.queues.contract.manifest import Adapter, load_adapters
from harness.run.conformance import conformance
from harness.server.providers import choose_provider, open_server


def adapter_test_command(
    name: str,
    adapters_dir: Path | None,
    pg: str | None,
    dsn: str | None,
    image: str | None,
    allow_mismatch: bool,
    console: Console,
) -> int:
    adapter = _declared(name, adapters_dir)
    runtime.require(adapter)  # a missing runtime: one line naming what to install, exit 2
    runtime.run_dir(adapter)  # prepared once (npm ci) before the clock of any check
    choice = choose_provider(pg, dsn, os.environ, allow_mismatch, image=image)
    say = lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    say(f"Starting PostgreSQL ({choice.kind})...")
    with open_server(choice) as server:
        verdict = conformance(adapter, server.dsn, say)
    for line in verdict.lines():
        say(line)
    return 0 if verdict.passed else 1


def _declared(name: str, adapters_dir: Path | None) -> Adapter:
    adapters = load_adapters(adapters_dir)
    if name not in adapters:
        raise HarnessError(f"no adapter '{name[:60]}' is declared; declared: {sorted(adapters)}")
    return adapters[name]
