"""`harness site`: a static results site from run folders (harness/site/build.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rich.console import Console

from harness.errors import HarnessError

EXTRA = "site"  # the optional dependencies that draw its charts (pyproject.toml)


def site_command(paths: list[Path], out: Path, patterns: list[str], console: Console) -> Path:
    """The site built into `out`, a new or empty folder; where it is."""
    if importlib.util.find_spec("plotly") is None:
        raise HarnessError(
            f"harness site draws with plotly, which is not installed: pip install "
            f"'tenant-queue-bench[{EXTRA}]' (make venv installs it)"
        )
    from harness.site.build import build_site, check_target

    check_target(out)
    built = build_site(paths, out, patterns)
    console.print(
        f"Site: {built.runs} runs, {len(built.pages)} pages: {built.path / 'index.html'}",
        highlight=False,
    )
    return built.path
