"""pgmq's install script moved into the run's schema: what needs no server. (A library
not installed is refused through its manifest's requires: tests/unit/test_requirements.py.)"""

from __future__ import annotations

import re

import pytest

from tests.adapter_modules import adapter_module

pgmq = adapter_module("pgmq")


def test_pgmqs_script_is_moved_into_the_run_schema_whole() -> None:
    """No qualifier, schema clause or schema value of `pgmq` is left: every object the
    script creates lands in the run's schema; what is no schema keeps the name."""
    from pgmq import get_embedded_install_sql

    script = get_embedded_install_sql()
    moved = pgmq.relocated(script, "run_x")
    assert re.search(r"\bpgmq\.", moved) is None
    assert "CREATE SCHEMA IF NOT EXISTS run_x;" in moved
    assert "GRANT USAGE ON SCHEMA run_x TO pg_monitor;" in moved
    assert "table_schema = 'run_x'" in moved
    assert moved.count("run_x.") == script.count("pgmq.")
    assert "extname = 'pgmq'" in moved and "x-pgmq-group" in moved


def test_a_script_naming_its_schema_another_way_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"line 2: 'SET search_path TO pgmq;'"):
        pgmq.relocated("CREATE TABLE pgmq.meta (q text);\nSET search_path TO pgmq;\n", "run_x")


def test_a_mappings_reading_comes_from_its_name_and_options() -> None:
    def config(mapping: str, **options: object) -> dict[str, object]:
        return {"mapping": mapping, "options": options}

    tuned = pgmq.Reading.of(config("round_robin_batched", qty=10, read_with_poll=True))
    assert tuned.block == "pgmq_read_grouped_rr_with_poll" and tuned.qty == 10
    assert tuned.grouped and not tuned.archive_batch
    plain = pgmq.Reading.of(config("read"))
    assert (plain.block, plain.qty, plain.grouped) == ("pgmq_read", 1, False)
