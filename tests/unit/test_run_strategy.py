"""`harness run --strategy NAME`: only those strategies of a scenario run, its run
folder's scenario.yaml is the scenario as it ran, and what they leave out is said; a name
it does not have, or a threshold on a strategy left out, is one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.errors import HarnessError
from harness.scenario.loader import LoadedScenario, load_any
from tests.conftest import ROOT, builtin_traits, harness_cli
from tests.unit.test_one_line_errors import refused

NOISY = ROOT / "scenarios" / "noisy-neighbour.yaml"


def _narrowed(path: Path, *only: str, duration_s: float | None = None) -> LoadedScenario:
    loaded = load_any(path, builtin_traits(), duration_s, only)
    assert isinstance(loaded, LoadedScenario)
    return loaded


def test_only_the_strategies_named_run_and_the_folder_keeps_the_scenario_as_it_ran(
    tmp_path: Path,
) -> None:
    whole = _narrowed(NOISY)
    assert whole.scenario.strategies == ["fifo", "round_robin"] and whole.notes == ()
    assert whole.scenario.reference is not None
    figures = whole.scenario.reference.figures
    fifo = _narrowed(NOISY, "fifo")
    assert fifo.scenario.strategies == ["fifo"]
    # a reference figure on round-robin (alone or beside FIFO) is left out, and said
    on_fifo = [f.label for f in figures if {f.strategy, f.versus} <= {"fifo", None}]
    left = [f.label for f in figures if f.label not in on_fifo]
    assert on_fifo and left
    assert fifo.scenario.reference is not None
    assert [figure.label for figure in fifo.scenario.reference.figures] == on_fifo
    assert fifo.notes == tuple(
        f"left out, their strategies not run: reference {label!r}" for label in left
    )
    first, *said = fifo.text.splitlines()[: 1 + len(left)]
    assert first == "# harness run --strategy fifo: the scenario as it ran"
    assert said == [f"# {note}" for note in fifo.notes]
    # what the run folder keeps reads back as the same scenario, with nothing to say
    kept = tmp_path / "scenario.yaml"
    kept.write_text(fifo.text)
    again = _narrowed(kept)
    assert again.scenario == fifo.scenario and again.notes == ()
    # both named, in the scenario's order, whatever the order given: the file unchanged
    both = _narrowed(NOISY, "round_robin", "fifo")
    assert both.scenario == whole.scenario and both.notes == ()


def test_a_scenario_that_picks_library_mappings_keeps_those_named() -> None:
    sybil = ROOT / "scenarios" / "sybil.yaml"
    picked = _narrowed(sybil, "capped", "fifo")
    assert picked.scenario.strategies == ["fifo", "capped"]
    assert picked.scenario.libraries is None
    assert "libraries" not in yaml.safe_load(picked.text)


def test_with_duration_both_options_are_said() -> None:
    short = ROOT / "scenarios" / "horizon-short.yaml"
    (name,) = _narrowed(short).scenario.strategies
    long = _narrowed(short, name, duration_s=120)
    assert long.text.startswith(
        f"# harness run --duration 120 --strategy {name}: the scenario as it ran\n"
    )


@pytest.mark.parametrize(
    ("only", "said"),
    [
        (
            ("round_robn",),
            "--strategy round_robn: {path} has no such strategy; did you mean round_robin?",
        ),
        (("zzz",), "--strategy zzz: {path} has no such strategy; it has: fifo, round_robin"),
    ],
)
def test_a_strategy_the_scenario_does_not_have_is_refused(only: tuple[str, ...], said: str) -> None:
    with pytest.raises(HarnessError) as refusal:
        _narrowed(NOISY, *only)
    assert str(refusal.value) == said.format(path=NOISY)


def test_the_cli_refuses_before_any_server_a_threshold_on_a_strategy_left_out(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    done = harness_cli(
        "run",
        str(NOISY),
        "--strategy",
        "fifo",
        "--threshold",
        "small.wait_p50_s{strategy=round_robin} < 1",
        "--results-dir",
        str(results),
    )
    assert refused(done).endswith("strategy 'round_robin' is not among ['fifo']")
    done = harness_cli("run", str(NOISY), "--strategy", "fif", "--results-dir", str(results))
    assert refused(done).endswith("did you mean fifo?")
    assert not results.exists()
