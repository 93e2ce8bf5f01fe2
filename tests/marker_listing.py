"""A pytest plugin for tests/unit/test_markers.py: one collection writes each test's id and
its markers to the file named by TQB_MARKERS_OUT, so that every `-m` expression is
evaluated over one collection instead of a pytest run each."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    listing = {
        item.nodeid: sorted({mark.name for mark in item.iter_markers()}) for item in session.items
    }
    Path(os.environ["TQB_MARKERS_OUT"]).write_text(json.dumps(listing), encoding="utf-8")
