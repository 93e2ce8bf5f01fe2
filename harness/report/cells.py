"""How a number is written in a table: the same in markdown, HTML and the console."""

from __future__ import annotations

import math
import re
from typing import Any

_NUMBERS = re.compile(r"^[-\d.,x() ]*$")


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: float) -> str:
    """Three significant digits; thousands separators from 100 on; '-' for nothing."""
    if missing(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def span(low: float, high: float) -> str:
    """A range as the article writes them: one number when both ends agree."""
    low_text, high_text = number(low), number(high)
    return low_text if low_text == high_text else f"{low_text}-{high_text}"


def whole(value: float) -> str:
    return "-" if missing(value) else f"{value:,.0f}"


def count(value: Any) -> str:
    return "-" if missing(value) else str(int(value))


def is_numeric(cell: str) -> bool:
    """A cell of digits, separators, ranges and factors: right-aligned, never cut."""
    return bool(_NUMBERS.match(cell))
