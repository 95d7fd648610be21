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
