"""Worked-example figures: weight matrices as annotated heat maps, unscaled beside scaled."""

from __future__ import annotations

import numpy as np

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure
from sdpa_cli.studies.worked_example.spec import part_title

CMAP = "Blues"


def _label(x: float) -> str:
    """Weights in [0, 1] with three decimals; what is not exactly 0 never reads as 0.000."""
    if x == 0:
        return "0"
    if x < 0.0005:
        return f"{x:.0e}"
    return f"{x:.3f}"


def _heat(ax, m: np.ndarray, rows: list[str], cols: list[str], title: str,
          scores: np.ndarray | None = None):
    image = ax.imshow(m, cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto")
    if len(rows) == 1 and scores is not None:
        # One row of given scores (no query behind it): name each key by its score rather
        # than label the row with a placeholder.
        ax.set_xticks(range(len(cols)), [f"key {c}\nscore {float(s):.3g}".replace("-", "−")
                                         for c, s in zip(cols, scores[0], strict=True)])
        ax.set_yticks([])
        ax.set_ylabel("one row")
    else:
        ax.set_xticks(range(len(cols)), cols)
        ax.set_yticks(range(len(rows)), rows)
        ax.set_ylabel("query")
    ax.tick_params(length=0)
    ax.grid(False)
    ax.set_xlabel("key")
    ax.set_title(title)
    # Dark cells get white text; the threshold is where Blues turns dark enough.
    for (i, j), x in np.ndenumerate(m):
        ax.text(j, i, _label(float(x)), ha="center", va="center", fontsize=9,
                color="white" if x > 0.6 else "black")
    return image


def _part_title(part: dict) -> str:
    """A part as its document names it (spec.worked.part_title), not the spec's internal name."""
    return part_title(str(part["name"]), str(part.get("description") or ""))


def draw_weights(figure: Figure):
    parts = figure.data["parts"]
    widest = max(len(p["cols"]) for p in parts)
    heights = [0.55 * len(p["rows"]) + (1.6 if len(parts) > 1 else 1.3) for p in parts]
    width = 2 * max(3.0, 0.85 * widest + 1.4) + 1.0
    fig, axes = style.new(width, sum(heights) + 0.6, len(parts), 2,
                          gridspec_kw={"height_ratios": heights})
    image = None
    for row, part in zip(axes, parts, strict=True):
        name = _part_title(part) + "\n" if len(parts) > 1 else ""
        raw = np.asarray(part["scores"], dtype=float) if "scores" in part else None
        scaled = (np.asarray(part["scaled_scores"], dtype=float) if "scaled_scores" in part
                  else None)
        image = _heat(row[0], np.asarray(part["unscaled"], dtype=float), part["rows"],
                      part["cols"], f"{name}softmax(QKᵀ)", raw)
        _heat(row[1], np.asarray(part["scaled"], dtype=float), part["rows"], part["cols"],
              f"{name}softmax(QKᵀ / {part['root'].split(' =')[0]})", scaled)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="weight")
    fig.suptitle(figure.title)
    return fig
