"""An adapter's manifest: a small TOML file that declares a queue in any language, and
the one place each queue is declared: its command, its mappings, what each is tuned to
and where its maintainers say so, its fetch among a capture's plans, the schemas its
library insists on, what it needs installed (docs/adapters.md).

An adapters folder holds one folder per adapter (or per runtime several adapters share,
like the Node runner's pg-boss and graphile-worker); each `*.toml` in such a folder is
one adapter's manifest. The shipped ones are in harness/queues/adapters/ (the Python
libraries among them, run by the harness's own interpreter); `--adapters-dir DIR` adds
more, and may replace a shipped one of the same name, which is said and recorded.

A manifest is untrusted input: every field is validated where it is read, its command
is run without a shell, its program either a name looked up on PATH, a path inside its
own folder, or `{python}` (the harness's own interpreter), and nothing in it is SQL the
harness runs.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from harness.errors import HarnessError

PROTOCOL: Final = 2  # the contract's version this harness speaks (docs/adapters.md)
PROTOCOLS: Final = (1, 2)  # the versions it reads: 2 only adds optional fields to 1
HARNESS_PYTHON: Final = "{python}"  # a command's program: the harness's own interpreter
SHIPPED = Path(__file__).resolve().parent.parent / "adapters"
MAX_MANIFEST_BYTES = 64 * 1024
MAX_FOLDER_FILES = 200  # hashed for its digest (dotfiles too: an .npmrc changes what runs)
_SKIPPED = ("node_modules", "__pycache__")
_BARE_PROGRAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")


def _program(argv: list[str]) -> list[str]:
    """A command's program: a bare name (found on PATH), a relative path inside the
    adapter's folder (never absolute, never out of it), or the harness's interpreter."""
    first = argv[0]
    if first == HARNESS_PYTHON or _BARE_PROGRAM.fullmatch(first):
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
SchemaName = Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]{0,62}$")]
ModuleName = Annotated[
    str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62}){0,5}$")
]
MappingName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
StrategyName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
OptionValue = str | int | float | bool
Text = Annotated[str, Field(min_length=1, max_length=400)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Requirement(_Strict):
    """A runtime the adapter needs: a command that exits 0 where it is installed, or
    Python modules the harness's interpreter must find; and what to install where it is
    not (said in one line)."""

    command: Command | None = None
    python_modules: Annotated[list[ModuleName], Field(min_length=1, max_length=10)] | None = None
    install: Text

    @model_validator(mode="after")
    def _one_check(self) -> Requirement:
        if (self.command is None) == (self.python_modules is None):
            raise ValueError("a requirement has either a command or python_modules")
        return self


class Prepare(_Strict):
    """Run once per content of the folder, in a copy of it in the harness's cache
    (`npm ci`): the adapter then runs from that copy."""

    command: Command


OptionName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
# How the harness runs a mapping's workers: one process with all of them (its library's
# own concurrency), a process per core or per worker with the workers dealt among them,
# or as many processes as `jobs_per_process` takes.
Processes = Literal["one", "per_core", "per_worker"]
PROCESSES_SETTING = "processes"  # the name a tuned mapping cites its `processes` by


class Fetch(_Strict):
    """How its library's fetch is told among the plans of a capture (harness explain):
    the plans whose query text holds `marker`, with a LockRows node unless `locks` is
    false (a library whose costly step picks its jobs before another statement locks
    them), and, with `rows`, only those that returned a job (a library that polls every
    queue, those without work too)."""

    marker: Annotated[str, Field(min_length=3, max_length=200)]
    locks: bool = True
    rows: bool = False


class Tuned(_Strict):
    """A mapping at its library's maintainers' settings: each setting (one of the
    mapping's options, or `processes`) and where its maintainers recommend it (a page,
    an issue, a quote). Its values are the options'; this says which they are and why."""

    sources: Annotated[dict[OptionName, Text], Field(min_length=1, max_length=20)]


# What becomes, by its library's defaults as the adapter sets them, of a job whose worker
# died while it held it: taken up again, marked failed (or aborted), or left as it was
# (running, locked) until someone acts.
RecoveryThen = Literal["retried", "failed", "left"]


class Recovery(_Strict):
    """Its library's promise for a job its worker held when it died (SIGKILL, a lost
    host): `then` after `after_s` (from the death, its documented default, as the adapter
    runs it: none where the job is `left`); `says` it in a sentence, `source` says where
    its docs or code do. docs/faults.md's worker kills are read beside it: a recovery
    longer than a run's window is "not recovered within N s", never waited for."""

    then: RecoveryThen
    after_s: Annotated[float, Field(gt=0, le=30 * 86_400)] | None = None
    says: Text
    source: Text

    @model_validator(mode="after")
    def _a_time_unless_left(self) -> Recovery:
        if (self.then == "left") != (self.after_s is None):
            raise ValueError(
                "recovery: after_s is the time until it is retried or failed; a job left has none"
            )
        return self


class MappingDecl(_Strict):
    """One mapping of tenants onto the library's knobs: a strategy a scenario names."""

    strategy: StrategyName
    mapping: MappingName
    promises: Text
    options: dict[OptionName, OptionValue] = Field(default_factory=dict, max_length=20)
    processes: Processes = "one"
    jobs_per_process: Annotated[int, Field(ge=1, le=10_000)] | None = None
    tuned: Tuned | None = None
    fetch: Fetch | None = None  # this mapping's, where it is not the adapter's
    # A recovery mapping's promise (its options set as its docs advise for crash
    # recovery, each cited in `tuned`), where it is not the adapter's `recovery`.
    recovery: Recovery | None = None

    @model_validator(mode="after")
    def _tuned_settings_are_its_own(self) -> MappingDecl:
        if self.jobs_per_process is not None and self.processes != "one":
            raise ValueError("jobs_per_process and processes: give one of them")
        if self.strategy.endswith("_recovery") and (self.recovery is None or self.tuned is None):
            raise ValueError(
                f"strategy '{self.strategy}' is named recovery: give its [recovery] promise "
                "and its settings' [tuned] sources"
            )
        if self.tuned is None:
            if self.strategy.endswith("_tuned"):
                raise ValueError(
                    f"strategy '{self.strategy}' is named tuned: give its [tuned] sources"
                )
            return self
        own = {*self.options, PROCESSES_SETTING, "jobs_per_process"}
        unknown = sorted(set(self.tuned.sources) - own)
        if unknown:
            raise ValueError(
                f"tuned cites {unknown}: each tuned setting is one of the mapping's options "
                "or processes"
            )
        return self

    def tuned_settings(self) -> dict[str, Any]:
        """The tuned settings' values, by name: {} for a mapping at its defaults."""
        if self.tuned is None:
            return {}
        values: dict[str, Any] = {
            **self.options,
            PROCESSES_SETTING: self.processes,
            "jobs_per_process": self.jobs_per_process,
        }
        return {name: values[name] for name in self.tuned.sources}


class Manifest(_Strict):
    protocol: Literal[1, 2]
    name: AdapterName
    library: Annotated[str, Field(min_length=1, max_length=60)]
    language: Annotated[str, Field(min_length=1, max_length=60)]
    command: Command
    mappings: Annotated[list[MappingDecl], Field(min_length=1, max_length=20)]
    fetch_marker: Annotated[str, Field(min_length=3, max_length=200)] | None = None
    fetch: Fetch | None = None
    # Schemas its library creates by a fixed name beside the run's (awa's `awa`): the run
    # refuses one it did not make, makes them afresh and drops them (harness/server/schema.py).
    outside_schemas: Annotated[list[SchemaName], Field(max_length=5)] = Field(default_factory=list)
    requires: Annotated[list[Requirement], Field(max_length=10)] = Field(default_factory=list)
    prepare: Prepare | None = None
    description: Text | None = None
    recovery: Recovery | None = None  # optional: a shipped adapter declares its library's

    @model_validator(mode="after")
    def _fields_of_its_protocol(self) -> Manifest:
        if self.fetch is not None and self.fetch_marker is not None:
            raise ValueError("fetch_marker and fetch: give one of them (fetch.marker)")
        if self.protocol == 1 and (self.fetch or self.outside_schemas or self._v2_mappings()):
            raise ValueError(
                "fetch, outside_schemas and a mapping's processes, jobs_per_process, tuned "
                "and fetch are protocol 2: say protocol = 2"
            )
        return self

    def _v2_mappings(self) -> bool:
        return any(
            m.fetch or m.tuned or m.processes != "one" or m.jobs_per_process for m in self.mappings
        )

    def fetch_of(self, mapping: MappingDecl) -> Fetch | None:
        """How its fetch is told among a capture's plans, for that mapping: None where
        the manifest does not say (its strategies cannot be explained)."""
        if mapping.fetch is not None:
            return mapping.fetch
        if self.fetch is not None:
            return self.fetch
        return Fetch(marker=self.fetch_marker) if self.fetch_marker is not None else None

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
    digest (its files' SHA-256: what a fleet member's install must match); `replaces`,
    the shipped adapter's folder it stands in for (an --adapters-dir one of its name)."""

    manifest: Manifest
    folder: Path
    digest: str
    replaces: Path | None = None

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
    """The shipped adapters, and those of `extra` (--adapters-dir) over them by name (each
    such adapter knows the shipped one it replaces)."""
    found = _adapters_in(SHIPPED)
    if extra is None:
        return found
    if not extra.is_dir():
        raise HarnessError(f"--adapters-dir {extra}: not a folder")
    for name, adapter in _adapters_in(extra).items():
        shipped = found.get(name)
        found[name] = replace(adapter, replaces=shipped.folder if shipped else None)
    return found


def replacements(adapters: dict[str, Adapter]) -> list[str]:
    """One sentence per shipped adapter an --adapters-dir one replaces."""
    return [
        f"adapter {a.name} of {a.folder} replaces the shipped one ({a.replaces})"
        for a in adapters.values()
        if a.replaces is not None
    ]


def _adapters_in(root: Path) -> dict[str, Adapter]:
    found: dict[str, Adapter] = {}
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        if folder.name.startswith((".", "_")):
            continue
        manifests = sorted(folder.glob("*.toml"))
        if not manifests:
            continue
        digest = folder_digest(folder)
        for path in manifests:
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
    if isinstance(protocol, int) and protocol not in PROTOCOLS:
        raise HarnessError(
            f"{path}: protocol: the adapter speaks protocol {protocol}; this harness "
            f"speaks {' and '.join(map(str, PROTOCOLS))} (docs/adapters.md)"
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
        if any(part in _SKIPPED for part in parts):
            continue
        if path.is_file():
            found.append(path)
    return found
