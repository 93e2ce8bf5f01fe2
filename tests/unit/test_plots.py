from __future__ import annotations

import io
import re

from matplotlib.figure import Figure

from harness.report.plots import DPI, FORMATS, encode, images


def _figure() -> Figure:
    figure = Figure(figsize=(7, 3))
    left, right = figure.subplots(1, 2)
    left.plot([0, 1, 2], [3, 1, 2], label="a long label that sticks out")
    left.set_title("waits of the small tenants (ms)")
    left.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    right.bar(["fifo", "round_robin"], [45.0, 1.0])
    right.set_ylabel("p95 wait")
    return figure


def test_the_box_measured_once_gives_savefigs_tight_png_byte_for_byte() -> None:
    tight = io.BytesIO()
    _figure().savefig(tight, format="png", dpi=DPI, bbox_inches="tight")
    assert images(_figure())["png"] == tight.getvalue()
    assert encode(_figure(), "png") == tight.getvalue()


def test_every_format_is_cut_to_the_same_box() -> None:
    made = images(_figure())
    assert set(made) == set(FORMATS)
    png_width = int.from_bytes(made["png"][16:20], "big")  # the PNG's IHDR
    svg_width = re.search(rb'width="([0-9.]+)pt"', made["svg"])
    assert svg_width is not None
    # SVG points at 72 to the inch, the PNG's pixels at DPI: the same box, within a pixel
    assert abs(float(svg_width[1]) / 72 * DPI - png_width) <= 1
