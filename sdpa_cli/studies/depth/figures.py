"""Figures of the depth study: ‖∂L/∂W_Q‖, token cosine and frozen share versus block index."""

from __future__ import annotations

from typing import Any

import numpy as np

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure

NAMES = {"post": "Post-LN", "pre": "Pre-LN"}
DASHES = ("-", "--", ":", "-.")  # one per d_k



def _panels(figure: Figure, key: str, se_key: str | None, ylabel: str, *, log: bool,
            ylim: tuple[float, float] | None = None) -> Any:
    """One panel per norm; a colour per rule, a line style per d_k; ± 2 se as a band."""
    data = figure.data
    norms, dims = data["norms"], data["dims"]
    fig, axes = style.new(5.2 * len(norms) + 2.2, 4.8, 1, len(norms), sharey=True)
    rules: list[str] = []
    for s in data["series"]:
        if s["scaling"] not in rules:
            rules.append(s["scaling"])
    for ax, nm in zip(axes[0], norms, strict=True):
        for s in data["series"]:
            if s["norm"] != nm:
                continue
            x = np.asarray(s["layer"], dtype=float)
            y = style.array(s[key])
            c = style.color(rules.index(s["scaling"]))
            ls = DASHES[dims.index(s["dim"]) % len(DASHES)]
            ok = np.isfinite(y) & ((y > 0) if log else True)
            ax.plot(x[ok], y[ok], ls=ls, marker="o", ms=3, lw=1.4, color=c,
                    label=f"{s['scaling']}, d_k = {s['dim']}")
            if se_key is not None:
                se = 2.0 * style.array(s[se_key])
                lo = np.maximum(y - se, y * 1e-3) if log else y - se
                ax.fill_between(x[ok], lo[ok], (y + se)[ok], color=c, alpha=0.15, lw=0)
        if log:
            ax.set_yscale("log")
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_xlabel("block (0 = nearest the input)")
        ax.set_title(NAMES.get(nm, nm), fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    style.legend_outside(axes[0][-1])
    fig.suptitle(f"{figure.title}\n{data['sizes']}", fontsize=10)
    return fig


def draw_grad_wq(figure: Figure) -> Any:  # a matplotlib Figure
    """‖∂L/∂W_Q‖ per block on a log axis: the median, one line per (rule, d_k)."""
    return _panels(figure, "wq_median", None, "median ‖∂L/∂W_Q‖_F (log scale)", log=True)


def draw_cosine(figure: Figure) -> Any:  # a matplotlib Figure
    """Mean cosine between tokens after each block, ± 2 se."""
    return _panels(figure, "cosine", "cosine_se", "mean cosine between tokens", log=False,
                   ylim=(-0.05, 1.05))


def draw_frozen(figure: Figure) -> Any:  # a matplotlib Figure
    """Share of each block's score rows whose softmax Jacobian is below the threshold."""
    return _panels(figure, "frozen", "frozen_se",
                   f"share of rows with ‖J‖_F < {style.num(figure.data['below'])}", log=False,
                   ylim=(-0.03, 1.03))
