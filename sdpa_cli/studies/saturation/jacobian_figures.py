"""Jacobian figures: ‖J‖ against scale, d_k and score spread, and the phase diagram."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.colors import TwoSlopeNorm

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure
from sdpa_cli.studies.saturation.saturation_figures import (
    LINES,
    MARKERS,
    cell_edges,
    log_y,
    value_ticks,
)


def draw_jacobian_vs_scale(figure: Figure):
    points = figure.data["points"]
    matrices = [p.get("matrix") for p in points]
    show = all(m is not None for m in matrices)
    rows = 2 if show else 1
    # A free grid (not style.new): one wide panel above a row of small matrices.
    fig = style.blank(max(9.0, 2.6 * len(points)), 4.6 * rows)
    grid = fig.add_gridspec(rows, len(points))
    ax = fig.add_subplot(grid[0, :])
    scale = np.array([p["scale"] for p in points], dtype=float)
    zeros: list[Any] = []
    for i, (key, label) in enumerate((("max_abs_jacobian", "max |J_ij|"),
                                      ("frobenius", "‖J‖_F"), ("spectral", "λ_max(J)"))):
        y = np.array([p[key] for p in points], dtype=float)
        zeros.extend(p["label"] for p, v in zip(points, y, strict=True) if v == 0)
        ax.plot(scale, np.where(y > 0, y, np.nan), marker=MARKERS[i], color=style.color(i),
                label=label, ls=LINES[i])
    ax.set_xscale("log")
    log_y(ax)
    ax.set_xticks(scale, [p["label"] for p in points])
    ax.minorticks_off()
    ax.set_xlabel("multiplier of the scores")
    ax.set_ylabel("size of J")
    note = f" (exactly 0 at {', '.join(dict.fromkeys(zeros))}: not drawn)" if zeros else ""
    ax.set_title(f"Size of J = diag(p) − ppᵀ{note}\nmax|J_ij| ≤ λ_max ≤ ‖J‖_F always; the "
                 "last two meet once one weight dominates", fontsize=10)
    ax.legend(fontsize=9)
    if show:
        top = max(float(np.max(np.abs(m))) for m in matrices) or 1.0
        for j, (p, m) in enumerate(zip(points, matrices, strict=True)):
            sub = fig.add_subplot(grid[1, j])
            im = sub.imshow(np.asarray(m), cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -top, top))
            sub.set_title(f"J at {p['label']}\nmax |J_ij| = {p['max_abs_jacobian']:.3g}",
                          fontsize=9)
            ticks = np.arange(len(m))
            sub.set_xticks(ticks, [str(t + 1) for t in ticks], fontsize=7)
            sub.set_yticks(ticks, [str(t + 1) for t in ticks], fontsize=7)
            sub.set_xlabel("key j", fontsize=8)
            sub.set_ylabel("key i", fontsize=8)
            sub.grid(False)
        fig.colorbar(im, ax=fig.axes[1:], shrink=0.8, label="J_ij (one colour scale for all)")
    shown = ", ".join(style.num(s) for s in figure.data["scores"])
    fig.suptitle(f"{figure.title}: scores [{shown}]")
    return fig


def draw_jacobian_vs_dim(figure: Figure):
    data = figure.data
    k = data["se_k"]
    fig, axes = style.new(8.0, 5.2)
    ax = axes[0][0]
    formulas = list(dict.fromkeys(c["formula"] for c in data["curves"]))
    keys = sorted({c["keys"] for c in data["curves"]})
    for c in data["curves"]:
        color = style.color(formulas.index(c["formula"]))
        j = keys.index(c["keys"])
        label = c["formula"] + (f", n = {c['keys']}" if len(keys) > 1 else "")
        dims = np.asarray(c["dims"], dtype=float)
        ax.errorbar(dims, style.array(c["mean_frobenius"]),
                    yerr=k * style.array(c["mean_frobenius_se"]), color=color,
                    marker=MARKERS[j % len(MARKERS)], ls="-", capsize=3, label=f"{label}: mean")
        ax.plot(dims, style.array(c["median_frobenius"]), color=color, ls=":", lw=1.2,
                marker=MARKERS[j % len(MARKERS)], mfc="none", label=f"{label}: median")
    for j, n in enumerate(keys):
        ax.axhline(data["uniform"][n], color="0.4", lw=1, ls=LINES[j % len(LINES)])
        ax.text(0.99, data["uniform"][n], f"√(n−1)/n, n = {n}: uniform weights ", fontsize=8,
                ha="right", va="top", color="0.3", transform=ax.get_yaxis_transform())
    ax.set_xscale("log", base=2)
    value_ticks(ax, [d for c in data["curves"] for d in c["dims"]])
    log_y(ax)
    ax.set_xlabel("d_k")
    ax.set_ylabel("‖J‖_F of one attention row")
    ax.legend(fontsize=8)
    ax.set_title(f"{figure.title}\n{data['trials']} sequences per point, bars ± {k:g} se",
                 fontsize=10)
    return fig


def _curve_colors(count: int) -> list:
    """The palette for a few curves; a sequential map (ordered by n) when there are many,
    so that no two curves share a colour."""
    if count <= 6:
        return [style.color(i) for i in range(count)]
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    return [cmap(0.92 * i / (count - 1)) for i in range(count)]


def draw_frobenius_vs_std(figure: Figure):
    data = figure.data
    k = data["se_k"]
    curves = data["curves"]
    few = len(curves) <= 5  # medians only when they do not crowd the picture
    fig, axes = style.new(9.4, 5.8)
    ax = axes[0][0]
    colors = _curve_colors(len(curves))
    for color, c in zip(colors, curves, strict=True):
        s = np.asarray(c["score_std"], dtype=float)
        mean = style.array(c["mean_frobenius"])
        se = style.array(c["mean_frobenius_se"])
        ax.plot(s, mean, color=color, marker="o", ms=3.5, label=f"n = {c['keys']}")
        ax.fill_between(s, mean - k * se, mean + k * se, color=color, alpha=0.25, lw=0)
        if few:
            ax.plot(s, style.array(c["median_frobenius"]), color=color, ls=":", lw=1.0, alpha=0.8)
        # the s → 0 limit, as a short stub at the left edge where the curves start from it
        ax.axhline(c["uniform"], xmin=0.0, xmax=0.06, color=color, lw=2.5)
        # the freezing point, as a tick on the top edge (vertical lines would crowd)
        ax.plot([c["freezing"]], [1.0], marker="v", ms=9, color=color, mec="k", ls="none",
                transform=ax.get_xaxis_transform(), clip_on=False)
        marker = "X" if c["at_edge"] else "*"
        ax.plot([c["s_star"]], [c["peak"]], marker=marker, ms=13, color=color, mec="k",
                ls="none")
    if few:
        ax.plot([], [], color="0.3", ls=":", label="median (dotted)")
    ax.plot([], [], color="0.5", marker="v", ms=8, mec="k", ls="none",
            label="▼ on top: s = √(2 ln n)")
    ax.plot([], [], color="0.3", lw=2.5, label="√(n−1)/n: limit as s → 0 (left stub)")
    ax.plot([], [], color="0.5", marker="*", ms=12, mec="k", ls="none",
            label="s*: peak of mean ‖J‖_F")
    if any(c["at_edge"] for c in curves):
        ax.plot([], [], color="0.5", marker="X", ms=10, mec="k", ls="none",
                label="largest at the grid edge: no peak inside")
    ax.set_xscale("log", base=2)
    value_ticks(ax, [x for c in curves for x in c["score_std"]])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("score std s")
    ax.set_ylabel("‖J‖_F of one row")
    ax.legend(fontsize=8, ncol=2 if len(curves) > 4 else 1, loc="upper right")
    ax.set_title(f"{figure.title}\n{data['trials']} rows per point, band ± {k:g} se"
                 + ("" if few else "; medians in the table"), fontsize=10, pad=14)
    return fig


def draw_phase_diagram(figure: Figure):
    data = figure.data
    s = np.asarray(data["score_stds"], dtype=float)
    n = np.asarray(data["keys"], dtype=float)
    xe, ye = cell_edges(s), cell_edges(n)
    fig, axes = style.new(14.0, 6.6, 1, 2, sharey=True)
    panels = (
        (axes[0][0], "entropy_ratio", "mean entropy ÷ ln n  (1 = uniform, 0 = one-hot)",
         "÷ ln n", "viridis"),
        (axes[0][1], "frobenius_ratio", "mean ‖J‖_F ÷ its largest value over s, per n",
         "÷ peak for that n", "magma"),
    )
    curve = data["freezing_curve"]
    stars = data["s_star"]
    inside = [p for p in stars if not p["at_edge"]]
    edge = [p for p in stars if p["at_edge"]]
    mark_colors = ("#7CFC00", "#ff7f0e", "#e377c2", "#17becf", "#bcbd22")
    for ax, key, title, bar_label, cmap in panels:
        values = np.array([style.array(r) for r in data[key]], dtype=float)
        mesh = ax.pcolormesh(xe, ye, np.ma.masked_invalid(values), cmap=cmap, vmin=0.0,
                             vmax=1.0, shading="flat")
        fig.colorbar(mesh, ax=ax, label=bar_label, shrink=0.9)
        ax.plot(curve["s"], curve["keys"], color="white", lw=2.2, ls="--",
                label="s = √(2 ln n): freezing point")
        ax.plot([p["s"] for p in inside], [p["keys"] for p in inside], ls="none", marker="*",
                ms=12, color="cyan", mec="k", label="s*: peak of mean ‖J‖_F")
        if edge:
            ax.plot([p["s"] for p in edge], [p["keys"] for p in edge], ls="none", marker="X",
                    ms=9, color="cyan", mec="k", label="largest at the grid edge (no peak)")
        for i, mark in enumerate(data["marks"]):
            ax.axvline(mark["s"], color=mark_colors[i % len(mark_colors)], lw=1.8,
                       ls="-" if i == 0 else "-.", label=mark["label"])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlim(xe[0], xe[-1])
        ax.set_ylim(ye[0], ye[-1])
        value_ticks(ax, s)
        ax.set_xlabel("score std s")
        ax.grid(False)
        ax.set_title(title, fontsize=10)
    value_ticks(axes[0][0], n, axis="y")
    axes[0][0].set_ylabel("keys n")
    handles, labels = axes[0][1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9,
               facecolor="0.92")
    fig.suptitle(f"{figure.title} ({data['trials']} rows per cell)")
    return fig
