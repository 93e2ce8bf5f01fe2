"""results.json: the headline figures of a run folder, for tools other than the harness.

Every folder that `harness run`, `harness explain`, `harness check` and `harness overhead`
write holds one: a flat list of figures, each a name, a unit, a value, the range it
spanned, and which way is better, with the run's id, commit and host beside them. A
benchmark-charting action, a dashboard or a notebook reads it without knowing the
harness's other files (docs/results-format.md says how, a jq line included).

Format history (RESULTS_FORMAT_VERSION):
  1  first version.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.results.versioned import UnreadableDocument, Versioned

RESULTS_FORMAT_VERSION = 1
Kind = Literal["run", "explain", "check", "overhead"]


# The precision each unit is measured to: the database's clock gives microseconds (s to
# 6 places, ms to 3), buffers and rows are counts; rates and ratios to 4 significant digits.
_DECIMALS = {"s": 6, "ms": 3, "buffers": 0, "rows": 0}


def rounded(value: float, unit: str) -> float:
    """A figure's number to its unit's precision (results.json keeps no float noise)."""
    if not math.isfinite(value):
        return value
    if unit in _DECIMALS:
        return round(value, _DECIMALS[unit]) + 0.0  # + 0.0: never -0.0
    return float(f"{value:.4g}") + 0.0


class Figure(BaseModel):
    """One headline figure: `value` is the median over `samples` (repetitions, rounds or
    timed claims), `range` the lowest and highest of them; each to its unit's precision."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _to_its_precision(self) -> Figure:
        self.value = rounded(self.value, self.unit)
        self.range = (rounded(self.range[0], self.unit), rounded(self.range[1], self.unit))
        return self

    name: str  # unique within its document: the scenario, then what and where
    unit: str  # s, ms, x (a ratio), buffers, rows, jobs/s
    value: float
    range: tuple[float, float]
    lower_is_better: bool | None  # None: a comparison of two strategies, no better side
    samples: int = Field(ge=1)
    reference: tuple[float, float] | None = None  # the source's figure (scenario reference)
    within: bool | None = None  # the whole range within the reference's, widened by tolerance


class Results(Versioned):
    NAME = "results.json"
    VERSION = RESULTS_FORMAT_VERSION

    run_id: str
    kind: Kind
    name: str  # the scenario's name; `check` and `overhead` for those commands
    status: str  # the run's status (complete, failed, ...); check: its verdict
    started_at: str | None
    commit: str | None  # the harness's git commit, where it ran from a checkout
    dirty: bool | None  # uncommitted changes under harness/ in that checkout
    host: str | None
    figures: list[Figure]


def results_document(
    *,
    run_id: str,
    kind: Kind,
    name: str,
    status: str,
    started_at: str | None,
    metadata: dict[str, Any],
    figures: list[Figure],
) -> Results:
    """The document, with the commit and host taken from a run's provenance (run.json's
    `metadata`, harness/server/provenance.py)."""
    harness, host = metadata.get("harness", {}), metadata.get("host", {})
    return Results(
        run_id=run_id,
        kind=kind,
        name=name,
        status=status,
        started_at=started_at,
        commit=harness.get("git_commit"),
        dirty=harness.get("git_dirty"),
        host=host.get("hostname"),
        figures=figures,
    )


def find_results(root: Path) -> list[tuple[Path, Results]]:
    """Every results.json under `root` (one level of run folders deep or more), each read
    and checked; a file this harness cannot read is refused in one line naming it."""
    found = []
    for path in sorted(root.rglob(Results.NAME)):
        if not path.is_file() or path.parent.is_symlink():
            continue
        found.append((path.parent, Results.read(path)))
    return found


def dumps_figures(document: Results) -> str:
    """The figures alone, as a JSON list (what charting tools take as their input)."""
    return json.dumps([figure.model_dump(mode="json") for figure in document.figures])


__all__ = ["Figure", "Results", "UnreadableDocument", "find_results", "results_document"]
