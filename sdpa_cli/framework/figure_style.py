"""One fixed look for every figure, and saving that gives byte-identical files run to run.

Figures are drawn with matplotlib's object API only: a Figure and its own canvas, never
pyplot and never matplotlib.use(), so importing sdpa changes no backend and no global state
(a notebook's own plt plots keep showing inline)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 110  # screen size; print wants 300 (--dpi)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")

_RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "svg.hashsalt": "sdpa",  # stable ids inside SVG files
    "path.simplify": True,
}


@contextlib.contextmanager
def context() -> Iterator[None]:
    """matplotlib's defaults plus ours, whatever the user's matplotlibrc says."""
    with matplotlib.rc_context(), matplotlib.style.context("default"):
        matplotlib.rcParams.update(_RC)  # type: ignore[arg-type]
        yield


class ShownFigure(Figure):
    """A Figure that shows itself in Jupyter (an object a cell returns is displayed by its
    _repr_png_, drawn on its own Agg canvas), with or without `%matplotlib inline`."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        FigureCanvasAgg(self).print_png(buf, metadata={"Software": None})
        return buf.getvalue()


def new(width: float, height: float, rows: int = 1, cols: int = 1, *,
        nrows: int | None = None, ncols: int | None = None, **kw: Any) -> tuple[Any, Any]:
    """A figure not registered with pyplot (no global state, no GUI) and its axes, always a
    2-d grid (`axes[row][col]`, also for one panel); the grid is `rows, cols` or matplotlib's
    `nrows=, ncols=`, and `kw` goes to Figure.subplots (sharex=, width_ratios=, …)."""
    fig = ShownFigure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(rows if nrows is None else nrows, cols if ncols is None else ncols,
                        squeeze=False, **kw)
    return fig, axes


def array(values: Any) -> np.ndarray:
    """Numbers as a figure's data holds them (None where missing) as a float array, NaN for
    None: matplotlib leaves a NaN point out."""
    return np.asarray([np.nan if v is None else v for v in values], dtype=float)


def blank(width: float, height: float) -> ShownFigure:
    """An empty figure of that size (for layouts new() does not make)."""
    return ShownFigure(figsize=(width, height), layout="constrained")


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def num(x: float) -> str:
    """A number for a label: 6 significant digits at most, and a real minus sign."""
    return f"{x:.6g}".replace("-", "−")


def legend_outside(ax, **kw) -> None:
    """A legend to the right of the axes, where it can never cover data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              **{"fontsize": 8, **kw})


def save(fig: Figure, stem: Path, *, svg: bool = False, dpi: int | None = None) -> list[Path]:
    """PNG without the metadata that changes run to run (software version, time), at `dpi`
    pixels per inch (None: the screen default)."""
    paths = [stem.with_suffix(".png")]
    fig.savefig(paths[0], format="png", metadata={"Software": None}, dpi=dpi or DPI)
    if svg:
        paths.append(stem.with_suffix(".svg"))
        fig.savefig(paths[1], format="svg", metadata={"Date": None, "Creator": None})
    return paths
