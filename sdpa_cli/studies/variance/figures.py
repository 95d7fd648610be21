"""Figures of the variance study: histograms per dimension, and variance (or sd) versus d."""

from __future__ import annotations

from typing import Any

import numpy as np

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure

# Log axes only when the values span more than this factor; over 1–3 a log axis just
# writes 2×10⁰ under the points.
LOG_SPAN = 20.0



def _scale_for(ax, values: np.ndarray, axis: str) -> None:
    v = values[np.isfinite(values) & (values > 0)]
    if v.size and v.max() / v.min() > LOG_SPAN:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")


def draw_histograms(figure: Figure):
    """One row per d, one column per scaling: each d gets its own height, so the narrow
    d = 3 spike does not flatten d = 1000 into a line; a column shares its x-axis, so the
    widths compare directly."""
    panels = figure.data["panels"]
    dims = [s["dim"] for s in panels[0]["series"]]
    fig, axes = style.new(5.4 * len(panels) + 0.6, 1.55 * len(dims) + 1.4, len(dims),
                          len(panels), sharex="col")
    for col, panel in enumerate(panels):
        what = "raw q·k" if panel["scaling"] == "none" else panel["formula"]
        kinds = sorted({s["theory_kind"] for s in panel["series"]
                        if not s["theory_kind"].startswith("none")})
        for row, s in enumerate(panel["series"]):
            ax = axes[row][col]
            c = style.color(row)
            ax.set_xlabel(what)
            ax.xaxis.label.set_visible(row == len(dims) - 1)
            ax.set_ylabel(f"d = {s['dim']}\ndensity" if col == 0 else "density")
            if not s["edges"]:
                ax.text(0.5, 0.5, f"d = {s['dim']}: not drawable in float64", ha="center",
                        va="center", transform=ax.transAxes)
                continue
            # a light fill under a solid outline: readable alone, never a muddy overlap
            ax.stairs(s["density"], s["edges"], fill=True, alpha=0.18, color=c)
            ax.stairs(s["density"], s["edges"], color=c, lw=1.0)
            if not s["theory_kind"].startswith("none"):
                ax.plot(s["x"], s["theory"], color="0.15", lw=1.2)
            ax.set_ylim(bottom=0)
        theory = f"; line: theory ({', '.join(kinds)})" if kinds else ""
        axes[0][col].set_title(f"{what}: histogram{theory}", fontsize=10)
    fig.suptitle(f"{figure.title}\n{figure.data['pairs']} {figure.data['distribution']} "
                 "pairs per d; one row per d, each with its own height")
    return fig


def draw_vs_dim(figure: Figure):
    curves = figure.data["curves"]
    about_std = figure.data.get("quantity") == "std"
    drawable = any(v is not None and v > 0 for c in curves for v in c["variance"])
    if not drawable:  # e.g. σ = 1e150: every variance is beyond float64
        fig, axes = style.new(7.0, 5.0)
        ax = axes[0][0]
        ax.text(0.5, 0.5, "no variance representable in float64 to plot", ha="center",
                va="center", transform=ax.transAxes)
        ax.set_axis_off()
        ax.set_title(figure.title)
        return fig
    if len({d for c in curves for d in c["dims"]}) == 1:
        return _rules_at_one_dim(figure, about_std)
    if about_std:
        return _std_vs_dim(figure)
    fig, axes = style.new(8.6, 5.0)
    ax = axes[0][0]
    for i, curve in enumerate(curves):
        c = style.color(i)
        dims = np.asarray(curve["dims"], dtype=float)
        var, lo, hi = (style.array(curve[k]) for k in ("variance", "ci_low", "ci_high"))
        # On log axes an interval reaching below zero is drawn down to just above zero.
        below = np.minimum(var - lo, var * 0.999)
        ax.errorbar(dims, var, yerr=[below, hi - var], fmt="o", color=c, ms=5, capsize=3,
                    label=f"{_label(curve)}: measured")
        theory = _theory(curve)
        if theory is not None:
            ax.plot(np.asarray(curve["grid"], dtype=float), theory, color=c, lw=1.2, ls="--",
                    label=f"{_label(curve)}: theory")
    _axes_scales(ax, curves, "variance")
    ax.set_xlabel("dimension d" + (" (log scale)" if ax.get_xscale() == "log" else ""))
    ax.set_ylabel("variance" + (" (log scale)" if ax.get_yscale() == "log" else ""))
    ax.set_title(figure.title, fontsize=10)
    style.legend_outside(ax)
    return fig


def _label(curve: dict[str, Any]) -> str:
    return str(curve.get("label") or curve["formula"])


def _theory(curve: dict[str, Any]) -> np.ndarray | None:
    if curve["theory"] is None or not any(v is not None and v > 0 for v in curve["theory"]):
        return None
    return style.array(curve["theory"])


def _axes_scales(ax, curves: list[dict[str, Any]], y: str | None) -> None:
    """Log axes where the values span decades, with ticks at the measured dimensions;
    y "std" judges the square roots of the variances."""
    _scale_for(ax, style.array([d for c in curves for d in c["dims"]]), "x")
    if y is not None:
        values = style.array([v for c in curves for v in c["variance"]])
        _scale_for(ax, np.sqrt(values) if y == "std" else values, "y")
    dims = sorted({float(d) for c in curves for d in c["dims"]})
    ax.set_xticks(dims, [f"{d:g}" for d in dims])
    ax.minorticks_off()
    if ax.get_xscale() == "linear":  # the theory grid runs to 1.5·d: keep to the data
        pad = 0.08 * (dims[-1] - dims[0]) + 0.1
        ax.set_xlim(dims[0] - pad, dims[-1] + pad)


def _std_vs_dim(figure: Figure):
    """sd(q·k) with its theory, beside the range that holds 95% of the scores against the
    ±2σ rule of thumb."""
    curves = figure.data["curves"]
    fig, axes = style.new(13.0, 5.0, 1, 2)
    ax_sd, ax_range = axes[0]
    for i, curve in enumerate(curves):
        c = style.color(i)
        dims = np.asarray(curve["dims"], dtype=float)
        sd = np.sqrt(style.array(curve["variance"]))
        lo = np.sqrt(np.clip(style.array(curve["ci_low"]), 0.0, None))
        hi = np.sqrt(style.array(curve["ci_high"]))
        ax_sd.errorbar(dims, sd, yerr=[sd - lo, hi - sd], fmt="o", color=c, ms=5, capsize=3,
                       label=f"{_label(curve)}: measured")
        theory = _theory(curve)
        if theory is not None:
            ax_sd.plot(np.asarray(curve["grid"], dtype=float), np.sqrt(theory), color=c,
                       lw=1.2, ls="--", label=f"{_label(curve)}: theory √Var")
        if theory is not None:  # the smooth band, as the sd panel draws its line
            band_x, two = np.asarray(curve["grid"], dtype=float), 2.0 * np.sqrt(theory)
        else:
            band_x, two = dims, 2.0 * np.sqrt(style.array(curve["theory_variance"]))
        ax_range.fill_between(band_x, -two, two, color=c, alpha=0.15, lw=0,
                              label=f"{_label(curve)}: ±2σ (theory)")
        ax_range.plot(dims, style.array(curve["p975"]), "v", color=c, ms=6,
                      label=f"{_label(curve)}: 97.5th percentile")
        ax_range.plot(dims, style.array(curve["p025"]), "^", color=c, ms=6,
                      label=f"{_label(curve)}: 2.5th percentile")
    ax_range.axhline(0.0, color="0.5", lw=0.8)
    for ax in (ax_sd, ax_range):
        _axes_scales(ax, curves, "std" if ax is ax_sd else None)
        ax.set_xlabel("dimension d" + (" (log scale)" if ax.get_xscale() == "log" else ""))
    ax_sd.set_ylabel("sd(q·k)" + (" (log scale)" if ax_sd.get_yscale() == "log" else ""))
    ax_range.set_ylabel("q·k")
    ax_sd.set_title(figure.title, fontsize=10)
    ax_range.set_title("Where 95% of the scores fall: measured percentiles and ±2σ",
                       fontsize=10)
    ax_sd.legend(fontsize=8, loc="upper left")
    ax_range.legend(fontsize=8, loc="lower left")
    return fig


def _rules_at_one_dim(figure: Figure, about_std: bool):
    """One dimension: the rules side by side, measured ± k se beside their theory."""
    curves = figure.data["curves"]
    d = curves[0]["dims"][0]
    fig, axes = style.new(max(6.0, 1.9 * len(curves) + 2.5), 4.8)
    ax = axes[0][0]
    x = np.arange(len(curves))
    power = 0.5 if about_std else 1.0
    values = []
    for i, curve in enumerate(curves):
        c = style.color(i)
        var, lo, hi = (style.array(curve[k])[0] for k in ("variance", "ci_low", "ci_high"))
        y, lo, hi = var ** power, max(lo, var * 1e-3) ** power, hi ** power
        ax.errorbar([i], [y], yerr=[[y - lo], [hi - y]], fmt="o", color=c, ms=7, capsize=4)
        th = style.array(curve["theory_variance"])[0]
        if np.isfinite(th):
            ax.plot([i + 0.12], [th ** power], marker="D", mfc="none", color=c, ms=7, ls="none")
        ax.annotate(f"{y:.3g}", (i, y), xytext=(-12, 0), textcoords="offset points",
                    ha="right", va="center", fontsize=9)
        values.append(y)
    ax.plot([], [], "o", color="0.3", label="measured ± "
            f"{figure.data.get('se_k', 4):g} se")
    ax.plot([], [], "D", mfc="none", color="0.3", label="theory")
    _scale_for(ax, np.asarray(values), "y")
    ax.set_xticks(x, [_label(c) for c in curves])
    ax.set_xlim(-0.6, len(curves) - 0.4)
    what = "sd(q·k)" if about_std else "variance of the scores"
    ax.set_ylabel(what + (" (log scale)" if ax.get_yscale() == "log" else ""))
    ax.set_xlabel(f"scaling rule at d = {d:g}")
    ax.set_title(figure.title, fontsize=10)
    style.legend_outside(ax)
    return fig
