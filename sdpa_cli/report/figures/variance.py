"""Figures of the variance study: overlaid histograms, and variance versus dimension."""

from __future__ import annotations

import numpy as np

from sdpa_cli.report.figures import style
from sdpa_cli.studies.result import Figure


def draw_histograms(figure: Figure):
    panels = figure.data["panels"]
    fig, axes = style.new(6.2 * len(panels), 4.6, 1, len(panels))
    for ax, panel in zip(axes[0], panels, strict=True):
        kinds = set()
        for i, s in enumerate(panel["series"]):
            c = style.color(i)
            if not s["edges"]:
                ax.plot([], [], color=c, label=f"d = {s['dim']}: not drawable in float64")
                continue
            ax.stairs(s["density"], s["edges"], fill=True, alpha=0.28, color=c)
            ax.stairs(s["density"], s["edges"], color=c, lw=0.8, label=f"d = {s['dim']}")
            if not s["theory_kind"].startswith("none"):
                ax.plot(s["x"], s["theory"], color=c, lw=1.6)
            kinds.add(s["theory_kind"])
        what = "raw q·k" if panel["scaling"] == "none" else panel["formula"]
        ax.set_title(f"{what}: histograms (filled) and theory (lines)")
        ax.set_xlabel(what)
        ax.set_ylabel("density")
        ax.legend(title="theory: " + ", ".join(sorted(kinds)), fontsize=9, title_fontsize=8)
    fig.suptitle(f"{figure.title} — {figure.data['pairs']} {figure.data['distribution']} "
                 "pairs per d")
    return fig


def draw_vs_dim(figure: Figure):
    fig, axes = style.new(7.0, 5.0)
    ax = axes[0][0]
    drawable = any(v is not None and v > 0 for c in figure.data["curves"]
                   for v in c["variance"])
    if not drawable:  # e.g. σ = 1e150: every variance is beyond float64
        ax.text(0.5, 0.5, "no variance representable in float64 to plot", ha="center",
                va="center", transform=ax.transAxes)
        ax.set_title(figure.title)
        return fig
    for i, curve in enumerate(figure.data["curves"]):
        c = style.color(i)
        dims = np.asarray(curve["dims"], dtype=float)
        var = np.asarray([np.nan if v is None else v for v in curve["variance"]], dtype=float)
        lo = np.asarray([np.nan if v is None else v for v in curve["ci_low"]], dtype=float)
        hi = np.asarray([np.nan if v is None else v for v in curve["ci_high"]], dtype=float)
        # On log axes an interval reaching below zero is drawn down to just above zero.
        below = np.minimum(var - lo, var * 0.999)
        ax.errorbar(dims, var, yerr=[below, hi - var], fmt="o", color=c, ms=5, capsize=3,
                    label=f"{curve['formula']} measured")
        if curve["theory"] is not None and any(v is not None and v > 0 for v in curve["theory"]):
            grid = np.asarray(curve["grid"], dtype=float)
            th = np.asarray([np.nan if v is None else v for v in curve["theory"]], dtype=float)
            ax.plot(grid, th, color=c, lw=1.2, ls="--", label=f"{curve['formula']} theory")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("dimension d")
    ax.set_ylabel("variance")
    ax.set_title(figure.title)
    ax.legend(fontsize=8)
    return fig
