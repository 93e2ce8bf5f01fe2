"""The committed baseline of `harness check`: its format, on the versioned-document base
(harness/results/versioned.py: version, write-once, reading with migration).

Format history (BASELINE_FORMAT_VERSION):
  1  first version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.check.verdict import CheckSettings, Probe
from harness.errors import HarnessError
from harness.results.versioned import Versioned
from harness.scenario.loader import LoadedScenario

BASELINE_FORMAT_VERSION = 1


class Baseline(Versioned):
    NAME = "baseline"
    VERSION = BASELINE_FORMAT_VERSION

    probes_file: str
    probes_sha256: str
    settings: CheckSettings
    metadata: dict[str, Any]
    probes: list[Probe]


def baseline_document(
    probes: list[Probe],
    settings: CheckSettings,
    probes_path: str,
    probes_sha256: str,
    metadata: dict[str, Any],
) -> Baseline:
    return Baseline(
        probes_file=probes_path,
        probes_sha256=probes_sha256,
        settings=settings,
        metadata=metadata,
        probes=probes,
    )


def read_baseline(path: Path, probes: LoadedScenario) -> list[Probe]:
    """The baseline's probes, if it was made with these probes; one line otherwise."""
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
    return baseline.probes
