"""A horizon's bad lengths, each refused by `harness run` in one line naming the file,
the field and what is allowed, exit 2, before a server starts; --duration's stretch."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.scenario.loader import LoadedScenario, load_any, load_scenario
from tests.conftest import builtin_traits, harness_cli
from tests.unit.test_one_line_errors import refused

SHORT = Path(__file__).resolve().parents[2] / "scenarios" / "horizon-short.yaml"


def _with(tmp_path: Path, **horizon: object) -> Path:
    data = yaml.safe_load(SHORT.read_text())
    data["horizon"] = {**data["horizon"], **horizon}
    path = tmp_path / "horizon.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(tmp_path: Path, path: Path, *more: str) -> str:
    done = harness_cli("run", str(path), *more, "--results-dir", str(tmp_path / "results"))
    line = refused(done)
    assert not (tmp_path / "results").exists()
    return line


@pytest.mark.parametrize(
    ("change", "field", "allowed"),
    [
        ({"duration_s": 30000}, "horizon.duration_s", "allowed: up to max_duration_s"),
        ({"sample_s": 0.5}, "horizon.sample_s", "greater than or equal to 1"),
        ({"sample_s": 61}, "horizon.sample_s", "allowed: 1 s to duration_s"),
        ({"held": {"from_s": 4, "for_s": 10}}, "horizon.held.from_s", "must not overlap"),
        ({"held": {"from_s": 36, "for_s": 30}}, "horizon.held.for_s", "ending by duration_s"),
    ],
    ids=[
        "duration over its limit",
        "interval under 1 s",
        "interval over the duration",
        "phases overlap",
        "phase past the duration",
    ],
)
def test_a_bad_horizon_is_refused_in_one_line(
    tmp_path: Path, change: dict[str, object], field: str, allowed: str
) -> None:
    path = _with(tmp_path, **change)
    line = _run(tmp_path, path)
    assert line.startswith(f"{path}:") and f": {field}: " in line and allowed in line, line


def test_a_duration_over_the_scenarios_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    line = _run(tmp_path, SHORT, "--duration", "30000")
    assert line == (
        f"{SHORT}:16: horizon.duration_s: --duration 30000 s is outside the scenario's "
        "limits; allowed: over 0 up to max_duration_s (21600 s)"
    )


def test_duration_needs_a_horizon(tmp_path: Path) -> None:
    other = SHORT.parent / "saas-mix.yaml"
    line = _run(tmp_path, other, "--duration", "600")
    assert line == f"{other}:1: horizon: --duration needs a scenario with a horizon"


def test_duration_scales_the_phases_and_lengthens_the_streams() -> None:
    """The 60 s profile for an hour: phases x60, streams and timeout 3,540 s longer."""
    loaded = load_scenario(SHORT, builtin_traits())
    long = load_any(SHORT, builtin_traits(), 3600)
    assert isinstance(long, LoadedScenario)
    horizon = long.scenario.horizon
    assert horizon is not None
    assert horizon.duration_s == 3600
    assert [(name, round(a), round(b)) for name, a, b in horizon.phases] == [
        ("warmup", 0, 360),
        ("steady", 360, 2160),
        ("held", 2160, 2760),
        ("recovery", 2760, 3600),
    ]
    assert [group.window_s for group in long.scenario.tenant_groups] == [3600, 3600]
    assert long.scenario.timeout_s == loaded.scenario.timeout_s + 3540
    assert long.text.startswith("# harness run --duration 3600: the scenario as it ran\n")
