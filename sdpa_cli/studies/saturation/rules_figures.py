"""Figures of the field's rules versus n: the leading-key family, REM participation, keys axis."""

from __future__ import annotations

import numpy as np

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure
from sdpa_cli.studies.saturation.saturation_figures import MARKERS, value_ticks


def draw_leading_keys(figure: Figure):
    """Largest weight, entropy ÷ ln n and ‖J‖_F versus n, one curve per rule (exact)."""
    data = figure.data
    fig, axes = style.new(15.0, 4.6, 1, 3)
    ax_max, ax_ent, ax_frob = axes[0]
    for i, c in enumerate(data["curves"]):
        n = np.asarray(c["keys"], dtype=float)
        kw = {"color": style.color(i), "marker": "o", "ms": 4,
              "label": f"{c['scaling']}: {c['formula']}"}
        ax_max.plot(n, c["max_prob"], **kw)
        ax_ent.plot(n, c["entropy_ratio"], **kw)
        ax_frob.plot(n, c["frobenius"], **kw)
    ax_max.set_ylim(0, 1.05)
    ax_ent.set_ylim(0, 1.05)
    ax_max.set_title("largest weight p₁")
    ax_ent.set_title("entropy ÷ ln n (1 = uniform)")
    ax_frob.set_title("‖J‖_F of the softmax Jacobian")
    ax_max.set_ylabel("weight of the leading key")
    ax_ent.set_ylabel("entropy / ln n")
    ax_frob.set_ylabel("‖J‖_F")
    for ax in axes[0]:
        ax.set_xscale("log")
        ax.set_xlabel("number of keys n")
    if any(y > 0 for c in data["curves"] for y in c["frobenius"]):
        ax_frob.set_yscale("log")  # ‖J‖_F falls by orders of magnitude once the leader wins
    ax_max.legend(fontsize=8)
    fig.suptitle(figure.title + " (no Monte Carlo)")
    return fig


def draw_rem_participation(figure: Figure):
    """Mean Σp² of n iid N(0, s²) scores versus s, beside the REM limit 1 − √(2 ln n)/s."""
    data = figure.data
    k = data["se_k"]
    fig, axes = style.new(8.0, 4.9)
    ax = axes[0][0]
    for i, c in enumerate(data["curves"]):
        color = style.color(i)
        s = np.asarray(c["score_std"], dtype=float)
        y, se = style.array(c["mean_participation"]), style.array(c["mean_participation_se"])
        ax.errorbar(s, y, yerr=k * se, color=color, marker="o", ms=4, capsize=2,
                    label=f"n = {c['keys']}: measured")
        grid = np.geomspace(s.min(), s.max(), 200)
        limit = np.where(grid > c["threshold"], 1.0 - c["threshold"] / grid, 0.0)
        ax.plot(grid, limit, color=color, ls="--", lw=1.2)
        ax.axvline(c["threshold"], color=color, ls=":", lw=1.0)
    ax.plot([], [], color="0.3", ls="--", label="REM limit 1 − √(2 ln n)/s")
    ax.plot([], [], color="0.3", ls=":", label="s = √(2 ln n)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("score std s")
    ax.set_ylabel("mean Σp² of a row")
    ax.set_title("participation of n iid N(0, s²) scores")
    ax.legend(fontsize=8)
    fig.suptitle(f"{figure.title} — {data['trials']} rows per point, bars ± {k:g} se")
    return fig



def draw_vs_keys(figure: Figure):
    """Largest weight, entropy ÷ ln n and ‖J‖_F (or the score spread) versus n, one line per
    rule with ± k se bars, one row of panels per d_k; references dashed: uniform weights 1/n
    and √(n−1)/n, the freezing spread √(2 ln n)."""
    data = figure.data
    k = data["se_k"]
    jac = data["jacobian"]
    rows = len(data["panels"])
    fig, axes = style.new(15.0, 4.4 * rows + 0.6, rows, 3)
    keys = np.asarray(data["keys"], dtype=float)
    grid = np.geomspace(keys.min(), keys.max(), 100)
    for row, panel in zip(axes, data["panels"], strict=True):
        ax_max, ax_ent, ax_third = row
        for i, c in enumerate(panel["curves"]):
            n = np.asarray(c["keys"], dtype=float)
            kw = {"color": style.color(i), "marker": MARKERS[i % len(MARKERS)], "ms": 5,
                  "capsize": 2, "label": f"{c['scaling']}: {c['formula']}",
                  "mfc": "none" if i % 2 else style.color(i)}  # open markers: ties show
            ax_max.errorbar(n, style.array(c["max_prob"]),
                            yerr=k * style.array(c["max_prob_se"]), **kw)
            ax_ent.errorbar(n, style.array(c["entropy_ratio"]),
                            yerr=k * style.array(c["entropy_ratio_se"]), **kw)
            if jac:
                ax_third.errorbar(n, style.array(c["frobenius"]),
                                  yerr=k * style.array(c["frobenius_se"]), **kw)
            else:
                ax_third.plot(n, style.array(c["score_std"]), color=kw["color"],
                              marker=kw["marker"], ms=5, mfc=kw["mfc"])
        ax_max.plot(grid, 1.0 / grid, color="0.4", ls="--", lw=1.0, label="uniform: 1/n")
        if jac:
            ax_third.plot(grid, np.sqrt(grid - 1.0) / grid, color="0.4", ls="--", lw=1.0)
            ax_third.set_ylabel("mean ‖J‖_F of a row")
            ax_third.set_title(f"‖J‖_F, d_k = {panel['dim']} (dashed: uniform √(n−1)/n)")
        else:
            ax_third.plot(grid, np.sqrt(2.0 * np.log(grid)), color="0.4", ls="--", lw=1.0)
            ax_third.set_ylabel("implied score spread s")
            ax_third.set_title(f"score spread, d_k = {panel['dim']} (dashed: freezing √(2 ln n))")
        ax_max.set_ylabel("mean largest weight")
        ax_max.set_title(f"largest weight, d_k = {panel['dim']}")
        ax_ent.set_ylim(0, 1.05)
        ax_ent.set_ylabel("mean entropy ÷ ln n")
        ax_ent.set_title(f"entropy ÷ ln n (1 = uniform), d_k = {panel['dim']}")
        for ax in row:
            ax.set_xscale("log", base=2)
            value_ticks(ax, keys)
            ax.set_xlabel("number of keys n")
        ax_max.set_yscale("log")
        ax_third.set_yscale("log")
        ax_max.legend(fontsize=8)
    left = data["left_out"]
    more = f"; {left} more d_k in the table" if left else ""
    fig.suptitle(f"{figure.title} — {data['trials']} sequences per point, bars ± {k:g} se{more}")
    return fig
