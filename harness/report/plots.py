"""Figures as files: every plot of a run folder is kept as PNG and SVG."""

from __future__ import annotations

import io

from matplotlib.figure import Figure

FORMATS = ("png", "svg")


def encode(figure: Figure, form: str) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=form, dpi=110, bbox_inches="tight")
    return buffer.getvalue()
