"""report.html, `harness report` and the notebook, on real run folders."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import struct
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from harness.results.contract import matching
from harness.results.folder import RunFolder
from harness.run.render import Rendered, render_run
from harness.server.kinds import Server
from tests.browser import CHROMIUM, FLAGS, NO_CHROMIUM
from tests.conftest import ROOT, SHORT_NOISY, harness_cli
from tests.integration.conftest import run_yaml

DERIVED = [
    "summary.csv",
    "summary.md",
    "results.json",
    "report.html",
    "waits_over_time.png",
    "waits_over_time.svg",
    "waits.png",
    "waits.svg",
    "timeline.png",
    "timeline.svg",
    "tenant_share.png",
    "tenant_share.svg",
]


def test_the_report_has_every_table_and_plot(short_run: Rendered) -> None:
    page = short_run.report.read_text()
    assert page.startswith("<!doctype html>")
    for section in ("id='verdict'", "id='waits'", "id='plots'", "id='provenance'", "id='scenario'"):
        assert section in page
    # waits and backlog over time, ECDF, timeline, share
    assert page.count("src='data:image/png;base64,") == 5
    for plot in ("waits_over_time", "backlog", "waits", "timeline", "tenant_share"):
        png = (short_run.folder.path / f"{plot}.png").read_bytes()
        assert f"src='data:image/png;base64,{base64.b64encode(png).decode()}'" in page, plot
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    for strategy in ("fifo", "round_robin"):
        assert f"<td class='text'>{strategy}</td>" in page
    assert "PostgreSQL 17.10" in page
    for name in DERIVED:
        assert (short_run.folder.path / name).stat().st_size > 0, name


def test_a_run_without_figures_has_every_table_and_a_report_draws_them_later(
    server: Server, tmp_path: Path
) -> None:
    done = run_yaml(server, tmp_path, SHORT_NOISY)  # RunOptions(plots=False)
    folder = done.folder.path
    assert not [*folder.glob("*.png"), *folder.glob("*.svg")]
    assert "data:image/png" not in (folder / "report.html").read_text()
    tables = [name for name in DERIVED if not name.endswith((".png", ".svg"))]
    assert all((folder / name).stat().st_size > 0 for name in tables)
    render_run(RunFolder(path=folder, run_id=done.document.run_id))
    assert all((folder / name).stat().st_size > 0 for name in DERIVED)


def test_harness_report_rebuilds_identical_tables_from_raw_files(
    short_run: Rendered, tmp_path: Path
) -> None:
    copy = tmp_path / short_run.folder.path.name
    shutil.copytree(short_run.folder.path, copy)
    for name in DERIVED:
        (copy / name).unlink()
    done = harness_cli("report", str(copy), timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"Report: {copy / 'report.html'}" in done.stdout
    for name in ("summary.csv", "summary.md", "results.json"):
        assert (copy / name).read_text() == (short_run.folder.path / name).read_text(), name
    assert (copy / "report.html").exists()


def test_every_file_a_run_writes_is_in_the_contract(short_run: Rendered) -> None:
    """The run folder holds only what harness/results/contract.py (and so
    docs/results-format.md) lists, each as the kind it says."""
    folder = short_run.folder.path
    written = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert "jobs.csv" in written and "report.html" in written
    unlisted = [name for name in written if matching(name) is None]
    assert unlisted == []
    raw = {name for name in written if matching(name).kind == "raw"}  # type: ignore[union-attr]
    assert raw == {"scenario.yaml", "run.json", "jobs.csv"}
    assert set(short_run.document.files.values()) <= set(written)


def test_harness_report_refuses_a_folder_that_is_no_run(tmp_path: Path) -> None:
    done = harness_cli("report", str(tmp_path))
    assert (done.returncode, done.stderr.strip()) == (
        2,
        f"error: {tmp_path}: not a run folder (no run.json) nor a suite's (no suite.json)",
    )


def test_the_notebook_is_stored_without_outputs() -> None:
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path


def test_the_notebook_runs_top_to_bottom(
    short_run: Rendered, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As Jupyter runs it: the kernel in the notebook's folder, notebooks/, beside the
    results/ of the project (here the test run's), and no HARNESS_RUN. Every cell runs,
    with the plots and the run's status. Its time is judged against `harness report` of
    the same folder, measured just before it (both load the run and draw the same three
    plots): an absolute bound (it was 60 s) failed under load on this 2-core machine.
    Typical ratio 0.9-1.3 (load 7-11); the bound 4x catches a notebook that does far more
    than a report, and the ratio is taken on the best of two tries. Both sides are timed
    here, one after the other, under whatever load the suite's other workers make: it
    runs among them, not alone after them."""
    monkeypatch.delenv("HARNESS_RUN", raising=False)
    project = short_run.folder.path.parent.parent.parent
    assert (project / "results" / "latest").resolve() == short_run.folder.path.resolve()
    (project / "notebooks").mkdir(exist_ok=True)
    ratios = []
    for attempt in range(2):
        report_s = timed_report(short_run, tmp_path / f"copy-{attempt}")
        notebook, notebook_s = timed_notebook(project / "notebooks")
        ratios.append(notebook_s / report_s)
        print(f"notebook {notebook_s:.1f} s, harness report {report_s:.1f} s")
        if ratios[-1] < NOTEBOOK_OVER_REPORT:
            break
    assert min(ratios) < NOTEBOOK_OVER_REPORT, ratios
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3  # waits, timeline, tenant share
    text = "".join(o.get("text", "") for o in outputs)
    assert f"{short_run.folder.path.resolve()}" in text and "status: complete" in text
    assert "runs of short-noisy" in text  # open_runs over every run of the scenario


NOTEBOOK_OVER_REPORT = 4.0


def timed_report(run: Rendered, copy: Path) -> float:
    """Seconds `harness report` takes to rebuild a copy of the run folder."""
    shutil.copytree(run.folder.path, copy)
    began = time.monotonic()
    done = harness_cli("report", str(copy), timeout=300)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - began


def timed_notebook(kernel_dir: Path) -> tuple[nbformat.NotebookNode, float]:
    """The notebook run with its kernel in `kernel_dir`, as Jupyter starts it."""
    notebook = nbformat.read(ROOT / "notebooks/explore-run.ipynb", as_version=4)
    began = time.monotonic()
    where = {"metadata": {"path": str(kernel_dir)}}
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources=where).execute()
    return notebook, time.monotonic() - began


SCREEN = (1400, 900)
# Where the verdict and the first plot are, measured by the browser once the page loaded.
LAYOUT_PROBE = """<script>window.addEventListener("load", () => {
  const box = (el) => { const r = el.getBoundingClientRect(); return [r.top, r.bottom]; };
  document.body.dataset.layout = JSON.stringify({
    verdict: box(document.getElementById("verdict")),
    headline: box(document.querySelector("p.headline")),
    lead: box(document.querySelector(".lead img")),
  });
});</script>"""


def chromium(*args: str, user_data: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    flags = [
        "--headless",
        *FLAGS,
        f"--user-data-dir={user_data}",
        f"--window-size={SCREEN[0]},{SCREEN[1]}",
        "--virtual-time-budget=5000",  # the page's images decoded before the shot
    ]
    return subprocess.run(
        [CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_first_screen_shows_the_verdict_and_the_waits_over_the_run(
    short_run: Rendered, tmp_path: Path
) -> None:
    """A headless Chromium at 1400x900: the screenshot, and where the page puts the verdict
    and the waits over the run (their boxes, measured by the browser, end within 900 px)."""
    shot = tmp_path / "first-screen.png"
    done = chromium(f"--screenshot={shot}", short_run.report.as_uri(), user_data=tmp_path / "a")
    assert shot.is_file(), done.stderr
    width, height = struct.unpack(">II", shot.read_bytes()[16:24])  # the PNG's IHDR
    assert (width, height) == SCREEN
    probed = tmp_path / "probed.html"
    probed.write_text(short_run.report.read_text().replace("</body>", LAYOUT_PROBE + "</body>"))
    dom = chromium("--dump-dom", probed.as_uri(), user_data=tmp_path / "b").stdout
    found = re.search(r'data-layout="([^"]+)"', dom)
    assert found, dom[-500:]
    layout = json.loads(html.unescape(found[1]))
    assert 0 < layout["verdict"][0] < layout["headline"][0] < layout["lead"][0]
    assert layout["lead"][1] <= SCREEN[1], layout  # the whole plot in the first screen
