from __future__ import annotations

import random

import pytest

from harness.analysis.stats import mann_whitney_greater, ranks, relative_spread


def test_ranks_share_ties() -> None:
    assert ranks([10, 20, 20, 5]) == [2.0, 3.5, 3.5, 1.0]


def test_a_clear_shift_is_significant_and_none_is_not() -> None:
    rng = random.Random(7)
    baseline = [rng.gauss(1.0, 0.1) for _ in range(30)]
    shifted = [rng.gauss(2.0, 0.1) for _ in range(30)]
    same = [rng.gauss(1.0, 0.1) for _ in range(30)]
    assert mann_whitney_greater(shifted, baseline) < 1e-6
    assert mann_whitney_greater(same, baseline) > 0.01
    assert mann_whitney_greater(baseline, shifted) > 0.99  # one-sided: faster is not worse


def test_a_small_case_by_hand() -> None:
    # candidate [3, 4] vs baseline [1, 2]: U = 4 (every pair greater), n1 = n2 = 2.
    # mean 2, variance 2*2*5/12 = 5/3; z = (4 - 2 - 0.5) / sqrt(5/3) = 1.1619
    assert mann_whitney_greater([3, 4], [1, 2]) == pytest.approx(0.12264, abs=1e-4)


def test_identical_samples_are_not_a_change() -> None:
    assert mann_whitney_greater([1, 1, 1], [1, 1, 1]) == 1.0


def test_relative_spread() -> None:
    assert relative_spread([1.0, 1.0]) == 0.0
    assert relative_spread([9.0, 11.0]) == pytest.approx(0.1414, abs=1e-4)
