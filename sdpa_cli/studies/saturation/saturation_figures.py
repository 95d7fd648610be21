"""Saturation figures: weights by scale, saturation versus d_k and spread, attention picture."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.colors import TwoSlopeNorm

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINES = ("-", "--", ":", "-.")



def log_y(ax) -> None:
    """A log y axis when something positive is drawn, lines or bars; linear otherwise (a log
    axis over nothing but zeros, e.g. a Jacobian that is exactly 0 everywhere, cannot be
    drawn)."""
    heights = [np.asarray(line.get_ydata(), dtype=float) for line in ax.get_lines()]
    heights.append(np.asarray([p.get_height() for p in ax.patches], dtype=float))
    if any(np.any(np.isfinite(y) & (y > 0)) for y in heights):
        ax.set_yscale("log")


def cell_edges(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Cell edges for a geometric grid: geometric midpoints, extended half a step out."""
    v = np.log(np.asarray(values, dtype=float))
    if v.size == 1:
        logs = np.array([v[0] - 0.5, v[0] + 0.5])
    else:
        mid = (v[1:] + v[:-1]) / 2
        logs = np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])
    # Grids spanning 1e-300…1e300 would extend past float64: keep the edges representable.
    return np.exp(np.clip(logs, -700.0, 700.0))


def value_ticks(ax: Any, values: Sequence[float] | np.ndarray, axis: str = "x") -> None:
    """Ticks at the measured values, written as plain numbers (16, 0.25) rather than 2⁴;
    every other one when there are many, so the labels never collide."""
    v = sorted(set(float(x) for x in values))
    if len(v) > 10:
        v = v[::2]
    labels = [f"{x:g}" for x in v]
    if axis == "x":
        ax.set_xticks(v, labels)
    else:
        ax.set_yticks(v, labels)
    ax.minorticks_off()


# --- softmax-sweep -----------------------------------------------------------------------


def draw_weights_by_scale(figure: Figure):
    groups = figure.data["groups"]
    n = figure.data["n"]
    scores = figure.data["scores"]
    fig, axes = style.new(max(8.0, 1.1 * len(groups) + 4.0), 7.6, 2, 1, sharex=True)
    width = 0.8 / n
    x = np.arange(len(groups))
    show_legend = n <= 10
    for ax, log in zip(axes[:, 0], (False, True), strict=True):
        for i in range(n):
            w = np.array([g["probs"][i] for g in groups])
            heights = np.where(w > 0, w, np.nan) if log else w
            ax.bar(x - 0.4 + (i + 0.5) * width, heights, width * 0.95, color=style.color(i),
                   label=f"key {i + 1} (score {style.num(scores[i])})" if show_legend else None)
        if log:
            log_y(ax)
            if ax.get_yscale() == "log":
                smallest = min((w for g in groups for w in g["probs"] if w > 0), default=1.0)
                ax.set_ylim(smallest / 20, 3.0)
                ax.set_ylabel("weight (log scale)")
            else:  # every weight exactly 0 or 1: nothing to show on a log axis
                ax.set_ylabel("weight")
            ax.set_title("The same weights on a log scale: the small ones shrink "
                         "exponentially\n(weights that are exactly 0 are not drawn)",
                         fontsize=9)
        else:
            ax.set_ylim(0, 1.18)
            ax.set_ylabel("weight")
            for xi, g in zip(x, groups, strict=True):
                top = f"max {g['max_prob']:.4f}" if g["others"] >= 5e-5 else \
                    f"max 1 − {g['others']:.2g}"
                ax.text(xi, 1.03, f"{top}\nH = {g['entropy']:.3g} nats",
                        ha="center", va="bottom", fontsize=8)
            if show_legend:
                ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    axes[1][0].set_xticks(x, [g["label"] for g in groups])
    shown = f"[{', '.join(style.num(s) for s in scores)}]"
    if figure.data.get("by") == "scaling":
        axes[1][0].set_xlabel(f"scaling rule applied to the scores (d_k = {figure.data['dim']})")
        how = f"softmax of {shown} under each scaling rule"
    else:
        axes[1][0].set_xlabel("multiplier applied to the scores")
        how = f"softmax of {shown} × multiplier"
    fig.suptitle(f"{figure.title}\n{how}")
    return fig


def draw_vs_dim(figure: Figure):
    data = figure.data
    curves = data["curves"]
    k = data["se_k"]
    fig, axes = style.new(15.0, 4.8, 1, 3)
    ax_max, ax_ent, ax_s = axes[0]
    formulas = list(dict.fromkeys(c["formula"] for c in curves))
    keys = list(data["keys"])
    for c in curves:
        color = style.color(formulas.index(c["formula"]))
        j = keys.index(c["keys"])
        label = c["formula"] + (f", n = {c['keys']}" if len(keys) > 1 else "")
        dims = np.asarray(c["dims"], dtype=float)
        kw = {"color": color, "marker": MARKERS[j % len(MARKERS)], "ls": LINES[j % len(LINES)],
              "ms": 5, "capsize": 3, "label": label}
        ax_max.errorbar(dims, style.array(c["mean_max_prob"]),
                        yerr=k * style.array(c["mean_max_prob_se"]), **kw)
        ax_ent.errorbar(dims, style.array(c["mean_entropy"]),
                        yerr=k * style.array(c["mean_entropy_se"]), **kw)
        if c.get("limit_max_prob") is not None:
            ax_max.axhline(c["limit_max_prob"], color=color, ls=(0, (4, 3)), lw=1, alpha=0.8)
        ax_s.plot(dims, style.array(c["implied_score_std"]), color=color,
                  marker=MARKERS[j % len(MARKERS)], ls=LINES[j % len(LINES)], label=label)
        self_mean = style.array(c.get("implied_self_score_mean") or [])
        if self_mean.size and np.isfinite(self_mean).any():
            ax_s.plot(dims, np.abs(self_mean), color=color, ls=(0, (4, 3)), lw=1, marker="x")
    for j, n in enumerate(keys):
        ls = LINES[j % len(LINES)]
        ax_ent.axhline(data["ln_n"][n], color="0.4", lw=1, ls=ls)
        ax_ent.text(0.01, data["ln_n"][n], f" ln {n}: uniform", ha="left", va="bottom",
                    fontsize=8, color="0.3", transform=ax_ent.get_yaxis_transform())
        ax_s.axhline(data["freezing"][n], color="0.4", lw=1, ls=ls)
        ax_s.text(0.99, data["freezing"][n], f"√(2 ln {n}): freezing ", ha="right",
                  va="bottom", fontsize=8, color="0.3", transform=ax_s.get_yaxis_transform())
    ax_max.axhline(1.0, color="0.6", lw=0.8)
    for n in keys:
        ax_max.axhline(1.0 / n, color="0.6", lw=0.8, ls=":")
    ax_max.set_ylim(0, 1.05)
    # room above ln n for its label: curves that reach uniform run along the line
    ax_ent.set_ylim(0, 1.1 * max(data["ln_n"][n] for n in keys))
    ax_max.set_title("mean largest weight of a row")
    ax_max.set_ylabel("largest weight")
    ax_ent.set_ylabel("entropy (nats)")
    ax_max.plot([], [], color="0.6", ls=":", lw=0.8, label="1/n: uniform")
    if any(c.get("limit_max_prob") is not None for c in curves):
        ax_max.plot([], [], color="0.3", ls=(0, (4, 3)), lw=1, label="d → ∞ limit (÷d, cosine)")
    ax_ent.set_title("mean entropy of a row (nats)")
    ax_s.set_title("score spread each rule implies (theory)")
    if any(style.array(c.get("implied_self_score_mean") or []).size for c in curves):
        # colours are named in the first panel; here only what the two line styles mean
        solid = ax_s.plot([], [], color="0.3", marker="o", label="std of an off-diagonal score")
        dashed = ax_s.plot([], [], color="0.3", ls=(0, (4, 3)), marker="x", lw=1,
                           label="|mean score of a query with its own key|")
        fig.legend(handles=[*solid, *dashed], fontsize=8, loc="outside lower right")
        ax_s.set_ylabel("score")
    log_y(ax_s)
    if not ax_s.get_ylabel():
        ax_s.set_ylabel("std of an off-diagonal score")
    all_dims = [d for c in curves for d in c["dims"]]
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        value_ticks(ax, all_dims)
        ax.set_xlabel("d_k")
    # below the panels: inside, a legend sits on curves that cross the whole range
    fig.legend(*ax_max.get_legend_handles_labels(), fontsize=8, loc="outside lower left",
               ncol=min(4, len(ax_max.get_legend_handles_labels()[0])))
    extra = []
    if data["correlation"]:
        extra.append(f"corr(q_i, k_i) = {data['correlation']:g}")
    if data["mask"] != "none":
        extra.append(f"{data['mask']} mask")
    fig.suptitle(f"{figure.title} — {data['distribution']} q, k, {data['trials']} sequences per "
                 f"point{', ' + ', '.join(extra) if extra else ''}; bars ± {k:g} se")
    return fig


def draw_attention_picture(figure: Figure):
    data = figure.data
    panels = data["panels"]
    n = data["keys"]
    fig, axes = style.new(14.0, 3.9 * len(panels) + 0.5, len(panels), 3)
    ticks = np.arange(n)
    for row, panel in zip(axes, panels, strict=True):
        scores = style.array([v for r in panel["scores"] for v in r]).reshape(n, n)
        masked = np.ma.masked_invalid(scores)
        # Each score panel has its own colour bar: under one shared scale the scaled
        # scores (std ≈ 1 against ≈ 8) look blank. The bar's numbers carry the size.
        finite = np.abs(scores[np.isfinite(scores)])
        top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        cmap_s = style_cmap("RdBu_r")
        im = row[0].imshow(masked, cmap=cmap_s, norm=TwoSlopeNorm(0.0, -top, top))
        fig.colorbar(im, ax=row[0], shrink=0.85, label="score (own scale)")
        row[0].set_title(f"{panel['formula']}: scores (std {panel['score_std']:.2f})")
        weights = np.asarray(panel["weights"], dtype=float)
        im = row[1].imshow(weights, cmap="Blues", vmin=0.0, vmax=1.0)
        fig.colorbar(im, ax=row[1], shrink=0.85, label="weight")
        row[1].set_title(f"{panel['formula']}: weights (max {panel['max_weight']:.3f})")
        for ax in row[:2]:
            ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
            ax.set_yticks(ticks, [str(t) for t in ticks], fontsize=7)
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
            ax.grid(False)
        ent = np.asarray(panel["entropy"], dtype=float)
        row[2].bar(ticks, ent, color=style.color(0))
        row[2].axhline(data["ln_n"], color=style.color(1), ls="--",
                       label=f"ln {n} = {data['ln_n']:.2f} (uniform)")
        row[2].set_ylim(0, data["ln_n"] * 1.25)
        row[2].set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
        row[2].set_xlabel("query position")
        row[2].set_ylabel("entropy (nats)")
        row[2].set_title(f"{panel['formula']}: entropy per query "
                         f"(mean {panel['mean_entropy']:.2f})")
        row[2].legend(fontsize=8, loc="upper right")
    mask = f", {data['mask']} mask (grey: masked)" if data["mask"] != "none" else ""
    fig.suptitle(f"{figure.title}{mask}. One row per scaling rule, all from the same Q and K; "
                 "each score panel on its own colour scale")
    fig.supxlabel(_picture_caption(data), fontsize=9.5)  # laid out below, never on top
    return fig


def _picture_caption(data: Mapping[str, Any]) -> str:
    """What the weights show, row by row, in the words the documents use: a row whose
    entropy is far below ln n is near one-hot, whatever a document calls it."""
    ln_n = data["ln_n"]
    parts = []
    for p in data["panels"]:
        ratio = p["mean_entropy"] / ln_n if ln_n else 1.0
        if ratio < 0.5:
            what = "near one-hot, not near-uniform"
        elif ratio > 0.9:
            what = "near-uniform"
        else:
            what = "spread over several keys"
        parts.append(f"{p['formula']}: {what} (mean entropy {p['mean_entropy']:.2f} of "
                     f"ln {data['keys']} = {ln_n:.2f}; largest weight {p['max_weight']:.3f})")
    return "\n".join(parts)


def style_cmap(name: str):
    """A copy of a colormap that shows masked (NaN) cells in light grey."""
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="0.85")


def draw_vs_std(figure: Figure):
    data = figure.data
    k = data["se_k"]
    fig, axes = style.new(13.0, 4.9, 1, 2)
    ax_max, ax_ent = axes[0]
    for i, c in enumerate(data["curves"]):
        color = style.color(i)
        s = np.asarray(c["score_std"], dtype=float)
        for ax, what in ((ax_max, "mean_max_prob"), (ax_ent, "mean_entropy")):
            ax.errorbar(s, style.array(c[what]), yerr=k * style.array(c[f"{what}_se"]),
                        color=color, marker="o", ms=4, capsize=2, label=f"n = {c['keys']}")
        grid = np.asarray(c["grid"], dtype=float)
        theory = np.asarray(c["small_s"], dtype=float)
        small = grid <= c["freezing"] / 2  # the expansion is a small-s statement
        ax_ent.plot(grid[small], theory[small], color=color, ls="--", lw=1.2)
        for ax in (ax_max, ax_ent):
            ax.axvline(c["freezing"], color=color, ls=":", lw=1.2)
    ax_ent.plot([], [], color="0.3", ls="--", label="ln n − (n−1)s²/(2n) (small s)")
    ax_max.plot([], [], color="0.3", ls=":", label="s = √(2 ln n) (freezing)")
    ax_max.set_ylim(0, 1.05)
    ax_ent.set_ylim(bottom=0)
    ax_max.set_title("mean largest weight")
    ax_ent.set_title("mean entropy (nats)")
    ax_max.set_ylabel("largest weight of a row")
    ax_ent.set_ylabel("entropy of a row (nats)")
    all_s = [x for c in data["curves"] for x in c["score_std"]]
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        value_ticks(ax, all_s)
        ax.set_xlabel("score std s")
        ax.legend(fontsize=8)
    fig.suptitle(f"{figure.title} — {data['trials']} rows per point, bars ± {k:g} se")
    return fig
