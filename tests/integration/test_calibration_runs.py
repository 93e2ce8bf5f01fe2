"""A real run predicted from its own calibration and from another repetition's: how close
the predictions come is a figure of a quiet machine, judged in make throughput (and make
test-matrix); make test holds what load cannot change.

The bound comes from the run itself. A calibration describes the machine while it ran;
this machine is shared, and one repetition's costs can differ from the next one's by
far more than the 5 % target (10-30 % measured here between back-to-back repetitions
under a load average of 5-10). So a prediction of repetition 2 from repetition 1 is held
to 5 % plus how far the two repetitions' own makespans were apart; a prediction of the
repetition the costs came from, to 3 %; and the costs must explain most of the gap the
zero-cost ideal leaves.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from harness.analysis.calibration import TARGET, against_prediction
from harness.commands.simulate import simulate_command
from harness.server.kinds import Server
from tests.integration.conftest import run_yaml

# 5 ms jobs: the claim and completion are a large share of each cycle (the worst
# case for the old costed ideal), and a drain of about a second on two workers.
FIVE_MS = """\
name: five-ms
workers: 2
strategies: [fifo]
repetitions: 2
poll_interval_ms: 5
timeout_s: 60
tenant_groups:
  - {name: large, tenants: 1, jobs_per_tenant: 250, duration_ms: 5}
  - {name: small, tenants: 5, jobs_per_tenant: 4, duration_ms: 5, enqueue_at_s: 0.1}
"""


@pytest.fixture(scope="module")
def five_ms_run(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_yaml(server, tmp_path_factory.mktemp("calibration"), FIVE_MS).folder.path


def makespan(summary: pd.DataFrame, repetition: int | None = None) -> float:
    rows = summary[summary["tenant_class"] == "all"]
    if repetition is not None:
        rows = rows[rows["repetition"] == repetition]
    return float(rows["makespan_s"].median())


def predicted(run: Path, fit: list[int] | None) -> pd.DataFrame:
    quiet = Console(file=io.StringIO())
    return simulate_command(run / "scenario.yaml", None, None, None, quiet, run, None, fit)


def test_the_costed_ideal_is_nearer_the_run_than_the_zero_cost_one(five_ms_run: Path) -> None:
    """What make test holds on any machine: each 5 ms job costs a claim and a completion
    of about 1 ms or more, which load only lengthens, so the zero-cost ideal is far off
    and the ideal at the run's own costs nearer. How near it comes (3 %) is a figure of
    a quiet machine: the tests below, in make throughput. Under load the stalls hit every
    worker at once (a slow fsync holds every commit), which costs drawn one by one do not
    reproduce: 3.01 % at load 4 with the suite beside it."""
    ideal = pd.read_csv(five_ms_run / "ideal.csv")
    row = ideal[(ideal["tenant_class"] == "all") & (ideal["figure"] == "makespan_s")].iloc[0]
    print(row[["measured", "ideal", "ratio", "ratio_costed"]].to_dict())
    assert row["ratio"] > 1.15, row.to_dict()
    assert abs(row["ratio_costed"] - 1) < row["ratio"] - 1, row.to_dict()


@pytest.mark.throughput
def test_a_repetition_is_predicted_from_the_other_within_their_own_spread(
    five_ms_run: Path,
) -> None:
    """The spread is taken from the repetition the costs came from: a prediction of the
    other within 3 % of `own` is off from `other` by other / own, whichever is larger
    (repetition 1 at 3.53 s, 2 at 2.88 s, at load 8: 23 % from 2's side, 19 % from 1's)."""
    measured = pd.read_csv(five_ms_run / "summary.csv")
    first, second = makespan(measured, 1), makespan(measured, 2)
    for fitted, other, own in ((1, second, first), (2, first, second)):
        guess = makespan(predicted(five_ms_run, [fitted]))
        spread = abs(other / own - 1)
        assert abs(other / guess - 1) <= TARGET + spread, (fitted, other, guess, spread)
        assert abs(own / guess - 1) <= 0.03, (fitted, own, guess)


@pytest.mark.throughput
def test_the_calibration_file_explains_the_gap_the_ideal_leaves(five_ms_run: Path) -> None:
    ideal = pd.read_csv(five_ms_run / "ideal.csv")
    row = ideal[(ideal["tenant_class"] == "all") & (ideal["figure"] == "makespan_s")].iloc[0]
    # Each 5 ms job costs a claim and a completion of about 1 ms or more: the zero-cost
    # ideal is far off, the calibrated one (the run's own costs) is not.
    assert row["ratio"] > 1.15, row.to_dict()
    assert abs(row["ratio_costed"] - 1) <= 0.03, row.to_dict()
    whole = against_prediction(
        pd.read_csv(five_ms_run / "summary.csv"), predicted(five_ms_run, None)
    )
    span = whole[(whole["tenant_class"] == "all") & (whole["figure"] == "makespan_s")]
    assert abs(float(span["ratio"].iloc[0]) - 1) <= 0.03
