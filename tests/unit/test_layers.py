"""The package's layering, read from its source: every import, lazy ones inside functions
included, goes to a layer at or before the importer's own (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "harness"
# In the order of the flow; a module may import from its own layer and those before it.
LAYERS = [
    ["harness", "harness.errors", "harness.sqlfiles", "harness.shipped"],
    ["harness.scenario"],
    ["harness.results"],
    ["harness.report"],
    ["harness.analysis"],
    ["harness.server"],
    ["harness.queues"],
    ["harness.run"],
    ["harness.check"],
    ["harness.experiments"],
    ["harness.explore"],
    ["harness.site"],
    ["harness.commands"],
    ["harness.cli", "harness.__main__"],
]


def layer_of(module: str) -> int:
    """The layer of the longest prefix of `module` that names one."""
    found = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert found, f"{module} is in no layer: add it to LAYERS and to docs/architecture.md"
    return max(found)[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a harness module, at any depth of the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "harness"]


MODULES = sorted(PACKAGE.rglob("*.py"))


def upward(path: Path, importer: str) -> list[str]:
    mine = layer_of(importer)
    return [
        f"{path.name}:{line} imports {name} (layer {layer_of(name)} > {mine})"
        for line, name in imports(path)
        if layer_of(name) > mine
    ]


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_every_import_goes_down_the_flow(path: Path) -> None:
    assert upward(path, module_name(path)) == []


def test_the_rule_catches_an_import_up_the_flow_even_a_lazy_one(tmp_path: Path) -> None:
    """Presentation importing a feature, inside a function: refused."""
    module = tmp_path / "html.py"
    module.write_text(
        "from harness.report.sections import Section\n\n"
        "def rows():\n    from harness.check.verdict import Finding\n    return Finding\n"
    )
    assert upward(module, "harness.report.html") == [
        "html.py:4 imports harness.check.verdict (layer 8 > 3)"
    ]


def test_every_subpackage_has_a_layer() -> None:
    for path in MODULES:
        layer_of(module_name(path))
