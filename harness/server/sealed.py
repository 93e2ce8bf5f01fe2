"""A folder the harness prepares once and runs programs from many times (an adapter's
folder after `npm ci`, PostgreSQL 14's npm packages), sealed: as it is prepared, the
SHA-256 of every file it holds (dotfiles and node_modules included), each link's target
and which files are executable are written into it (SEAL); before it is used, once per
process, what it holds is digested again and must be exactly that. A folder changed
since (a file edited, added or removed) is refused in one line, never run.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from harness.errors import HarnessError

SEAL = ".sealed.json"
MAX_FILES = 50_000  # a prepared Node folder holds about 4,700
_CHECKED: set[Path] = set()


def seal(folder: Path) -> None:
    """What `folder` holds now, written into it: its seal."""
    (folder / SEAL).write_text(json.dumps(contents(folder), sort_keys=True, indent=0))


def is_sealed(folder: Path) -> bool:
    return (folder / SEAL).is_file()


def check(folder: Path, what: str) -> None:
    """One line unless `folder` holds exactly what its seal lists; `what` names it."""
    if folder in _CHECKED:
        return
    try:
        sealed = json.loads((folder / SEAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        sealed = None
    found = contents(folder)
    if found != sealed:
        why = "it has no seal" if not isinstance(sealed, dict) else _difference(sealed, found)
        raise HarnessError(
            f"{folder}: {what} is not as the harness prepared it ({why}); remove the folder "
            "and the harness prepares it again"
        )
    _CHECKED.add(folder)


def contents(folder: Path) -> dict[str, str]:
    """Each file's path inside `folder`: its SHA-256 (with `+x` if it is executable), or
    for a link (to a file or a folder, which os.walk does not enter), where it points."""
    found: dict[str, str] = {}
    for root, folders, files in os.walk(folder):
        for name in files + [name for name in folders if Path(root, name).is_symlink()]:
            path = Path(root, name)
            relative = path.relative_to(folder).as_posix()
            if relative != SEAL:
                found[relative] = _digest(path)
        if len(found) > MAX_FILES:
            raise HarnessError(f"{folder}: a prepared folder holds at most {MAX_FILES} files")
    return found


def _digest(path: Path) -> str:
    if path.is_symlink():
        return f"link {path.readlink()}"
    with path.open("rb") as file:
        digest = hashlib.file_digest(file, "sha256").hexdigest()
    return digest + ("+x" if path.stat().st_mode & 0o111 else "")


def _difference(sealed: dict[str, str], found: dict[str, str]) -> str:
    """The first path that differs, in words."""
    for path in sorted(sealed.keys() | found.keys()):
        if path not in found:
            return f"{path} is missing"
        if path not in sealed:
            return f"{path} was added"
        if sealed[path] != found[path]:
            return f"{path} changed"
    return "its seal is not one the harness wrote"
