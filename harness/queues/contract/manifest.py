"""An adapter's manifest: a small TOML file that declares a queue in any language.

An adapters folder holds one folder per adapter (or per runtime several adapters share,
like the Node runner's pg-boss and graphile-worker); each `*.toml` in such a folder is
one adapter's manifest (docs/adapters.md). The shipped ones are in
harness/queues/adapters/; `--adapters-dir DIR` adds more, and replaces a shipped one of
the same name.

A manifest is untrusted input: every field is validated where it is read, its command
is run without a shell, its program either a name looked up on PATH or a path inside
its own folder, and nothing in it is SQL the harness runs.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from harness.errors import HarnessError

PROTOCOL: Final = 1  # the contract's version this harness speaks (docs/adapters.md)
SHIPPED = Path(__file__).resolve().parent.parent / "adapters"
MAX_MANIFEST_BYTES = 64 * 1024
MAX_FOLDER_FILES = 200  # hashed for its digest; node_modules and dotfiles are left out
_SKIPPED = ("node_modules", "__pycache__")
_BARE_PROGRAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")


def _program(argv: list[str]) -> list[str]:
    """A command's program: a bare name (found on PATH) or a relative path inside the
    adapter's folder; never absolute, never out of it."""
    first = argv[0]
    if _BARE_PROGRAM.fullmatch(first):
        return argv
    path = PurePosixPath(first)
    if path.is_absolute() or ".." in path.parts or "\\" in first or not path.parts:
        raise ValueError(
            f"'{first[:60]}': a program is a name found on PATH or a path inside the "
            "adapter's folder (relative, without ..)"
        )
    return argv


def _no_nul(argv: list[str]) -> list[str]:
    if any("\x00" in arg for arg in argv):
        raise ValueError("an argument holds a NUL character")
    return argv


Command = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=300)]],
    Field(min_length=1, max_length=32),
    AfterValidator(_no_nul),
    AfterValidator(_program),
]
AdapterName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
MappingName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
StrategyName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
OptionValue = str | int | float | bool
Text = Annotated[str, Field(min_length=1, max_length=400)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Requirement(_Strict):
    """A runtime the adapter needs: a command that exits 0 where it is installed, and
    what to install where it is not (said in one line)."""

    command: Command
    install: Text


class Prepare(_Strict):
    """Run once per content of the folder, in a copy of it in the harness's cache
    (`npm ci`): the adapter then runs from that copy."""

    command: Command


class MappingDecl(_Strict):
    """One mapping of tenants onto the library's knobs: a strategy a scenario names."""

    strategy: StrategyName
    mapping: MappingName
    promises: Text
    options: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")], OptionValue] = Field(
        default_factory=dict, max_length=20
    )


class Manifest(_Strict):
    protocol: Literal[1]
    name: AdapterName
    library: Annotated[str, Field(min_length=1, max_length=60)]
    language: Annotated[str, Field(min_length=1, max_length=60)]
    command: Command
    mappings: Annotated[list[MappingDecl], Field(min_length=1, max_length=20)]
    fetch_marker: Annotated[str, Field(min_length=3, max_length=200)] | None = None
    requires: Annotated[list[Requirement], Field(max_length=10)] = Field(default_factory=list)
    prepare: Prepare | None = None
    description: Text | None = None

    @model_validator(mode="after")
    def _strategies_named_after_the_adapter(self) -> Manifest:
        for declared in self.mappings:
            if declared.strategy != self.name and not declared.strategy.startswith(f"{self.name}_"):
                raise ValueError(
                    f"strategy '{declared.strategy}' must be the adapter's name or start "
                    f"with '{self.name}_'"
                )
        for field, values in (
            ("strategy", [m.strategy for m in self.mappings]),
            ("mapping", [m.mapping for m in self.mappings]),
        ):
            if len(set(values)) != len(values):
                raise ValueError(f"mappings: a {field} is declared twice")
        return self


@dataclass(frozen=True)
class Adapter:
    """A declared adapter: its manifest, the folder it came from, and that folder's
    digest (its files' SHA-256: what a fleet member's install must match)."""

    manifest: Manifest
    folder: Path
    digest: str

    @property
    def name(self) -> str:
        return self.manifest.name

    def declared(self, mapping: str) -> MappingDecl:
        found = next((m for m in self.manifest.mappings if m.mapping == mapping), None)
        if found is None:
            names = [m.mapping for m in self.manifest.mappings]
            raise ValueError(f"adapter {self.name} has no mapping '{mapping[:40]}'; it has {names}")
        return found


def load_adapters(extra: Path | None = None) -> dict[str, Adapter]:
    """The shipped adapters, and those of `extra` (--adapters-dir) over them by name."""
    found = _adapters_in(SHIPPED)
    if extra is not None:
        if not extra.is_dir():
            raise HarnessError(f"--adapters-dir {extra}: not a folder")
        found |= _adapters_in(extra)
    return found


def _adapters_in(root: Path) -> dict[str, Adapter]:
    found: dict[str, Adapter] = {}
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        if folder.name.startswith((".", "_")):
            continue
        digest = folder_digest(folder)
        for path in sorted(folder.glob("*.toml")):
            adapter = Adapter(read_manifest(path), folder, digest)
            if adapter.name in found:
                raise HarnessError(f"{path}: name: adapter '{adapter.name}' is declared twice")
            found[adapter.name] = adapter
    return found


def read_manifest(path: Path) -> Manifest:
    """A manifest validated, or one line naming the file, the field and what is allowed."""
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise HarnessError(f"{path}: a manifest is at most {MAX_MANIFEST_BYTES} bytes")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise HarnessError(f"{path}: not TOML: {error}") from None
    protocol = data.get("protocol")
    if isinstance(protocol, int) and protocol != PROTOCOL:
        raise HarnessError(
            f"{path}: protocol: the adapter speaks protocol {protocol}; this harness "
            f"speaks {PROTOCOL} (docs/adapters.md)"
        )
    try:
        return Manifest.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "manifest"
        message = (
            "not a field of a manifest" if first["type"] == "extra_forbidden" else first["msg"]
        )
        raise HarnessError(f"{path}: {where}: {message}") from None


def folder_digest(folder: Path) -> str:
    """The SHA-256 of the folder's files, by relative path: the adapter as it runs."""
    digest = hashlib.sha256()
    files = sorted(_files(folder))
    if len(files) > MAX_FOLDER_FILES:
        raise HarnessError(f"{folder}: an adapter's folder holds at most {MAX_FOLDER_FILES} files")
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\x00")
        digest.update(path.read_bytes() + b"\x00")
    return digest.hexdigest()


def _files(folder: Path) -> list[Path]:
    found = []
    for path in folder.rglob("*"):
        parts = path.relative_to(folder).parts
        if any(part.startswith(".") or part in _SKIPPED for part in parts):
            continue
        if path.is_file():
            found.append(path)
    return found
