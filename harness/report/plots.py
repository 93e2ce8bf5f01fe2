"""Figures as files: every plot of a run folder is kept as PNG and SVG."""

from __future__ import annotations

import io

from matplotlib import rcParams
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

FORMATS = ("png", "svg")
DPI = 110


def images(figure: Figure) -> dict[str, bytes]:
    """The figure in every format of FORMATS, each cut to the same tight box.

    savefig's `bbox_inches="tight"` draws the figure once more on every call, only to
    measure that box: the plots took 11 s of a 15 s `harness report` here, and every
    plot was drawn six times (PNG, SVG, the report's PNG, each twice). The box is measured
    once here, at the PNG's dpi (where it gives savefig's "tight" PNG byte for byte; the
    SVG's box differs from its own "tight" one by at most 2 pt)."""
    box = _tight_box(figure)
    return {form: _saved(figure, form, box) for form in FORMATS}


def encode(figure: Figure, form: str) -> bytes:
    """One format of the figure, cut to its tight box."""
    return _saved(figure, form, _tight_box(figure))


def _tight_box(figure: Figure) -> Bbox:
    figure.set_dpi(DPI)
    figure.draw_without_rendering()
    return figure.get_tightbbox().padded(rcParams["savefig.pad_inches"])


def _saved(figure: Figure, form: str, box: Bbox) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=form, dpi=DPI, bbox_inches=box)
    return buffer.getvalue()
