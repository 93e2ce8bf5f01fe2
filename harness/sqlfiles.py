"""Named SQL blocks in .sql files: the text that is run is the text that is shown.

A file holds blocks introduced by a `-- name: <block>` line. Comment lines right after
the header are the block's documentation; everything up to the next header is its
statement, run exactly as written (psycopg `%(name)s` placeholders).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from harness.errors import HarnessError

_HEADER = re.compile(r"^--\s*name:\s*(?P<name>[a-z_][a-z0-9_]*)\s*$")


@dataclass(frozen=True)
class SqlBlock:
    name: str
    doc: str
    sql: str
    source: str

    def shown(self) -> str:
        """The block as `harness sql` prints it: header, doc, statement."""
        doc = "".join(f"-- {line}\n".replace("-- \n", "--\n") for line in self.doc.splitlines())
        return f"-- name: {self.name}   ({self.source})\n{doc}{self.sql}\n"


def parse_blocks(text: str, source: str) -> dict[str, SqlBlock]:
    """Split a .sql file's text into its named blocks, in file order."""
    blocks: dict[str, SqlBlock] = {}
    name: str | None = None
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is None:
            if name is not None:
                lines.append(line)
            continue
        if name is not None:
            blocks[name] = _make_block(name, lines, source)
        name, lines = header["name"], []
        if name in blocks:
            raise HarnessError(f"{source}:{number}: block '{name}' is defined twice")
    if name is not None:
        blocks[name] = _make_block(name, lines, source)
    return blocks


def _make_block(name: str, lines: list[str], source: str) -> SqlBlock:
    doc_lines: list[str] = []
    while lines and lines[0].startswith("--"):
        doc_lines.append(lines.pop(0)[2:].strip())
    sql = "\n".join(lines).strip()
    if not sql:
        raise HarnessError(f"{source}: block '{name}' has no statement")
    return SqlBlock(name=name, doc="\n".join(doc_lines), sql=sql, source=source)


@cache
def builtin_blocks(package: str, name: str) -> dict[str, SqlBlock]:
    """The blocks of a .sql file shipped beside a harness module: the one way built-in SQL
    is read. `package` is the module's package (`harness.run`), `name` the file's path in
    it (`long_transaction.sql`, `strategies/fifo.sql`)."""
    return parse_blocks(builtin_text(package, name), builtin_source(package, name))


def builtin_text(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def builtin_source(package: str, name: str) -> str:
    """How a built-in file is named to people: its path in the source tree."""
    return f"{package.replace('.', '/')}/{name}"


def builtin_names(package: str, folder: str) -> list[str]:
    """The .sql files of a folder of a harness package, as paths relative to it."""
    entries = resources.files(package).joinpath(folder).iterdir()
    return sorted(f"{folder}/{e.name}" for e in entries if e.name.endswith(".sql"))
