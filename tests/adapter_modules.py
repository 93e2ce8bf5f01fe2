"""A Python adapter's program as a module, for the tests that need no server (its
folder on the path for what it imports beside it)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from harness.queues.contract.manifest import SHIPPED


def adapter_module(library: str, module: str | None = None) -> ModuleType:
    """harness/queues/adapters/<library>/<module or library_adapter>.py, imported once."""
    name = module or f"{library}_adapter"
    key = f"tests_adapter_{library}_{name}"
    if key in sys.modules:
        return sys.modules[key]
    folder = SHIPPED / library
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    spec = importlib.util.spec_from_file_location(key, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    found = importlib.util.module_from_spec(spec)
    sys.modules[key] = found
    spec.loader.exec_module(found)
    return found
