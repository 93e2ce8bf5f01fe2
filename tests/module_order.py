"""The order make test sends its modules to the workers in: the heaviest first.

pytest-xdist's loadscope gives a worker one module at a time, and another as soon as
two or fewer of its tests are left: a worker on a module of one long test (a fault's
windows of seconds) holds the next one or two modules queued behind it. Sent last,
those modules ran one after another on one worker while the three others were idle (30 s
of a 253 s parallel part on 2026-12-04). Sent first (`--no-loadscope-reorder` keeps
this order; xdist's own sorts by the number of tests), the short modules fill in at the
end.

A module's weight is its seconds (setup, call and teardown of each test, summed) in the
last run of the same selection here (pytest's cache), else in tests/module_seconds.json,
which `python -m tests.module_order` writes from that cache for make test's selection
(committed, for a fresh clone). A module in neither goes after the ones known, in the
order collected.

The order is the same in every worker: it reads what the last run left, and the run
writes its own figures only when it ends.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

COMMITTED = Path(__file__).with_name("module_seconds.json")
CACHE_KEY = "tenant-queue-bench/module-seconds"  # {selection: {module: seconds}}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def selection(config: pytest.Config) -> str:
    """The run's `-m` expression, as the key of its figures."""
    return str(config.getoption("markexpr", "") or "")


def known_seconds(config: pytest.Config) -> dict[str, float]:
    committed = json.loads(COMMITTED.read_text()) if COMMITTED.exists() else {}
    seconds = committed["seconds"] if committed.get("markexpr") == selection(config) else {}
    return {**seconds, **_cached(config).get(selection(config), {})}


def heaviest_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Sorted in place; a stable sort keeps each module's tests together and in order."""
    items.sort(key=lambda item: -seconds.get(module_of(item.nodeid), 0.0))


class ModuleClock:
    """In the process that receives every test's reports (pytest-xdist's controller, or
    pytest's one process): each module's seconds, kept in the cache when the run ends
    having run every module it collected in full (no `-k`, no test named), beside the
    figures of the modules it did not run."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def add(self, report: pytest.TestReport) -> None:
        self.seconds[module_of(report.nodeid)] += report.duration

    def keep(self, config: pytest.Config) -> None:
        cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
        if cache is None or not self.seconds or config.getoption("keyword", ""):
            return
        if any("::" in arg for arg in config.args):
            return
        figures, selected = _cached(config), selection(config)
        measured = {module: round(seconds, 1) for module, seconds in self.seconds.items()}
        figures[selected] = dict(sorted({**figures.get(selected, {}), **measured}.items()))
        cache.set(CACHE_KEY, figures)


def _cached(config: pytest.Config) -> dict[str, dict[str, float]]:
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if cache is None:
        return {}
    figures: Any = cache.get(CACHE_KEY, {})
    return figures if isinstance(figures, dict) else {}


def main(argv: list[str]) -> int:
    """Write tests/module_seconds.json from the cache's figures for make test's
    selection (`python -m tests.module_order MARKEXPR`, the expression make test
    passes to -m)."""
    if len(argv) != 1:
        print("usage: python -m tests.module_order MARKEXPR", file=sys.stderr)
        return 2
    cache = Path(__file__).resolve().parent.parent / ".pytest_cache" / "v" / CACHE_KEY
    figures = json.loads(cache.read_text()).get(argv[0]) if cache.exists() else None
    if not figures:
        print(f"no figures for -m {argv[0]!r} in {cache}: run make test first", file=sys.stderr)
        return 1
    written = {"markexpr": argv[0], "seconds": figures}
    COMMITTED.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n")
    print(f"{COMMITTED}: {len(figures)} modules, {sum(figures.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
