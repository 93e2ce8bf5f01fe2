from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.queues.sql.strategies import REQUIRED_BLOCKS, load_strategies, schema_blocks

# The article's FIFO dequeue, verbatim: what the workers run must be this text.
ARTICLE_FIFO = """select id, tenant_id
from jobs
where status = 'queued'
order by id
limit 1
for update skip locked;"""


def test_builtin_strategies_are_complete() -> None:
    strategies = load_strategies()
    assert {"fifo", "round_robin"} <= set(strategies)
    for strategy in strategies.values():
        assert all(strategy.has(block) for block in REQUIRED_BLOCKS)


def test_fifo_dequeue_is_the_articles_query() -> None:
    assert load_strategies()["fifo"].sql("dequeue") == ARTICLE_FIFO


def test_round_robin_orders_by_enqueued_at_and_marks_the_tenant_served() -> None:
    round_robin = load_strategies()["round_robin"]
    assert "order by enqueued_at, id" in round_robin.sql("dequeue")
    assert "for update skip locked" in round_robin.sql("dequeue")
    assert "last_served = clock_timestamp()" in round_robin.sql("served")


def test_schema_has_the_articles_indexes() -> None:
    text = "\n".join(block.sql for block in schema_blocks().values())
    assert "create index jobs_queued_fifo on jobs (id) where status = 'queued'" in text
    assert "on jobs (tenant_id, enqueued_at, id)" in text
    assert "create index on queue_tenants (last_served)" in text


def test_a_strategies_dir_adds_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "fifo.sql").write_text("-- name: dequeue\nselect 1, 2;\n")
    (tmp_path / "mine.sql").write_text("-- name: dequeue\nselect 3, 4;\n")
    strategies = load_strategies(tmp_path)
    assert strategies["fifo"].sql("dequeue") == "select 1, 2;"
    assert strategies["mine"].sql("start") == strategies["round_robin"].sql("start")


def test_unknown_blocks_are_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.sql").write_text("-- name: dequeue\nselect 1;\n-- name: dequeu\nselect 2;\n")
    with pytest.raises(HarnessError, match=r"unknown block\(s\) dequeu"):
        load_strategies(tmp_path)


def test_a_strategy_without_dequeue_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.sql").write_text("-- name: setup\nselect 1;\n")
    with pytest.raises(HarnessError, match="lacks block"):
        load_strategies(tmp_path)


def test_strategies_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="is not a directory"):
        load_strategies(tmp_path / "missing")
