"""Shell completion of the names the commands take (`harness --install-completion`)."""

from __future__ import annotations


def scenario_names(incomplete: str) -> list[str]:
    """The shipped scenarios that start with what is typed; nothing for what looks like a
    path, which the shell then completes as a file."""
    if "/" in incomplete or incomplete.startswith("."):
        return []
    from harness.shipped import shipped_scenarios

    return [name for name in shipped_scenarios() if name.startswith(incomplete)]


def strategy_names(incomplete: str) -> list[str]:
    """Every queue a scenario can name (built-in strategies and library mappings)."""
    from harness.queues.catalog import catalog

    return sorted(name for name in catalog() if name.startswith(incomplete))
