"""`harness site` without a server: its refusals, and a site built from the run folders an
older harness wrote (tests/fixtures/runs-v1), every link of it naming a file of the site.
The browser's view of a site from real runs: tests/integration/test_site.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.explore import RunData
from harness.site.build import build_site
from harness.site.pages import library_page
from harness.site.runs import SiteRun
from tests.conftest import ROOT, harness_cli
from tests.site_links import broken_links, internal_links

FIXTURES = ROOT / "tests" / "fixtures" / "runs-v1"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """The older harness's run folders, as a results folder of scenario folders."""
    folder = tmp_path / "results"
    for run in sorted(FIXTURES.iterdir()):
        if run.is_dir():
            shutil.copytree(run, folder / run.name / run.name)
    return folder


def test_a_path_that_is_no_run_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = tmp_path / "site"
    for given in (tmp_path / "absent", tmp_path / "empty"):
        done = harness_cli("site", str(given), "-o", str(out))
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and str(given) in done.stderr, done.stderr
        assert "no run folder" in done.stderr
    assert not out.exists()


def test_a_site_is_never_written_over_a_folder_that_holds_anything(
    results: Path, tmp_path: Path
) -> None:
    out = tmp_path / "site"
    out.mkdir()
    (out / "mine.txt").write_text("kept")
    done = harness_cli("site", str(results), "-o", str(out))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "is not empty" in done.stderr, done.stderr
    assert sorted(path.name for path in out.iterdir()) == ["mine.txt"]
    assert (out / "mine.txt").read_text() == "kept"


def test_an_unreadable_run_json_is_one_line_and_no_site(results: Path, tmp_path: Path) -> None:
    broken = results / "broken" / "run-1"
    broken.mkdir(parents=True)
    (broken / "run.json").write_text("{not json")
    with pytest.raises(HarnessError, match=r"run\.json: not JSON"):
        build_site([results], tmp_path / "site", [])
    assert not (tmp_path / "site").exists()
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".site.")]


def test_a_site_from_older_run_folders_links_only_to_its_own_files(
    results: Path, tmp_path: Path
) -> None:
    """Runs of format 1 (no results.json, no report.html, CSVs without run_id): the
    front page compares their strategies, every number links into the site, every run
    folder is copied whole, plotly.js is there once."""
    built = build_site([results, results / "legacy-mix"], tmp_path / "site", [])
    site = built.path
    assert built.runs == 3  # each run once, though given twice
    assert {"index.html", "runs.html", "trends.html", library_page("harness")} <= set(built.pages)
    for run in sorted(FIXTURES.iterdir()):
        if run.is_dir():
            copied = site / SiteRun(RunData(run)).href
            assert sorted(p.name for p in copied.iterdir()) == sorted(p.name for p in run.iterdir())
    front = (site / "index.html").read_text()
    assert "Fairness and its price" in front and "Plotly.newPlot" in front
    assert "https://" not in front and "cdn" not in front.lower()
    assert len(list(site.rglob("plotly*.js"))) == 1
    assert internal_links(site) > 50
    assert broken_links(site) == []


def test_the_command_is_the_one_recorded_as_a_user_types_it(results: Path) -> None:
    run = SiteRun(RunData(results / "legacy-mix" / "legacy-mix"))
    recorded = run.document.metadata.get("command") or []
    if recorded:
        assert run.command().split()[0] == "harness"
        assert run.command().split()[1:] == [str(arg) for arg in recorded[1:]]
    else:
        assert run.command() == ""


def test_library_pages_are_named_for_a_file() -> None:
    assert library_page("Delayed::Job") == "library-delayed-job.html"
    assert library_page("pg-boss") == "library-pg-boss.html"


HORIZON = ROOT / "tests" / "fixtures" / "runs-horizon"


def test_a_long_runs_drift_is_on_the_front_page_and_its_librarys(tmp_path: Path) -> None:
    """A long run, kept as the docs keep one (no report.html, no raw file): its drift
    table's rows on the front page, each library's on its page, each naming its verdict
    and linking to the run's horizon-drift.csv."""
    built = build_site([HORIZON], tmp_path / "site", [])
    site = built.path
    front = (site / "index.html").read_text()
    assert "Over hours: how each queue ages" in front
    section = front[front.index('<section id="horizon">') :]
    section = section[: section.index("</section>")]
    for strategy in ("river", "dbscheduler", "pgqrs"):
        assert f"<td>{strategy}</td>" in section
    assert "growing (size, p99), growing (size)" in section  # river's two repetitions
    assert section.count(">horizon-drift.csv</a>") == 3
    river = (site / library_page("River")).read_text()
    assert "Over hours" in river and "<td>river</td>" in river and "<td>pgqrs</td>" not in river
    assert broken_links(site) == []
