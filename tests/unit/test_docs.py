"""The docs follow the code: every scenario field documented, the run-folder contract
listed as the code has it, a short README, and no link or path that leads nowhere."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from harness.queues.contract.manifest import load_adapters
from harness.results.contract import OTHER_FOLDERS, RUN_FILES, matching
from harness.results.suite import SUITE_FILES
from harness.scenario.model import Scenario, Suite

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
FIXTURE_RUNS = ROOT / "tests" / "fixtures" / "runs-v1"
README_MAX_LINES = 200


def sections(text: str) -> dict[str, str]:
    """`## Heading` sections of a page, keyed by the heading's first word."""
    found: dict[str, str] = {}
    for chunk in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        heading, _, body = chunk.partition("\n")
        found[re.split(r"[\s:(]", heading.strip(), maxsplit=1)[0]] = body
    return found


def table_rows(body: str) -> dict[str, list[str]]:
    """Rows of the markdown tables in `body` whose first cell is a name in backticks."""
    rows = {}
    for line in body.splitlines():
        match = re.match(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def models_of(annotation: Any) -> list[type[BaseModel]]:
    """Every pydantic model an annotation names, through unions, lists and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in models_of(arg)]


def scenario_models() -> list[type[BaseModel]]:
    """Scenario, Suite and every model reachable from their fields' annotations."""
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [Suite, Scenario]
    while pending:
        model = pending.pop()
        if model not in found:
            found.append(model)
            for field in model.model_fields.values():
                pending += models_of(field.annotation)
    return found


def as_yaml_data(value: Any) -> Any:
    """A default as the YAML a user would write for it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_defaults=True)
    if isinstance(value, list | tuple):
        return [as_yaml_data(item) for item in value]
    return value


def documented_default(cell: str) -> Any:
    if cell == "required":
        return "required"
    match = re.fullmatch(r"`([^`]*)`", cell)
    assert match, f"a default is `required` or a YAML value in backticks, not {cell!r}"
    return yaml.safe_load(match.group(1))


def model_default(field: Any) -> Any:
    if field.is_required():
        return "required"
    return as_yaml_data(field.get_default(call_default_factory=True))


def scenario_field_problems(page: str) -> list[str]:
    documented = sections(page)
    problems = []
    for model in scenario_models():
        if model.__name__ in documented:
            problems += model_problems(model, table_rows(documented[model.__name__]))
        else:
            problems.append(f"no section '## {model.__name__}'")
    return problems


def model_problems(model: type[BaseModel], rows: dict[str, list[str]]) -> list[str]:
    """A field without a row, a default the page gets wrong, a row naming no field."""
    name, fields = model.__name__, model.model_fields
    problems = []
    for field_name, field in fields.items():
        if field_name not in rows:
            problems.append(f"{name}.{field_name} has no row")
        elif documented_default(rows[field_name][1]) != model_default(field):
            problems.append(f"{name}.{field_name}: default {rows[field_name][1]}")
    return problems + [f"{name}.{row}: no such field" for row in rows if row not in fields]


def test_the_walk_reaches_every_scenario_model() -> None:
    names = {model.__name__ for model in scenario_models()}
    assert {"TenantGroup", "LogNormal", "BacklogGroup", "ExplainVariant", "Crash"} <= names
    assert "LoadedScenario" not in names  # a model, but not part of the file


def test_every_scenario_field_is_documented_with_its_default() -> None:
    assert scenario_field_problems((DOCS / "scenarios.md").read_text()) == []


@pytest.mark.parametrize(
    ("model", "field"), [("TenantGroup", "backoff_ms"), ("Scenario", "seed"), ("Lease", "seconds")]
)
def test_a_field_taken_off_the_page_is_missed(model: str, field: str) -> None:
    page = (DOCS / "scenarios.md").read_text()
    section = sections(page)[model]
    row = next(line for line in section.splitlines() if line.startswith(f"| `{field}` |"))
    mangled = page.replace(section, section.replace(row + "\n", ""))
    assert scenario_field_problems(mangled) == [f"{model}.{field} has no row"]


def test_a_wrong_default_on_the_page_is_missed() -> None:
    page = (DOCS / "scenarios.md").read_text()
    mangled = page.replace("| `repetitions` | integer | `2` |", "| `repetitions` | integer | `3` |")
    assert scenario_field_problems(mangled) == ["Scenario.repetitions: default `3`"]


def results_table(page: str) -> dict[str, list[str]]:
    return table_rows(sections(page)["Files"])


def test_the_results_page_lists_exactly_the_contract() -> None:
    listed = results_table((DOCS / "results-format.md").read_text())
    assert {entry.pattern: entry.kind for entry in RUN_FILES} == {
        pattern: cells[0] for pattern, cells in listed.items()
    }


def test_contract_patterns_are_unique_and_each_matches_itself_alone() -> None:
    examples = {
        "explain/idle-989/round_robin_by_id.json": "explain/<variant>/<strategy>.json",
        "explain/backlog/fifo.txt": "explain/<variant>/<strategy>.txt",
        "tenant_share.svg": "<plot>.svg",
        "waits.png": "<plot>.png",
        "../../latest": "../../latest",
        "bloat-summary.csv": "bloat-summary.csv",
    }
    assert len({entry.pattern for entry in RUN_FILES}) == len(RUN_FILES)
    for name, pattern in examples.items():
        found = matching(name)
        assert found is not None and found.pattern == pattern, name
    for name in ("notes.txt", "explain/a/b/c.json", "other.png", "explain/Big/fifo.json"):
        assert matching(name) is None, name


def fixture_names(run: Path) -> list[str]:
    on_disk = [path.relative_to(run).as_posix() for path in run.rglob("*") if path.is_file()]
    listed = json.loads((run / "run.json").read_text())["files"].values()
    return sorted({*on_disk, *listed})


@pytest.mark.parametrize("run", sorted(p for p in FIXTURE_RUNS.iterdir() if p.is_dir()))
def test_every_file_of_a_recorded_run_is_in_the_contract(run: Path) -> None:
    """On disk, and in run.json's list of files (the plots and report.html left out of
    the fixtures are listed there)."""
    assert [name for name in fixture_names(run) if matching(name) is None] == []


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {slug(heading) for heading in headings}


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [target for target in targets if leads_nowhere(page, target)]


def leads_nowhere(page: Path, target: str) -> bool:
    if re.match(r"^[a-z]+:", target):
        return False  # http(s), mailto: not ours to check offline
    path, _, anchor = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    if not linked.exists():
        return True
    return bool(anchor) and linked.suffix == ".md" and anchor not in anchors(linked)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_path_into_the_package_exists(page: Path) -> None:
    named = re.findall(r"\bharness/[\w./-]*\w", page.read_text())
    assert [path for path in named if not (ROOT / path).exists()] == []


def test_the_slug_of_a_heading() -> None:
    assert slug("Workers: where `this` machine saturates") == "workers-where-this-machine-saturates"


def test_the_shipped_launchers_are_the_ones_the_fleet_page_shows() -> None:
    """deploy/ holds the manifests docs/fleets.md shows, and they start what the CLI has."""
    page = (ROOT / "docs" / "fleets.md").read_text()
    shown = re.findall(r"```yaml\n(.*?)```", page, re.S)
    shipped = [ROOT / "deploy" / name for name in ("fleet-job.yaml", "compose.yaml")]
    assert [path.read_text().split("\n", 1)[1] for path in shipped] == shown
    job = yaml.safe_load(shipped[0].read_text())
    (member,) = job["spec"]["template"]["spec"]["containers"]
    assert member["command"][:3] == ["harness", "worker", "--run"]
    assert job["spec"]["parallelism"] == job["spec"]["completions"]
    compose = yaml.safe_load(shipped[1].read_text())
    assert compose["services"]["member"]["command"][:3] == ["harness", "worker", "--run"]


ARTICLE = '"Job queues per tenant in PostgreSQL: the noisy neighbour"'


@pytest.mark.parametrize(
    "path",
    [*PAGES, *sorted((ROOT / "scenarios").glob("*.yaml"))],
    ids=lambda path: path.name,
)
def test_the_article_is_cited_by_its_title_never_by_a_path_outside_the_package(
    path: Path,
) -> None:
    """A file that ships (a scenario, a page) names the article where it is read: by its
    title and date, not by a file of this workplace that ships nowhere."""
    text = path.read_text()
    assert "shared/seeds" not in text
    reference = yaml.safe_load(text).get("reference") if path.suffix == ".yaml" else None
    if reference and "article" in reference["source"]:
        assert ARTICLE in reference["source"] and "30 September 2026" in reference["source"]


def test_the_results_page_lists_the_other_folders_as_the_contract_does() -> None:
    listed = table_rows(sections((DOCS / "results-format.md").read_text())["Other"])
    assert set(listed) == {
        f"{folder}/{entry.pattern}"
        for folder, entries in OTHER_FOLDERS.items()
        for entry in entries
    }


def test_the_results_page_lists_a_suites_files_as_its_module_does() -> None:
    listed = table_rows(sections((DOCS / "results-format.md").read_text())["Suite"])
    assert {name: row[0] for name, row in listed.items()} == SUITE_FILES


def test_the_faults_page_lists_each_recovery_mapping_as_its_manifest_says() -> None:
    shown = table_rows(sections((DOCS / "faults.md").read_text())["Recovery"])
    declared = {}
    for adapter in load_adapters().values():
        for mapping in adapter.manifest.mappings:
            promise = mapping.recovery
            if promise is None:
                continue
            assert mapping.tuned is not None, mapping.strategy
            after = "-" if promise.after_s is None else f"{promise.after_s:g}"
            settings = "; ".join(
                f"{name} = {mapping.tuned_settings()[name]}: {source}"
                for name, source in mapping.tuned.sources.items()
            )
            cells = [promise.then, after, promise.says, settings]
            declared[mapping.strategy] = [cell.replace("|", "\\|") for cell in cells]
    assert shown == declared and declared


def test_the_faults_page_lists_each_adapters_promise_as_its_manifest_says() -> None:
    shown = table_rows(sections((DOCS / "faults.md").read_text())["Promises"])
    declared = {}
    for name, adapter in load_adapters().items():
        promise = adapter.manifest.recovery
        assert promise is not None, name
        after = "-" if promise.after_s is None else f"{promise.after_s:g}"
        cells = [promise.then, after, promise.says, promise.source]
        declared[name] = [cell.replace("|", "\\|") for cell in cells]
    assert shown == declared
