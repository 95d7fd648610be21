"""Figures of the gradients study: each gradient norm versus d_k, and the frozen-row share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sdpa_cli.report.figures import style
from sdpa_cli.studies.result import Figure

PANELS = (("wq", "‖∂L/∂W_Q‖_F"), ("wk", "‖∂L/∂W_K‖_F"), ("wv", "‖∂L/∂W_V‖_F"),
          ("x", "‖∂L/∂X‖_F"))
NAMES = {"wq": "W_Q", "wk": "W_K", "wv": "W_V", "x": "X"}


def _arr(values: Sequence[Any]) -> np.ndarray:
    return np.asarray([np.nan if v is None else v for v in values], dtype=float)


def _dim_ticks(ax, dims: list[float]) -> None:
    ax.set_xscale("log")
    ax.set_xticks(dims, [f"{d:g}" for d in dims])
    ax.minorticks_off()


def draw_norms(figure: Figure):
    """2 × 2 panels on log-log axes, one line per rule: mean ± 2 se (solid, with bars) and the
    median (dashed, same colour); the legend gives each rule's fitted slope."""
    series = figure.data["series"]
    dims = sorted({float(d) for s in series for d in s["dims"]})
    fig, axes = style.new(12.5, 8.2, 2, 2)
    for (key, label), ax in zip(PANELS, axes.ravel(), strict=True):
        for i, s in enumerate(series):
            c = style.color(i)
            x = np.asarray(s["dims"], dtype=float)
            mean, se, med = (_arr(s[key][k]) for k in ("mean", "se", "median"))
            ok = np.isfinite(mean) & (mean > 0)
            # On log axes a bar reaching below zero is drawn down to just above zero.
            low = np.minimum(2.0 * se, mean * 0.999)
            slope = s["slopes"].get(NAMES[key])
            fit = f" (slope {slope:.2f})" if slope is not None else ""
            ax.errorbar(x[ok], mean[ok], yerr=[low[ok], 2.0 * se[ok]], fmt="o-", color=c,
                        ms=4, lw=1.3, capsize=3, label=f"{s['scaling']}: mean{fit}")
            good = np.isfinite(med) & (med > 0)
            ax.plot(x[good], med[good], ls="--", color=c, lw=1.0, marker="x", ms=4,
                    label=f"{s['scaling']}: median")
        _dim_ticks(ax, dims)
        ax.set_yscale("log")
        ax.set_xlabel("d_k (log scale)")
        ax.set_ylabel(f"{label} (log scale)")
        ax.set_title(f"{label} per trial", fontsize=10)
    style.legend_outside(axes[0][1])
    fig.suptitle(f"{figure.title}\n{figure.data['sizes']}")
    return fig


def draw_frozen(figure: Figure):
    """Share of score rows whose softmax Jacobian is below the threshold, ± 2 se."""
    series = figure.data["series"]
    dims = sorted({float(d) for s in series for d in s["dims"]})
    fig, axes = style.new(8.6, 4.8)
    ax = axes[0][0]
    for i, s in enumerate(series):
        x = np.asarray(s["dims"], dtype=float)
        share, se = _arr(s["frozen"]), _arr(s["frozen_se"])
        ax.errorbar(x, share, yerr=2.0 * se, fmt="o-", color=style.color(i), ms=4, lw=1.3,
                    capsize=3, label=s["scaling"])
    _dim_ticks(ax, dims)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("d_k (log scale)")
    ax.set_ylabel(f"share of rows with ‖J‖_F < {style.num(figure.data['below'])}")
    ax.set_title(f"{figure.title}\n{figure.data['sizes']}", fontsize=10)
    style.legend_outside(ax)
    return fig
