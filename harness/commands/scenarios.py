"""`harness scenarios`: the shipped scenarios, by name, with what each one measures."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from harness.commands.validate import describe, describe_suite
from harness.queues.catalog import catalog, traits
from harness.scenario.loader import LoadedSuite, load_any
from harness.shipped import shipped_dir, shipped_scenarios


def scenarios_command(console: Console) -> None:
    queues = traits(catalog())
    table = Table(title=f"Shipped scenarios ({shipped_dir('scenarios')})", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("what it measures")
    table.add_column("runs")
    for name, path in shipped_scenarios().items():
        loaded = load_any(path, queues)
        if isinstance(loaded, LoadedSuite):
            what, runs = loaded.suite.description, describe_suite(loaded)
        else:
            what, runs = loaded.scenario.description, describe(loaded)
        table.add_row(name, " ".join(what.split()), runs)
    console.print(table)
    console.print(
        "Run one by name (harness run NAME); copy its file to make your own (harness run my.yaml).",
        highlight=False,
    )
