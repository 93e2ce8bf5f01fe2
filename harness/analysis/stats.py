"""Small statistics, pure Python: the Mann-Whitney U test and a noise measure.

The U test (normal approximation with tie and continuity corrections) is what asv uses
to call a change significant; at the sample sizes of `harness check` (20 and more per
side) the approximation is close to the exact test.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of their positions."""
    return _ranked(values)[0]


def _ranked(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """The ranks and the size of every group of equal values, from one sort: ties are
    neighbours once sorted, so counting them costs no more than ranking (n log n)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    groups = []
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            result[order[position]] = (start + end) / 2 + 1
        groups.append(end - start + 1)
        start = end + 1
    return result, groups


def mann_whitney_greater(candidate: Sequence[float], baseline: Sequence[float]) -> float:
    """One-sided p-value that candidate values tend to be larger than the baseline's."""
    n1, n2 = len(candidate), len(baseline)
    if n1 == 0 or n2 == 0:
        return 1.0
    rank, tie_groups = _ranked([*candidate, *baseline])
    u1 = sum(rank[:n1]) - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    ties = sum(t**3 - t for t in tie_groups)
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0 if u1 <= mean else 0.0
    z = (u1 - mean - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))


def relative_spread(values: Sequence[float]) -> float:
    """Standard deviation over mean: pyperf calls a result noisy at 10 % and above."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else 0.0


NOISY_SPREAD = 0.10  # pyperf's: a result whose spread is at least this is unstable


def stability_line(
    spreads: Mapping[str, float], load: float | None, cores: int | None
) -> str | None:
    """pyperf's warning, on the first screen: the figures whose spread over repetitions
    (standard deviation over mean) is 10 % or more, the worst named first, and a load
    average at the start above the machine's cores; None when neither holds."""
    noisy = sorted(
        ((spread, name) for name, spread in spreads.items() if spread >= NOISY_SPREAD),
        reverse=True,
    )
    said = []
    if noisy:
        spread, name = noisy[0]
        more = f" and {len(noisy) - 1} more" if len(noisy) > 1 else ""
        said.append(f"{name} spread {spread:.0%} over repetitions{more} (10 % or more)")
    if load is not None and cores and load > cores:
        said.append(f"the load average was {load:.2f} on {cores} cores as the run started")
    if not said:
        return None
    return f"Unstable: {'; '.join(said)}: rerun on a quiet machine before trusting the figures."
