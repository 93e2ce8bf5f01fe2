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


def samples(rng: random.Random, ties: bool) -> tuple[list[float], list[float]]:
    """Two samples of random sizes; with ties, drawn from a few values (waits rounded to
    the clock's tick look like that), else continuous and shifted a little."""
    n1, n2 = rng.randint(1, 80), rng.randint(1, 80)
    if ties:
        return [rng.randint(0, 6) for _ in range(n1)], [rng.randint(0, 5) for _ in range(n2)]
    return [rng.gauss(0.3, 1) for _ in range(n1)], [rng.gauss(0, 1) for _ in range(n2)]


@pytest.mark.parametrize("ties", [False, True])
def test_p_values_are_scipys_one_sided_asymptotic_test_with_continuity(ties: bool) -> None:
    """scipy.stats.mannwhitneyu reproduces it with alternative="greater" (one-sided: x
    tends larger), method="asymptotic" (the normal approximation, with its tie correction
    of the variance) and use_continuity=True (U - mean - 1/2); the exact method, the
    two-sided test and the test without the continuity correction each give other values."""
    mannwhitneyu = pytest.importorskip("scipy.stats").mannwhitneyu
    rng = random.Random(2026 + ties)
    compared = 0
    for _ in range(300):
        candidate, baseline = samples(rng, ties)
        if len(set(candidate + baseline)) == 1:
            continue  # no variance: scipy says nan, the harness "no change" (tested above)
        reference = mannwhitneyu(
            candidate, baseline, alternative="greater", method="asymptotic", use_continuity=True
        ).pvalue
        assert mann_whitney_greater(candidate, baseline) == pytest.approx(
            reference, rel=1e-9, abs=1e-15
        )
        compared += 1
    assert compared > 250


def test_other_scipy_options_give_other_p_values() -> None:
    """The options named above are needed: each other choice moves the p-values."""
    mannwhitneyu = pytest.importorskip("scipy.stats").mannwhitneyu
    candidate, baseline = [3, 4, 4, 5, 7, 8], [1, 2, 4, 4, 6]
    ours = mann_whitney_greater(candidate, baseline)
    for options in (
        {"alternative": "greater", "method": "asymptotic", "use_continuity": False},
        {"alternative": "two-sided", "method": "asymptotic", "use_continuity": True},
        {"alternative": "greater", "method": "exact"},
    ):
        other = mannwhitneyu(candidate, baseline, **options).pvalue
        assert abs(other - ours) > 1e-3, options


class Counted:
    """A value that counts the comparisons made on it: the work of the test, measured
    without a clock."""

    comparisons = 0

    def __init__(self, value: float) -> None:
        self.value = value

    def __lt__(self, other: Counted) -> bool:
        Counted.comparisons += 1
        return self.value < other.value

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return isinstance(other, Counted) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


def comparisons_for(per_side: int) -> int:
    rng = random.Random(per_side)
    candidate = [Counted(rng.random()) for _ in range(per_side)]
    baseline = [Counted(rng.random()) for _ in range(per_side)]
    Counted.comparisons = 0
    mann_whitney_greater(candidate, baseline)  # type: ignore[arg-type]
    return Counted.comparisons


def test_counting_ties_is_not_quadratic() -> None:
    """Four times the values: about 4.4 times the comparisons for a sort (n log n), 16
    times for counting each distinct value over the whole sample (n x distinct values,
    all distinct here)."""
    ratio = comparisons_for(2000) / comparisons_for(500)
    assert ratio < 6, ratio
