"""A scenario's YAML parsed within limits: its size, its nesting, and each key once.

PyYAML alone reads any size, recurses once per level of nesting (a deep document is a
RecursionError) and keeps the last of a key written twice. The limits are far above any
real scenario (the largest shipped one is 3.3 kB, nested 6 levels: explain, variants, a
variant, its tenants, a count) and below what PyYAML would choke on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_BYTES = 256 * 1024  # PyYAML (pure Python) takes seconds to parse that much
MAX_DEPTH = 64  # mappings and lists inside one another
_MERGE = "tag:yaml.org,2002:merge"  # `<<: *defaults` is not a key written twice


class ParseRefused(Exception):
    """A parse limit passed, with the 1-based line where it was."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Parsed:
    text: str
    node: Node | None  # the YAML node tree, for the line of any field
    data: Any


def read_limited(path: Path) -> str:
    """The file's text; ParseRefused past MAX_BYTES (it is never read in full)."""
    with path.open("rb") as file:
        raw = file.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        line = raw[:MAX_BYTES].count(b"\n") + 1
        raise ParseRefused(
            line, f"the file is over {MAX_BYTES:,} bytes (256 KiB); a scenario is a few kB"
        )
    return raw.decode("utf-8")


def parse(text: str) -> Parsed:
    """The node tree and the data of one YAML document; yaml.YAMLError if it is not YAML,
    ParseRefused if it nests too deep or writes a key twice."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        _refuse_duplicate_keys(node)
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return Parsed(text, node, data)


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing nesting past MAX_DEPTH before its composer recurses."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self._depth >= MAX_DEPTH:
            line = self.peek_event().start_mark.line + 1
            raise ParseRefused(
                line,
                f"nested deeper than {MAX_DEPTH} levels of mappings and lists; "
                "a scenario needs 6 at most",
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _refuse_duplicate_keys(root: Node | None) -> None:
    """The first key (by line) written twice in one mapping, with both lines."""
    found = sorted(_duplicates(root), key=lambda duplicate: duplicate[2])
    if found:
        field, first, second = found[0]
        lines = f"on line {first}" if first == second else f"on lines {first} and {second}"
        raise ParseRefused(
            second,
            f"{field}: written twice in one mapping ({lines}); YAML would keep only the "
            "last: give each key once",
        )


def _duplicates(root: Node | None) -> Iterator[tuple[str, int, int]]:
    """(field, first line, second line) of every repeated key. A walk with a stack and a
    set of seen nodes: an alias may point back at its own anchor."""
    stack: list[tuple[Node, str]] = [(root, "")] if root is not None else []
    seen: set[int] = set()
    while stack:
        node, where = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            stack += [(item, f"{where}[{index}]") for index, item in enumerate(node.value)]
        elif isinstance(node, MappingNode):
            yield from _repeated_in(node, where)
            stack += [(value, _field(where, key)) for key, value in node.value]


def _repeated_in(mapping: MappingNode, where: str) -> Iterator[tuple[str, int, int]]:
    firsts: dict[tuple[str, str], ScalarNode] = {}
    for key, _ in mapping.value:
        if not isinstance(key, ScalarNode) or key.tag == _MERGE:
            continue
        first = firsts.setdefault((key.tag, key.value), key)
        if first is not key:
            yield _field(where, key), first.start_mark.line + 1, key.start_mark.line + 1


def _field(where: str, key: Node) -> str:
    name = key.value if isinstance(key, ScalarNode) else "?"
    name = name if name.isprintable() else repr(name)
    return f"{where}.{name}" if where else name
