"""pgmq's install script moved into the run's schema and saq's processes: what needs no
server. (A library not installed is refused through its entries' requires: tests/unit/
test_requirements.py.)"""

from __future__ import annotations

import re

import pytest

from harness.errors import HarnessError
from harness.queues.libraries import saq_queue
from harness.queues.libraries.pgmq_queue import relocated


def test_pgmqs_script_is_moved_into_the_run_schema_whole() -> None:
    """No qualifier, schema clause or schema value of `pgmq` is left: every object the
    script creates lands in the run's schema; what is no schema keeps the name."""
    from pgmq import get_embedded_install_sql

    script = get_embedded_install_sql()
    moved = relocated(script, "run_x")
    assert re.search(r"\bpgmq\.", moved) is None
    assert "CREATE SCHEMA IF NOT EXISTS run_x;" in moved
    assert "GRANT USAGE ON SCHEMA run_x TO pg_monitor;" in moved
    assert "table_schema = 'run_x'" in moved
    assert moved.count("run_x.") == script.count("pgmq.")
    assert "extname = 'pgmq'" in moved and "x-pgmq-group" in moved


def test_a_script_naming_its_schema_another_way_is_refused() -> None:
    with pytest.raises(HarnessError, match=r"line 2: 'SET search_path TO pgmq;'"):
        relocated("CREATE TABLE pgmq.meta (q text);\nSET search_path TO pgmq;\n", "run_x")


@pytest.mark.parametrize(
    ("workers", "cores", "shares"),
    [(4, 2, [2, 2]), (3, 2, [2, 1]), (1, 2, [1]), (4, 8, [1, 1, 1, 1]), (4, 1, [4])],
)
def test_saq_tuned_deals_the_workers_among_the_cores(
    monkeypatch: pytest.MonkeyPatch, workers: int, cores: int, shares: list[int]
) -> None:
    monkeypatch.setattr(saq_queue.os, "cpu_count", lambda: cores)
    assert saq_queue.processes(workers) == shares
