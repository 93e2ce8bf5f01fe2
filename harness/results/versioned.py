"""One base for the harness's versioned JSON documents: run.json, the baseline of harness
check, calibration.json, overhead.json and isolation.json.

A format is a pydantic model that subclasses `Versioned` and declares what it is called
(`NAME`), its current `VERSION` with its history, and `MIGRATIONS`: for each older version
it still reads, the function that turns such a document into the next version's. The
base owns the rest, alike for every format (as pyperf's _bench.py does for its one):

- `format_version`: written as the format's VERSION; a document in memory is always of
  the current version, an older one having been migrated when it was read;
- writing: atomic and write-once, refused if the file exists unless the writer says it
  replaces it (pyperf's _dump_open), as run folders' files are (harness/results/folder.py);
- reading: at most MAX_BYTES (refused by its size before a byte is read: a file of
  150 MB took 2 GB and 92 s to parse), UTF-8 JSON, an object, a version this harness
  reads, migrated step by step, validated; whatever stops it, one line naming the file
  (UnreadableDocument, exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.errors import HarnessError
from harness.results.folder import write_once

Migration = Callable[[dict[str, Any]], dict[str, Any]]
Migrations = Mapping[int, Migration]  # a version -> its document made the next version's
_CURRENT = 0  # format_version left out when made in memory: the current version
# The largest document read: the largest real ones are far smaller (a run.json of 8
# repetitions is 21 kB, of 20,000, 100 strategies by 100 repetitions on 2 majors, about
# 6 MB; results.json about a tenth of it).
MAX_BYTES = 32 * 1024 * 1024


class UnreadableDocument(HarnessError):
    """A document this harness cannot read, in one line naming its file."""


class Versioned(BaseModel):
    model_config = ConfigDict(extra="forbid")

    NAME: ClassVar[str]  # what it is called in messages: "run.json", "baseline", ...
    VERSION: ClassVar[int]
    MIGRATIONS: ClassVar[Migrations] = {}

    format_version: int = Field(default=_CURRENT, validate_default=True)

    @field_validator("format_version")
    @classmethod
    def _of_this_version(cls, version: int) -> int:
        if version not in (_CURRENT, cls.VERSION):
            raise ValueError(f"a {cls.NAME} of version {version} is read, then migrated")
        return cls.VERSION

    @classmethod
    def reads(cls) -> tuple[int, ...]:
        """The versions this harness reads: the oldest with a migration, up to the current."""
        return tuple(range(min(cls.MIGRATIONS, default=cls.VERSION), cls.VERSION + 1))

    def document(self) -> dict[str, Any]:
        """The JSON object written (a format may leave out what it does not record)."""
        return self.model_dump(mode="json", by_alias=True)

    def dumps(self) -> str:
        return json.dumps(self.document(), indent=2) + "\n"

    def write(self, path: Path, *, replace: bool = False) -> Path:
        """Written atomically; refused if `path` exists, unless `replace`."""
        return write_once(path, self.dumps().encode("utf-8"), replace=replace)

    @classmethod
    def read(cls, path: Path) -> Self:
        """The document at `path`, migrated to the current version."""
        try:
            data = json.loads(read_capped(path, f"a {cls.NAME}").decode("utf-8"))
        except UnicodeDecodeError as error:
            raise UnreadableDocument(
                f"{path}: not UTF-8 (byte {error.start}); not a {cls.NAME}"
            ) from None
        except json.JSONDecodeError as error:
            raise UnreadableDocument(
                f"{path}: not JSON ({error.msg}, line {error.lineno}); not a {cls.NAME}"
            ) from None
        except OSError as error:
            raise UnreadableDocument(f"{path}: cannot read ({error.strerror})") from None
        return cls.from_data(data, str(path))

    @classmethod
    def from_data(cls, data: Any, source: str) -> Self:
        """A parsed document, migrated and validated; `source` names it in refusals."""
        version = data.get("format_version") if isinstance(data, dict) else None
        if not isinstance(data, dict) or "format_version" not in data:
            raise UnreadableDocument(
                f"{source}: not a {cls.NAME}: a JSON object with its format_version"
            )
        if type(version) is not int or version not in cls.reads():
            raise UnreadableDocument(
                f"{source}: {cls.NAME} format_version {version!r}; this harness reads "
                f"{', '.join(map(str, cls.reads()))}"
            )
        for older in range(version, cls.VERSION):
            data = {**cls.MIGRATIONS[older](data), "format_version": older + 1}
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top)"
            raise UnreadableDocument(
                f"{source}: {where}: {first['msg']}; not a {cls.NAME} this harness reads"
            ) from None


def read_capped(path: Path, what: str, limit: int = MAX_BYTES) -> bytes:
    """The file's bytes, refused in one line (UnreadableDocument) if it holds more than
    `limit`: by its size before it is read, and again as it is read (it may grow)."""
    size = path.stat().st_size
    if size <= limit:
        with path.open("rb") as file:
            data = file.read(limit + 1)
        size = max(size, len(data))
    if size > limit:
        raise UnreadableDocument(
            f"{path}: {size:,} bytes; {what} is at most {limit:,} bytes "
            f"({limit // 2**20} MiB), so this one is not read"
        )
    return data
