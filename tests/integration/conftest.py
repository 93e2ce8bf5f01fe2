from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from harness.providers import Server, choose_provider, open_server
from harness.runner import reset_schema
from harness.strategies import Strategy, load_strategies

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One real embedded PostgreSQL 17 for the integration tests."""
    with open_server(choose_provider("embedded", None, {}, False)) as running:
        yield running


@pytest.fixture(scope="session")
def strategies() -> dict[str, Strategy]:
    return load_strategies()


@pytest.fixture
def queue(server: Server, strategies: dict[str, Strategy]) -> Iterator[psycopg.Connection]:
    """A connection to a fresh copy of the article's schema, in a schema of its own."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("create schema if not exists queue_test")
        reset_schema(conn, "queue_test", strategies["round_robin"])
        yield conn
        conn.execute("drop schema queue_test cascade")
