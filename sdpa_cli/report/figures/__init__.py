"""Draw a study's Figure data to PNG (and SVG on request); matplotlib loads only here."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import numpy as np

from sdpa_cli.studies.result import Figure

# figure kind prefix → renderer module (each has draw_<rest>(fig_data, axes-factory))
_MODULES = {
    "variance": "sdpa_cli.report.figures.variance",
    "saturation": "sdpa_cli.report.figures.saturation",
    "worked": "sdpa_cli.report.figures.worked",
}


def render(figure: Figure, folder: Path, *, svg: bool = False,
           dpi: int | None = None) -> list[Path]:
    """Write folder/<name>.png (and .svg); returns the paths written."""
    from sdpa_cli.report.figures import style

    prefix, _, kind = figure.kind.partition(".")
    module = importlib.import_module(_MODULES[prefix])
    draw = getattr(module, f"draw_{kind}")
    # At absurd inputs (score spreads of 1e±300, all-zero curves on log axes) matplotlib
    # complains about cosmetic limits while still drawing a correct, if empty, figure: keep
    # its warnings and NumPy's off the user's terminal. Real failures still raise.
    with style.context(), warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        fig = draw(figure)
        return style.save(fig, folder / figure.name, svg=svg, dpi=dpi)
