from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.sqlfiles import parse_blocks

TEXT = """\
-- file comment, not part of any block

-- name: first
-- what it does
-- and why
select 1;

-- name: second
update t set x = %(x)s
where y = 2;
"""


def test_blocks_are_split_with_their_docs() -> None:
    blocks = parse_blocks(TEXT, "t.sql")
    assert list(blocks) == ["first", "second"]
    assert blocks["first"].doc == "what it does\nand why"
    assert blocks["first"].sql == "select 1;"
    assert blocks["second"].sql == "update t set x = %(x)s\nwhere y = 2;"
    assert blocks["second"].doc == ""


def test_shown_text_contains_the_statement_verbatim() -> None:
    block = parse_blocks(TEXT, "t.sql")["first"]
    shown = block.shown()
    assert shown.startswith("-- name: first")
    assert "-- what it does\n-- and why\nselect 1;" in shown


def test_a_block_defined_twice_is_refused() -> None:
    with pytest.raises(HarnessError, match=r"t.sql:3: block 'a' is defined twice"):
        parse_blocks("-- name: a\nselect 1;\n-- name: a\nselect 2;\n", "t.sql")


def test_an_empty_block_is_refused() -> None:
    with pytest.raises(HarnessError, match="block 'a' has no statement"):
        parse_blocks("-- name: a\n-- only a comment\n-- name: b\nselect 1;\n", "t.sql")
