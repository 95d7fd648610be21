"""Drawing the inspect figures: heatmaps, pooled scores, entropy versus n, one attention map."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure


def _subplots(rows: int = 1, cols: int = 1, *, figsize: tuple[float, float],
              squeeze: bool = True) -> tuple[Any, Any]:
    """A figure of its own (matplotlib's object API: no pyplot, no backend switched) and its
    axes, laid out as constrained."""
    fig = style.blank(*figsize)
    return fig, fig.subplots(rows, cols, squeeze=squeeze)


def _whole_ticks(ax: Any) -> None:
    """Layers and heads are whole numbers: no tick at 0.25 on a grid of two layers."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def draw_heatmaps(fig_data: Figure) -> Any:
    d = fig_data.data
    rules = list(d["maps"])
    fields = d["fields"]
    fig, axes = _subplots(len(rules), len(fields), squeeze=False,
                          figsize=(4.2 * len(fields), 3.2 * len(rules) + 0.6))
    for i, rule in enumerate(rules):
        for j, (field, label) in enumerate(fields):
            ax = axes[i][j]
            grid = np.array(d["maps"][rule][field], dtype=float)
            im = ax.imshow(grid, aspect="auto", cmap="viridis", interpolation="nearest",
                           vmin=0 if field != "score_std" else None,
                           vmax=1 if field != "score_std" else None)
            ax.grid(False)  # the house style's grid would cross every cell
            _whole_ticks(ax)
            ax.set_title(f"{label} ({rule})", fontsize=9)
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            fig.colorbar(im, ax=ax)
    fig.suptitle(d["where"], fontsize=9)
    return fig


def draw_pooled(fig_data: Figure) -> Any:
    """Each layer's pooled scores as a density, layers by colour (a colour scale for a deep
    model, whose legend would repeat colours), beside N(0, 1). The edge bins hold every score
    clipped to ±10: drawn, their spike would set the y-axis, so they are left out of the
    curves and their share is said in the title instead."""
    d = fig_data.data
    edges = np.array(d["edges"])
    mids = (edges[:-1] + edges[1:]) / 2
    width = edges[1] - edges[0]
    fig, ax = _subplots(figsize=(7, 4.2))
    series = list(d["counts"].items())
    many = len(series) > LEGEND_LAYERS
    cmap = _colormap("viridis")
    clipped = []
    for i, (label, counts) in enumerate(series):
        c = np.array(counts, dtype=float)
        total = max(c.sum(), 1.0)
        clipped.append((c[0] + c[-1]) / total)
        ax.plot(mids[1:-1], c[1:-1] / total / width, lw=1.2, label=label.split(" ", 2)[-1],
                color=cmap(i / max(len(series) - 1, 1)) if many else None)
    ax.plot(mids[1:-1], np.exp(-mids[1:-1] ** 2 / 2) / math.sqrt(2 * math.pi), "k--", lw=1.5,
            label="N(0, 1)")
    ax.set_xlim(edges[1], edges[-2])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("scaled score (the model's rule)")
    ax.set_ylabel("density")
    share = (f"\nscores beyond ±{edges[-2]:g} (left out): median layer "
             f"{100 * float(np.median(clipped)):.1f}%, most {100 * max(clipped):.1f}%"
             if clipped else "")
    ax.set_title(d["where"] + share, fontsize=9)
    if many:
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        scale = ScalarMappable(norm=Normalize(0, len(series) - 1), cmap=cmap)
        fig.colorbar(scale, ax=ax, label="layer")
        ax.legend(handles=ax.get_lines()[-1:], fontsize=8, loc="upper right")
    else:
        ax.legend(fontsize=7, ncol=2)
    return fig


def draw_entropy_vs_n(fig_data: Figure) -> Any:
    d = fig_data.data
    fig, ax = _subplots(figsize=(6.5, 4.2))
    series = list(d["series"].items())
    # a legend entry per layer fits a small model; a deep one gets a colour scale instead
    many = len(series) > LEGEND_LAYERS
    cmap = _colormap("viridis")
    for i, (label, ys) in enumerate(series):
        ax.plot(d["n"], ys, "o-", label=label,
                color=cmap(i / max(len(series) - 1, 1)) if many else None)
    ax.set_xscale("log")
    ax.minorticks_off()  # only the measured n are labelled, as whole numbers
    ax.set_xticks(d["n"], [str(n) for n in d["n"]])
    ax.set_xlabel("n (keys, log scale)")
    ax.set_ylabel("entropy ÷ ln(keys seen), median head")
    ax.set_ylim(0, 1.02)
    ax.set_title(d["where"], fontsize=9)
    if many:
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        scale = ScalarMappable(norm=Normalize(0, len(series) - 1), cmap=cmap)
        fig.colorbar(scale, ax=ax, label="layer")
    else:
        ax.legend(fontsize=7)
    return fig


LEGEND_LAYERS = 12  # more layers than this: a colour scale, not a legend


def _colormap(name: str) -> Any:
    from matplotlib import colormaps

    return colormaps[name]


def draw_picture(fig_data: Figure) -> Any:
    d = fig_data.data
    w = np.array(d["weights"])
    tokens = [t if len(t) <= 12 else t[:11] + "…" for t in d["tokens"]]
    size = min(11.0, 3.0 + 0.14 * len(tokens))
    fig, ax = _subplots(figsize=(size + 1.2, size))
    im = ax.imshow(w, cmap="magma", vmin=0, vmax=1, interpolation="nearest")
    ax.grid(False)
    ticks = range(len(tokens))
    ax.set_xticks(ticks, tokens, rotation=90, fontsize=6)
    ax.set_yticks(ticks, tokens, fontsize=6)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"{fig_data.title}\n{d['where']}", fontsize=8)
    fig.colorbar(im, ax=ax, label="weight")
    return fig


def draw_head_types(fig_data: Figure) -> Any:
    d = fig_data.data
    fields = d["fields"]
    fig, axes = _subplots(1, len(fields), squeeze=False, figsize=(4.2 * len(fields), 3.8))
    for j, (field, label) in enumerate(fields):
        ax = axes[0][j]
        grid = np.array(d["maps"][field], dtype=float)
        im = ax.imshow(grid, aspect="auto", cmap="viridis", interpolation="nearest", vmin=0,
                       vmax=1)
        ax.grid(False)
        _whole_ticks(ax)
        if d["saturated"]:
            layer, head = np.array(d["saturated"]).T
            ax.scatter(head, layer, marker="x", s=28, color="red", linewidths=1.2)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        fig.colorbar(im, ax=ax)
    fig.suptitle(d["where"], fontsize=9)
    return fig


def draw_scale_loss(fig_data: Figure) -> Any:
    d = fig_data.data
    panels = [k for k in ("every", "single") if d[k]]
    fig, axes = _subplots(1, len(panels), squeeze=False, figsize=(5.0 * len(panels), 3.8))
    for ax, panel in zip(axes[0], panels, strict=True):
        if panel == "every":
            ax.plot(d["factors"], d["every"], "o-", color=style.PALETTE[0])
            ax.set_xscale("log", base=2)
            ax.set_xticks(d["factors"], [f"×{f:g}" for f in d["factors"]])
            ax.minorticks_off()
            ax.axvline(1.0, color="grey", lw=0.8, ls=":")
            ax.set_xlabel("factor on q·k in every layer (×1: as trained)")
            ax.set_title("every layer's scale × factor", fontsize=9)
        else:
            ax.bar(d["layers"], d["single"], color=style.PALETTE[1])
            _whole_ticks(ax)
            ax.set_xlabel("layer whose ÷√d_k is removed")
            ax.set_title("one layer's scale removed", fontsize=9)
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_ylabel("loss − trained loss (nats)")
    fig.suptitle(f"{fig_data.title}\n{d['where']}", fontsize=9)
    return fig


RENDERERS: Mapping[str, Any] = {
    "inspect.scale_loss": draw_scale_loss,
    "inspect.head_types": draw_head_types,
    "inspect.heatmaps": draw_heatmaps, "inspect.pooled": draw_pooled,
    "inspect.entropy_vs_n": draw_entropy_vs_n, "inspect.picture": draw_picture,
}
