"""`harness adapter-test`: the conformance kit on one declared adapter; exit 0 when every
check passes, 1 with a line per failed check (docs/adapters.md)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.errors import HarnessError
from harness.queues.contract import runtime
from harness.queues.contract.manifest import Adapter, load_adapters
from harness.run.conformance import conformance
from harness.server.kinds import ProviderChoice
from harness.server.providers import open_server


def adapter_test_command(
    name: str, adapters_dir: Path | None, choice: ProviderChoice, console: Console
) -> int:
    """The kit on each server of `choice` in turn; 1 if a check failed on any."""
    adapter = _declared(name, adapters_dir)
    runtime.require(adapter)  # a missing runtime: one line naming what to install, exit 2
    runtime.run_dir(adapter)  # prepared once (npm ci) before the clock of any check
    return max(_kit_on(adapter, one, console) for one in choice.each())


def _kit_on(adapter: Adapter, choice: ProviderChoice, console: Console) -> int:
    say = lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    say(choice.starting)
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
