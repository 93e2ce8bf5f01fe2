"""The raw series a repetition samples as it goes, appended to the run folder's CSVs row
by row: what an interrupted run keeps, even one killed outright.

The holder of a long transaction or horizon (harness/run/long_transaction.py) hands each
row, as it is taken, to its repetition's `SeriesSink`; `SeriesFiles` appends it to its
file (bloat.csv, fetch-plans.csv, horizon*.csv), keyed like jobs.csv's rows and with the
server's version, and flushes it. A file is created (never overwritten) with its header
at its first row. `SeriesFiles.cut` says which repetition an interrupt cut short, and the
latest moment sampled in it.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness.results.contract import listed
from harness.results.jobs import PG

Sink = Callable[[str, dict[str, Any]], None]  # a raw file's name, one row of it
KEYS = ["strategy", "workers", "repetition"]


@dataclass
class SeriesSink:
    """One repetition's rows: keyed, then appended to their file."""

    files: SeriesFiles
    keys: dict[str, Any]
    pg_version: str
    rows: dict[str, int] = field(default_factory=dict)  # per file, the rows appended
    last_s: float | None = None  # the latest sample's seconds from the clock's start
    finished: bool = False

    def __call__(self, name: str, row: dict[str, Any]) -> None:
        self.files.append(name, self.keys | row | {PG: self.pg_version})
        self.rows[name] = self.rows.get(name, 0) + 1
        moment = row.get("t_s", row.get("at_s"))
        if isinstance(moment, int | float):
            self.last_s = max(self.last_s or 0.0, float(moment))


class SeriesFiles:
    """The run folder's series files, each appended to as rows come; `columns`: each
    file's columns after the repetition's keys (the server's version last)."""

    def __init__(self, folder: Path, columns: dict[str, list[str]]) -> None:
        self.folder, self.columns = folder, columns
        self._open: dict[str, tuple[TextIO, csv.DictWriter[str]]] = {}
        self.current: SeriesSink | None = None

    def repetition(self, keys: dict[str, Any], pg_version: str) -> SeriesSink:
        """The sink of the repetition starting now."""
        self.current = SeriesSink(self, keys, pg_version)
        return self.current

    def append(self, name: str, row: dict[str, Any]) -> None:
        if name not in self._open:
            self._open[name] = self._create(name)
        stream, writer = self._open[name]
        writer.writerow(row)
        stream.flush()

    def _create(self, name: str) -> tuple[TextIO, csv.DictWriter[str]]:
        """The file with its header; "x": a run folder's file is never written over."""
        stream = (self.folder / listed(name, "raw")).open("x", newline="", encoding="utf-8")
        writer = csv.DictWriter(stream, fieldnames=[*KEYS, *self.columns[name], PG])
        writer.writeheader()
        return stream, writer

    @property
    def written(self) -> list[str]:
        """The files appended to so far, in the order they were created."""
        return list(self._open)

    @property
    def cut(self) -> SeriesSink | None:
        """The repetition under way, if one is (what an interrupt cut short)."""
        return self.current if self.current is not None and not self.current.finished else None

    def close(self) -> None:
        for stream, _ in self._open.values():
            stream.close()
