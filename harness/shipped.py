"""The files that ship with the harness: its scenarios and the check's baseline.

In git they live once, at the top of the repository (`scenarios/`, `baselines/`), where
people read and copy them; a wheel carries them as `harness/shipped/` (hatch_build.py).
An installed harness reads its own copy; a checkout (or an editable install) its folders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from harness.errors import HarnessError, unknown_name

Kind = Literal["scenarios", "baselines"]
_PACKAGE = Path(__file__).resolve().parent
CHECK_PROBES = "dequeue-check"


def check_baseline(major: int) -> str:
    """The file name of the check's baseline of a PostgreSQL major: one ships per major."""
    return f"dequeue-pg{major}.json"


def shipped_dir(kind: Kind) -> Path:
    """Where the shipped files of `kind` are: the wheel's copy, else the checkout's."""
    for folder in (_PACKAGE / "shipped" / kind, _PACKAGE.parent / kind):
        if folder.is_dir():
            return folder
    raise HarnessError(f"the harness's own {kind} are missing: reinstall tenant-queue-bench")


def shipped_scenarios() -> dict[str, Path]:
    """Every shipped scenario by name (its file name without .yaml), sorted."""
    return {path.stem: path for path in sorted(shipped_dir("scenarios").glob("*.yaml"))}


def scenario_file(given: Path) -> Path:
    """A scenario argument: the file if it exists, else the shipped scenario of that name."""
    if given.exists() or given.parent != Path():
        return given
    found = shipped_scenarios().get(given.name.removesuffix(".yaml"))
    if found is None:
        said = unknown_name(given.name.removesuffix(".yaml"), shipped_scenarios(), "shipped")
        raise HarnessError(
            f"{given}: no such file, nor a shipped scenario of that name; {said} "
            "(harness scenarios)"
        )
    return found


def default_file(relative: Path, kind: Kind) -> Path:
    """A default input (the check's probes or baseline): the file at its usual place in
    the current folder when there is one (a checkout), else the shipped one."""
    return relative if relative.exists() else shipped_dir(kind) / relative.name
