"""--pg-version and --pg-bin: the server options declared once on every command that
starts a server, turned into one ProviderChoice, and every refusal one line before
anything runs. No server starts here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.results.document import PlanEntry, RunDocument, ScenarioRef, ServerEntry
from harness.server.builds import BUILDS, MAJORS, Install, missing
from harness.server.kinds import ServerOptions
from harness.server.providers import choose_provider, parse_majors
from tests.conftest import ROOT, harness_cli

SERVER_COMMANDS = ("run", "explain", "check", "overhead", "isolation", "adapter-test")


def fake_build(folder: Path, version: str) -> Path:
    """A bin folder whose postgres prints `version` (initdb beside it, never run)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("postgres", "initdb"):
        program = bin_dir / name
        program.write_text(f"#!/bin/sh\necho 'postgres (PostgreSQL) {version}'\n")
        program.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("command", SERVER_COMMANDS)
def test_every_command_that_starts_a_server_takes_the_same_server_options(command: str) -> None:
    shown = harness_cli(command, "--help", env={"COLUMNS": "200"}).stdout
    options = ("--pg ", "--dsn", "--image", "--pg-version", "--pg-bin", "--allow-version")
    for option in (*options, "--run-user"):
        assert option in shown, f"{command}: {option}"
    assert ("--listen" in shown) == (command == "run")


def test_the_worker_takes_only_a_dsn() -> None:
    shown = harness_cli("worker", "--help", env={"COLUMNS": "200"}).stdout
    assert "--dsn" in shown and "--pg-version" not in shown and "--pg " not in shown
    assert "--run-user" in shown  # its library programs, as root, run as that user


def test_majors_are_one_or_several_comma_separated_and_17_by_default() -> None:
    assert parse_majors(None, {}) == (17,)
    assert parse_majors("15,16, 17,18", {}) == (15, 16, 17, 18)
    assert parse_majors("18", {}) == (18,)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("15,abc", "--pg-version: '15,abc' is not allowed; give one major or several"),
        ("15;16", "--pg-version: '15;16' is not allowed"),
        ("", "--pg-version: '' is not allowed"),
        ("15,15", "--pg-version: '15,15' names a major twice"),
    ],
)
def test_a_bad_pg_version_is_one_line(text: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        parse_majors(text, {})


def test_a_major_without_a_build_is_refused_naming_the_ones_there_are() -> None:
    with pytest.raises(HarnessError) as refused:
        choose_provider(ServerOptions(pg_version="13"), {})
    assert "of 14, 15, 16, 17, 18" in str(refused.value) and "--pg-bin DIR" in str(refused.value)


def test_the_container_runs_postgres_of_each_major_and_external_is_one_major() -> None:
    choice = choose_provider(ServerOptions("container", pg_version="15,18"), {})
    assert [t.image for t in choice.targets] == ["postgres:15", "postgres:18"]
    assert [one.target.major for one in choice.each()] == [15, 18]
    with pytest.raises(HarnessError, match="--image names one image"):
        choose_provider(ServerOptions(image="mine:1", pg_version="15,18"), {})
    external = choose_provider(ServerOptions(dsn="postgresql://h/db", pg_version="15"), {})
    assert external.majors == (15,)
    with pytest.raises(HarnessError, match="--pg external is one server of one major"):
        choose_provider(ServerOptions(dsn="postgresql://h/db", pg_version="15,16"), {})


def test_pg_bin_is_for_the_embedded_server(tmp_path: Path) -> None:
    bin_dir = fake_build(tmp_path, "19.1")
    with pytest.raises(HarnessError, match="--pg-bin goes with --pg embedded, not --pg container"):
        choose_provider(ServerOptions("container", pg_bin=(bin_dir,)), {})


def test_a_build_of_ones_own_brings_its_major(tmp_path: Path) -> None:
    """Its major is what its postgres prints; with --pg-version it must be named there."""
    bin_dir = fake_build(tmp_path, "19.1")
    choice = choose_provider(ServerOptions(pg_bin=(bin_dir,)), {})
    assert choice.majors == (19,)
    install = choice.target.install
    assert install is not None and (install.bin, install.major) == (bin_dir, 19)
    assert install.source == f"--pg-bin {bin_dir}"
    with pytest.raises(HarnessError, match="is PostgreSQL 19, which --pg-version '18' does not"):
        choose_provider(ServerOptions(pg_bin=(bin_dir,), pg_version="18"), {})


def test_a_folder_that_is_no_build_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="has no postgres and initdb; give the bin folder"):
        choose_provider(ServerOptions(pg_bin=(tmp_path,)), {})
    talks = fake_build(tmp_path / "odd", "is not a version")
    with pytest.raises(HarnessError, match="said 'postgres \\(PostgreSQL\\) is not a version'"):
        choose_provider(ServerOptions(pg_bin=(talks,)), {})
    one, other = fake_build(tmp_path / "a", "16.1"), fake_build(tmp_path / "b", "16.4")
    with pytest.raises(HarnessError, match="are both PostgreSQL 16; give one build per major"):
        choose_provider(ServerOptions(pg_bin=(one, other)), {})


def test_a_build_runs_with_its_library_folders_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LD_LIBRARY_PATH", "/elsewhere")
    install = Install(16, tmp_path / "bin", "test", (tmp_path / "libs",))
    assert install.environment()["LD_LIBRARY_PATH"] == f"{tmp_path / 'libs'}:/elsewhere"
    assert Install(17, tmp_path / "bin", "test").environment()["LD_LIBRARY_PATH"] == "/elsewhere"


def test_every_major_of_the_table_says_how_to_get_it() -> None:
    assert tuple(BUILDS) == MAJORS
    for major, build in BUILDS.items():
        line = missing(build, "Linux", "x86_64")
        assert line.startswith(f"--pg embedded needs PostgreSQL {major} from ")
        assert "\n" not in line and "--pg-bin DIR" in line
    assert "apt-get install postgresql-15" in missing(BUILDS[15], "Linux", "x86_64")
    assert "pip install 'pgserver==0.1.4'" in missing(BUILDS[16], "Linux", "x86_64")
    assert "npm" in missing(BUILDS[14], "Linux", "x86_64")


# Run before the harness: the pgserver wheel (PostgreSQL 16) is not there.
WITHOUT_16 = """
import runpy, sys
sys.modules["pgserver"] = None
sys.argv = ["harness", *sys.argv[1:]]
runpy.run_module("harness", run_name="__main__")
"""


@pytest.mark.skipif(Path("/usr/lib/postgresql/16/bin/postgres").exists(), reason="Debian's 16")
def test_a_major_not_installed_is_one_line_naming_how_to_get_it(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_16,
            "explain",
            str(ROOT / "scenarios" / "dequeue-check.yaml"),
            "--pg-version",
            "17,16",
            "--results-dir",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        "error: --pg embedded needs PostgreSQL 16 from the pgserver==0.1.4 wheel, which is not"
    )
    assert "pip install 'pgserver==0.1.4'" in done.stderr
    assert "Starting PostgreSQL" not in done.stdout
    assert not (tmp_path / "results").exists()


def test_several_majors_refuse_a_fleet_and_a_version_mismatch(tmp_path: Path) -> None:
    scenario = str(ROOT / "scenarios" / "noisy-neighbour.yaml")
    results = ["--results-dir", str(tmp_path / "results")]
    for extra, said in (
        (["--fleet", "1"], "error: --fleet goes with one --pg-version, not several"),
        (["--allow-version-mismatch"], "error: --allow-version-mismatch goes with one"),
    ):
        done = harness_cli("run", scenario, "--pg-version", "17,18", *extra, *results)
        assert done.returncode == 2 and done.stderr.startswith(said), done.stderr
        assert "Starting PostgreSQL" not in done.stdout
    assert not (tmp_path / "results").exists()


def test_a_document_of_several_majors_keeps_each_majors_captures_apart() -> None:
    document = RunDocument(
        run_id="r",
        started_at="2026-12-01T00:00:00+00:00",
        scenario=ScenarioRef(name="s", path="s.yaml", sha256="0", seed=1),
        majors=[15, 18],
        servers=[ServerEntry(pg_version="15.20"), ServerEntry(pg_version="18.6")],
    )
    assert document.pg_versions == ["15.20", "18.6"]
    entry = {"variant": "idle-989", "strategy": "round_robin", "backlog": {}}
    plan = PlanEntry.model_validate({**entry, "pg_version": "18.6"})
    assert document.capture_stem(plan) == "explain/pg18/idle-989/round_robin"
    one = document.model_copy(update={"majors": [18]})
    assert one.capture_stem(plan) == "explain/idle-989/round_robin"
    with pytest.raises(ValueError, match="pg_version"):
        PlanEntry.model_validate({**entry, "pg_version": "../../x"})


def test_a_run_json_of_version_2_names_its_one_server() -> None:
    older = json.loads((ROOT / "tests/fixtures/runs-v1/legacy-mix/run.json").read_text())
    older = {**older, "format_version": 2, "queues": {}}
    document = RunDocument.from_data(older, "run.json")
    assert [server.pg_version for server in document.servers] == ["17.10"]
    assert document.majors == [17]
    assert "postgres" not in document.metadata and "provider" not in document.metadata
    assert {entry.pg_version for entry in document.plans} == {"17.10"}
    assert document.provenance()["postgres"]["server_version_num"] == 170010


def test_a_baseline_of_another_major_is_one_line_before_any_server_starts() -> None:
    baseline = "baselines/dequeue-pg17.json"
    done = harness_cli("check", "--pg-version", "18", "--baseline", baseline, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        f"error: {baseline}: a baseline of PostgreSQL 17.10, and the server is PostgreSQL 18; "
        "give --baseline a baseline made on 18"
    )
    assert "harness check --update-baseline --pg-version 18" in done.stderr
    assert "Starting PostgreSQL" not in done.stdout
    several = harness_cli("check", "--pg-version", "17,18", "--baseline", baseline, cwd=ROOT)
    assert several.returncode == 2
    assert several.stderr.startswith("error: --baseline names one major's baseline")


def test_each_major_of_a_check_writes_its_own_reports() -> None:
    """With several majors, --markdown check.md and --junit check.xml become one file per
    major (check-pg15.md, ...), each against that major's baseline; one major keeps the
    names as given."""
    from harness.check.verdict import CheckSettings
    from harness.commands.check import CheckRequest, _one_major

    request = CheckRequest(
        settings=CheckSettings(), markdown=Path("out/check.md"), junit=Path("check.xml")
    )
    fifteen = _one_major(request, 15, 2)
    assert (fifteen.markdown, fifteen.junit) == (Path("out/check-pg15.md"), Path("check-pg15.xml"))
    assert fifteen.baseline is not None and fifteen.baseline.name == "dequeue-pg15.json"
    alone = _one_major(request, 15, 1)
    assert (alone.markdown, alone.junit) == (request.markdown, request.junit)
