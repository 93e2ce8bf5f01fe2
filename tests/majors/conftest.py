"""The tests of every PostgreSQL major (`make test-majors`, `make test-matrix`, `pytest -m
majors`): each runs on a real embedded server of each major installed, and skips a major
that is not, with the line that says how to get it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import ProviderUnavailable
from harness.server.builds import MAJORS
from harness.server.kinds import ProviderChoice, Server, ServerOptions
from harness.server.providers import choose_provider, open_server

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/majors is marked `majors`: make test leaves them out."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.majors)


def major_choice(major: int) -> ProviderChoice:
    """The embedded server of `major`; the test skips, saying how to get it, without it."""
    try:
        return choose_provider(ServerOptions(pg_version=str(major)), {})
    except ProviderUnavailable as missing:
        pytest.skip(f"PostgreSQL {major} is not installed: {missing}")


@pytest.fixture(scope="module", params=MAJORS, ids=lambda major: f"pg{major}")
def major_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A fresh embedded server of each major in turn, for the module's tests."""
    with open_server(major_choice(request.param)) as running:
        yield running
