"""Figures of the issue-15 rules: the exact leading-key family versus n, and slopes."""

from __future__ import annotations

import numpy as np

from sdpa_cli.report.figures import style
from sdpa_cli.studies.result import Figure


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
        y = np.asarray([np.nan if v is None else v for v in c["mean_participation"]], dtype=float)
        se = np.asarray([np.nan if v is None else v for v in c["mean_participation_se"]],
                        dtype=float)
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
