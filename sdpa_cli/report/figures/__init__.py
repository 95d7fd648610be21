"""Draw a study's Figure data to PNG (and SVG on request); matplotlib loads only here."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sdpa_cli.framework.result import Figure


def render(figure: Figure, folder: Path | None, *, draw: Callable[[Figure], Any],
           svg: bool = False, dpi: int | None = None) -> Any:
    """Draw `figure` with `draw`, the renderer the study declares for figure.kind, in sdpa's
    style; write folder/<name>.png (and .svg) and return the paths written, or with no
    folder return the matplotlib figure itself (the Python API's figures())."""
    # Lazy on purpose: style loads matplotlib, which a run with --no-plots never needs.
    from sdpa_cli.framework import figure_style as style

    # At absurd inputs (score spreads of 1e±300, all-zero curves on log axes) matplotlib
    # complains about cosmetic limits while still drawing a correct, if empty, figure: keep
    # its warnings and NumPy's off the user's terminal. Real failures still raise.
    with style.context(), warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        fig = draw(figure)
        if folder is None:
            return fig
        return style.save(fig, folder / figure.name, svg=svg, dpi=dpi)
