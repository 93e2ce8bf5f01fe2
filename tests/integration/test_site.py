"""`harness site` over real runs, seen by a real browser: Debian's Chromium, headless,
driven by playwright (never a browser of its own). Every page of the site loads with no
console error, every link it makes (as the browser resolves it, after the scripts ran)
names a file of the site, the charts draw, and the front page is screenshot."""

from __future__ import annotations

import struct
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from harness.run.scenario_run import RunOptions
from harness.server.kinds import Server
from harness.site.build import build_site
from tests.browser import CHROMIUM, FLAGS, NO_CHROMIUM
from tests.conftest import SHORT_NOISY
from tests.integration.conftest import run_yaml
from tests.site_links import broken_links

# playwright adds --headless itself (headless=True) and takes the profile's folder apart.
SCREEN = {"width": 1400, "height": 900}

CAPTURE = """\
name: tiny-skew
strategies: [round_robin_by_id, round_robin]
backlog:
  groups:
    - {name: large, tenants: 1, jobs_per_tenant: 2000}
    - {name: small, tenants: 5, jobs_per_tenant: 1}
    - {name: idle, tenants: 50, jobs_per_tenant: 0}
  rotation: [idle, small, large]
explain:
  repeat: 1
  variants: [{name: idle-50}]
"""

DRAIN = """\
name: tiny-drain
workers: 2
strategies: [fifo, round_robin]
repetitions: 1
poll_interval_ms: 5
timeout_s: 60
backlog:
  drain: true
  groups: [{name: one, tenants: 1, jobs_per_tenant: 300, duration_ms: 0}]
"""

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM),
    pytest.mark.slow,  # four runs, a build and a browser: a minute here (make test-matrix)
]


@pytest.fixture(scope="module")
def site(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site from real runs: the noisy neighbour in small twice (a trend needs two), a
    plan capture and a drained backlog."""
    folder = tmp_path_factory.mktemp("site-runs")
    for text, options in [
        (SHORT_NOISY, RunOptions(plots=False)),
        (SHORT_NOISY, RunOptions(plots=False)),
        (CAPTURE, RunOptions(timed=False, plots=False)),
        (DRAIN, RunOptions(plots=False)),
    ]:
        run_yaml(server, folder, text, options)
    return build_site([folder / "results"], folder / "site", []).path


def test_the_site_links_only_to_its_own_files(site: Path) -> None:
    assert broken_links(site) == []


def test_every_page_loads_in_chromium_without_an_error(site: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 8  # front, runs, trends, a library, four reports
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            tmp_path / "profile", executable_path=CHROMIUM, args=list(FLAGS), viewport=SCREEN
        )
        try:
            tab = browser.new_page()
            tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda error: problems.append(str(error)))
            tab.on("requestfailed", lambda request: problems.append(request.url))
            charts = {}
            for page in pages:
                tab.goto(page.as_uri(), wait_until="load")
                links = tab.eval_on_selector_all(
                    "[href], [src]", "els => els.map(e => e.href || e.src)"
                )
                problems += [f"{page.name}: {link}" for link in links if _missing(link, site)]
                charts[page.name] = tab.locator(".plotly-graph-div .main-svg").count()
                if page.name == "index.html":
                    tab.screenshot(path=tmp_path / "front.png")
        finally:
            browser.close()
    assert problems == []
    assert charts["index.html"] >= 3  # fairness, throughput, plans: drawn by plotly.js
    assert charts["trends.html"] >= 1
    shot = tmp_path / "front.png"
    assert struct.unpack(">II", shot.read_bytes()[16:24]) == (1400, 900)  # the PNG's IHDR


def _missing(link: str, site: Path) -> bool:
    """A link the browser resolved to a file under the site that is not there; a page's
    own fragments resolve to the page."""
    parts = urlsplit(link)
    if parts.scheme != "file":
        return False
    found = Path(unquote(parts.path))
    return not (found.is_file() and found.resolve().is_relative_to(site.resolve()))
