"""The committed baseline of `harness check`: its format version, writing and reading.

Format history (BASELINE_FORMAT_VERSION):
  1  first version.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.check.verdict import CheckSettings, Probe
from harness.errors import HarnessError
from harness.scenario.loader import LoadedScenario

BASELINE_FORMAT_VERSION = 1


def baseline_document(
    probes: list[Probe],
    settings: CheckSettings,
    probes_path: str,
    probes_sha256: str,
    metadata: dict[str, Any],
) -> dict[str, Any]:
    return {
        "format_version": BASELINE_FORMAT_VERSION,
        "probes_file": probes_path,
        "probes_sha256": probes_sha256,
        "settings": asdict(settings),
        "metadata": metadata,
        "probes": [asdict(probe) for probe in probes],
    }


def probes_from(document: dict[str, Any]) -> list[Probe]:
    return [Probe(**probe) for probe in document["probes"]]


def read_baseline(path: Path, probes: LoadedScenario) -> list[Probe]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise HarnessError(
            f"{path}: cannot read the baseline ({error}); make one with "
            "harness check --update-baseline"
        ) from error
    version = document.get("format_version") if isinstance(document, dict) else None
    if version != BASELINE_FORMAT_VERSION:
        raise HarnessError(
            f"{path}: baseline format_version {version}; this harness reads "
            f"{BASELINE_FORMAT_VERSION}"
        )
    if document.get("probes_sha256") != probes.sha256:
        raise HarnessError(
            f"{path}: made with other probes than {probes.path}; make a new "
            "one with harness check --update-baseline"
        )
    try:
        return probes_from(document)
    except (KeyError, TypeError) as error:
        raise HarnessError(f"{path}: a probe entry is malformed ({error})") from error
