"""The committed baseline of `harness check`: its format, on the versioned-document base
(harness/results/versioned.py: version, write-once, reading with migration).

Format history (BASELINE_FORMAT_VERSION):
  1  first version.
  2  `pg_version`: the server the baseline was measured on (major.minor); a baseline is
     compared only with a server of its major. Version 1 documents read with the
     version their `metadata` recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from harness.check.verdict import CheckSettings, Probe
from harness.errors import HarnessError
from harness.results.document import PgVersion, pg_version
from harness.results.versioned import Migrations, Versioned
from harness.scenario.loader import LoadedScenario

BASELINE_FORMAT_VERSION = 2


def _recorded_version(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 recorded the server in its metadata (without it: refused, as invalid)."""
    postgres = (data.get("metadata") or {}).get("postgres") or {}
    number = postgres.get("server_version_num") if isinstance(postgres, dict) else None
    return {**data, "pg_version": pg_version(number)} if isinstance(number, int) else data


class Baseline(Versioned):
    NAME = "baseline"
    VERSION = BASELINE_FORMAT_VERSION
    MIGRATIONS: ClassVar[Migrations] = {1: _recorded_version}

    pg_version: PgVersion  # the server it was measured on
    probes_file: str
    probes_sha256: str
    settings: CheckSettings
    metadata: dict[str, Any]
    probes: list[Probe]

    @property
    def major(self) -> int:
        return int(self.pg_version.split(".")[0])


def baseline_document(
    probes: list[Probe],
    settings: CheckSettings,
    probes_path: str,
    probes_sha256: str,
    metadata: dict[str, Any],
) -> Baseline:
    return Baseline(
        pg_version=pg_version(metadata["postgres"]["server_version_num"]),
        probes_file=probes_path,
        probes_sha256=probes_sha256,
        settings=settings,
        metadata=metadata,
        probes=probes,
    )


def read_baseline(path: Path, probes: LoadedScenario) -> Baseline:
    """The baseline, if it was made with these probes; one line otherwise."""
    if not path.is_file():
        raise HarnessError(
            f"{path}: no baseline there; make one with harness check --update-baseline"
        )
    baseline = Baseline.read(path)
    if baseline.probes_sha256 != probes.sha256:
        raise HarnessError(
            f"{path}: made with other probes than {probes.path}; make a new "
            "one with harness check --update-baseline"
        )
    return baseline


def refuse_other_major(path: Path, baseline: Baseline, major: int, shipped: Path | None) -> None:
    """A baseline is compared only with a server of its own major: another major's
    planner gives other buffers and plans, which are no regression. `shipped`: the
    baseline of `major` that the harness has, if any."""
    if baseline.major == major:
        return
    other = f" (the harness has one: {shipped})" if shipped is not None else ""
    raise HarnessError(
        f"{path}: a baseline of PostgreSQL {baseline.pg_version}, and the server is "
        f"PostgreSQL {major}; give --baseline a baseline made on {major}{other}, or make "
        f"one with harness check --update-baseline --pg-version {major}"
    )
