"""The site's interactive charts, drawn by plotly (plotly.js, shipped inside the Python
package, is written once into the site's assets; no page fetches anything): a hover
names each point's strategy, run and commit, a click on a legend entry hides or shows it.

Each function takes one of harness/site/tables.py's frames and gives a `<div>` with the
chart and plotly's own call that draws it, never a script of ours.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from harness.results.jobs import RUN_ID

CONFIG = {"displaylogo": False, "responsive": True}
HEIGHT = 460
SYMBOLS = {"default": "circle", "tuned": "diamond"}


def plotly_js() -> str:
    """plotly.js as the installed plotly ships it: the site's one copy."""
    return str(get_plotlyjs())


def _div(figure: go.Figure, key: str, height: int = HEIGHT) -> str:
    figure.update_layout(
        height=height,
        margin={"l": 60, "r": 20, "t": 40, "b": 60},
        template="plotly_white",
        legend={"title": {"text": ""}},
    )
    return str(
        figure.to_html(
            full_html=False, include_plotlyjs=False, div_id=f"chart-{key}", config=CONFIG
        )
    )


def _middle(table: pd.DataFrame, figure: str) -> tuple[pd.Series, pd.Series, pd.Series]:
    """A range drawn as a point at its middle and bars to its ends."""
    low, high = table[f"{figure}_low"], table[f"{figure}_high"]
    middle = (low + high) / 2
    return middle, high - middle, middle - low


def _error(plus: pd.Series, minus: pd.Series) -> dict[str, Any]:
    return {"type": "data", "array": list(plus), "arrayminus": list(minus), "thickness": 1}


def fairness_chart(table: pd.DataFrame, key: str) -> str:
    """Small tenants' median wait against the large tenant's makespan (x FIFO where the
    run has FIFO, else seconds): one colour per library, tuned mappings as diamonds."""
    price = "x_fifo" if table["x_fifo_low"].notna().any() else "makespan"
    table = table.dropna(subset=[f"{price}_low"])
    several = table["pg_version"].nunique() > 1  # each point says its server's major
    labels = [
        f"{strategy} (PG {version.split('.')[0]})" if several else strategy
        for strategy, version in zip(table["strategy"], table["pg_version"], strict=True)
    ]
    table = table.assign(label=labels)
    figure = go.Figure()
    for library, rows in table.groupby("library", sort=False):
        x, x_plus, x_minus = _middle(rows, "small_p50")
        y, y_plus, y_minus = _middle(rows, price)
        figure.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="markers+text",
                name=str(library),
                text=rows["label"],
                textposition="top center",
                textfont={"size": 10},
                marker={"size": 11, "symbol": [SYMBOLS.get(s, "circle") for s in rows["setting"]]},
                error_x=_error(x_plus, x_minus),
                error_y=_error(y_plus, y_minus),
                customdata=rows[["strategy", "setting", RUN_ID, "pg_version"]].to_numpy(),
                hovertemplate="<b>%{customdata[0]}</b> (%{customdata[1]})<br>"
                "small tenants' median wait %{x:.3g} s<br>"
                + ("large tenant's makespan %{y:.3g}x FIFO" if price == "x_fifo" else "%{y:.3g} s")
                + "<br>run %{customdata[2]}, PostgreSQL %{customdata[3]}<extra></extra>",
            )
        )
    figure.update_layout(showlegend=True)  # a library's legend entry, even alone
    figure.update_xaxes(type="log", title="small tenants' median wait (s, log)")
    title = (
        "large tenant's makespan, x FIFO's" if price == "x_fifo" else "large tenant's makespan (s)"
    )
    figure.update_yaxes(title=title)
    return _div(figure, key)


def throughput_chart(table: pd.DataFrame, key: str) -> str:
    """Jobs/s of each strategy and worker count, default and tuned in two colours: dots
    on a log scale (the libraries span 10 to 20,000 jobs/s; a bar's length on a log
    scale would say nothing)."""
    figure = go.Figure()
    labels = [f"{s} x{w}" for s, w in zip(table["strategy"], table["workers"], strict=True)]
    table = table.assign(label=labels)
    for setting, rows in table.groupby("setting", sort=False):
        y, plus, minus = _middle(rows, "jobs_s")
        figure.add_trace(
            go.Scatter(
                x=rows["label"],
                y=y,
                mode="markers",
                marker={"size": 12, "symbol": SYMBOLS.get(str(setting), "circle")},
                name=str(setting),
                error_y=_error(plus, minus),
                customdata=rows[["library", RUN_ID]].to_numpy(),
                hovertemplate="<b>%{x}</b> (%{customdata[0]})<br>%{y:,.0f} jobs/s"
                "<br>run %{customdata[1]}<extra></extra>",
            )
        )
    figure.update_yaxes(type="log", title="jobs/s (log)")
    figure.update_xaxes(title="strategy x workers", categoryorder="array", categoryarray=labels)
    return _div(figure, key)


def plans_chart(table: pd.DataFrame, key: str) -> str:
    """One dequeue's shared buffers against its time, a colour per plan variant; the
    flags in the hover."""
    table = table.dropna(subset=["total_ms", "shared_buffers"])
    figure = go.Figure()
    for variant, rows in table.groupby("variant", sort=False):
        figure.add_trace(
            go.Scatter(
                x=rows["shared_buffers"].clip(lower=1),
                y=rows["total_ms"],
                mode="markers",
                name=str(variant),
                marker={"size": 10},
                customdata=rows[["strategy", "flags", "library", RUN_ID]].to_numpy(),
                hovertemplate="<b>%{customdata[0]}</b> (%{customdata[2]})<br>"
                "%{x:,.0f} buffers, %{y:.3g} ms<br>flags: %{customdata[1]}"
                "<br>run %{customdata[3]}<extra></extra>",
            )
        )
    figure.update_xaxes(type="log", title="shared buffers, one dequeue (log)")
    figure.update_yaxes(type="log", title="planning + execution (ms, log)")
    return _div(figure, key)


def trend_chart(rows: pd.DataFrame, key: str) -> str:
    """One figure across runs, oldest first: its value, its range over the run's
    repetitions as a bar, the reference as a band where the scenario gives one."""
    rows = rows.assign(when=pd.to_datetime(rows["started_at"], utc=True, format="ISO8601"))
    figure = go.Figure(
        go.Scatter(
            x=rows["when"],
            y=rows["value"],
            mode="lines+markers",
            name=str(rows["figure"].iloc[0]),
            error_y=_error(rows["high"] - rows["value"], rows["value"] - rows["low"]),
            customdata=rows[[RUN_ID, "commit_label"]].to_numpy(),
            hovertemplate="%{y:.4g} " + str(rows["unit"].iloc[0]) + "<br>run %{customdata[0]}"
            "<br>commit %{customdata[1]}<extra></extra>",
        )
    )
    low, high = rows["reference_low"].iloc[-1], rows["reference_high"].iloc[-1]
    if _finite(low) and _finite(high):
        figure.add_hrect(y0=low, y1=high, fillcolor="grey", opacity=0.15, line_width=0)
    figure.update_layout(showlegend=False)
    figure.update_yaxes(title=str(rows["unit"].iloc[0]), rangemode="tozero")
    figure.update_xaxes(title="run started (UTC)")
    return _div(figure, key, height=320)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
