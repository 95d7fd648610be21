"""Draw a study's Figure data to PNG (and SVG on request); matplotlib loads only here."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sdpa_cli.framework.result import Figure


@contextlib.contextmanager
def _styled() -> Iterator[Any]:
    """sdpa's figure style, with matplotlib's and NumPy's warnings kept off the terminal."""
    # Lazy on purpose: style loads matplotlib, which a run with --no-plots never needs.
    from sdpa_cli.framework import figure_style as style

    # At absurd inputs (score spreads of 1e±300, all-zero curves on log axes) matplotlib
    # complains about cosmetic limits while still drawing a correct, if empty, figure: keep
    # its warnings and NumPy's off the user's terminal. Real failures still raise.
    with style.context(), warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield style


def figure_of(figure: Figure, renderer: Callable[[Figure], Any]) -> Any:
    """The matplotlib figure `renderer` (the study's, for figure.kind) draws, in sdpa's style
    (the Python API's figures())."""
    with _styled():
        return renderer(figure)


def render(figure: Figure, folder: Path, *, draw: Callable[[Figure], Any], svg: bool = False,
           dpi: int | None = None) -> list[Path]:
    """Write folder/<name>.png (and .svg) with `draw`, the renderer the study declares for
    figure.kind; returns the paths written."""
    with _styled() as style:
        paths: list[Path] = style.save(draw(figure), folder / figure.name, svg=svg, dpi=dpi)
        return paths
