"""Figures of the gradients study: each gradient norm versus d_k, and the frozen-row share."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure

PANELS = (("wq", "‖∂L/∂W_Q‖_F"), ("wk", "‖∂L/∂W_K‖_F"), ("wv", "‖∂L/∂W_V‖_F"),
          ("x", "‖∂L/∂X‖_F"))
NAMES = {"wq": "W_Q", "wk": "W_K", "wv": "W_V", "x": "X"}



def _dim_ticks(ax: Axes, dims: list[float]) -> None:
    ax.set_xscale("log")
    ax.set_xticks(dims, [f"{d:g}" for d in dims])
    ax.minorticks_off()
    ax.set_xlim(dims[0] / 1.6, dims[-1] * 1.6)  # one d_k alone sits in the middle


# A rule whose norms span more than this many decades over d_k has collapsed: drawn with
# the others, it stretches the axis until the scaled rules' slopes (÷√d_k against ÷d_k, a
# factor √d_k apart) look flat. Its W_Q and W_K get a row of panels of their own.
COLLAPSE_DECADES = 3.0


def _collapsed(s: dict[str, Any]) -> bool:
    values = np.concatenate([style.array(s[k][m]) for k in ("wq", "wk")
                             for m in ("mean", "median")])
    values = values[np.isfinite(values) & (values > 0)]
    return values.size > 1 and float(np.log10(values.max() / values.min())) > COLLAPSE_DECADES


def _panel(ax: Axes, key: str, label: str, series: list[dict[str, Any]], dims: list[float],
           shown: list[int], handles: list[Any] | None, what: str) -> None:
    """One gradient's norm versus d_k for the rules `shown` (indices into series, so a rule
    keeps its colour in every panel): mean ± 2 se solid, median dashed."""
    slopes: list[str] = []
    for i in shown:
        s, c = series[i], style.color(i)
        x = np.asarray(s["dims"], dtype=float)
        mean, se, med = (style.array(s[key][k]) for k in ("mean", "se", "median"))
        ok = np.isfinite(mean) & (mean > 0)
        # On log axes a bar reaching below zero is drawn down to just above zero.
        low = np.minimum(2.0 * se, mean * 0.999)
        slope = s["slopes"].get(NAMES[key])
        if slope is not None:
            text = f"{slope:.2f}".replace("-0.00", "0.00").replace("-", "−")
            slopes.append(f"{s['scaling']} {text}")
        bars = ax.errorbar(x[ok], mean[ok], yerr=[low[ok], 2.0 * se[ok]], fmt="o-",
                           color=c, ms=4, lw=1.3, capsize=3, label=f"{s['scaling']}: mean")
        good = np.isfinite(med) & (med > 0)
        (line,) = ax.plot(x[good], med[good], ls="--", color=c, lw=1.0, marker="x", ms=4,
                          label=f"{s['scaling']}: median")
        if handles is not None:  # the legend lists each rule's mean, then its median
            handles += [bars, line]
    _dim_ticks(ax, dims)
    ax.set_yscale("log")
    ax.set_xlabel("d_k (log scale)")
    ax.set_ylabel(f"{label} (log scale)")
    # three rules a line: with many rules one line ran off the canvas into the next panel
    rows = [", ".join(slopes[i:i + 3]) for i in range(0, len(slopes), 3)]
    fitted = "\nlog-log slope of the mean: " + ",\n".join(rows) if slopes else ""
    ax.set_title(f"{label} per trial{what}{fitted}", fontsize=9)


def draw_norms(figure: Figure) -> Any:  # a matplotlib Figure
    """Log-log panels, one line per rule: mean ± 2 se (solid, with bars) and the median
    (dashed, same colour); each title gives the rules' fitted slopes. When a rule collapses
    (no scaling at large d_k), W_Q and W_K take two rows: the other rules alone on an axis
    that shows their slopes, then every rule on the axis the collapse needs."""
    series = figure.data["series"]
    dims = sorted({float(d) for s in series for d in s["dims"]})
    every = list(range(len(series)))
    collapsed = [i for i in every if _collapsed(series[i])]
    kept = [i for i in every if i not in collapsed]
    split = bool(collapsed and kept)
    fig, axes = style.new(12.5, 12.0 if split else 8.2, 3 if split else 2, 2)
    handles: list[Any] = []
    rows: list[list[tuple[str, str, list[int], str]]] = []
    if split:
        names = ", ".join(series[i]["scaling"] for i in collapsed)
        rows.append([(k, lab, kept, f" (without {names}: its collapse is drawn below)")
                     for k, lab in PANELS[:2]])
        rows.append([(k, lab, every, f" (every rule: {names} collapses)")
                     for k, lab in PANELS[:2]])
    else:
        rows.append([(k, lab, every, "") for k, lab in PANELS[:2]])
    rows.append([(k, lab, every, "") for k, lab in PANELS[2:]])
    for r, row in enumerate(rows):
        for c, (key, label, shown, what) in enumerate(row):
            legend = r == len(rows) - 1 and c == 0  # the one panel that shows every rule
            _panel(axes[r][c], key, label, series, dims, shown, handles if legend else None,
                   what)
    axes[0][1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      borderaxespad=0.0, fontsize=8)
    fig.suptitle(f"{figure.title}\n{figure.data['sizes']}")
    return fig


def draw_frozen(figure: Figure) -> Any:  # a matplotlib Figure
    """Share of score rows whose softmax Jacobian is below the threshold, ± 2 se."""
    series = figure.data["series"]
    dims = sorted({float(d) for s in series for d in s["dims"]})
    fig, axes = style.new(8.6, 4.8)
    ax = axes[0][0]
    for i, s in enumerate(series):
        x = np.asarray(s["dims"], dtype=float)
        # in percent, as the table and the findings show the share
        share, se = 100.0 * style.array(s["frozen"]), 100.0 * style.array(s["frozen_se"])
        ax.errorbar(x, share, yerr=2.0 * se, fmt="o-", color=style.color(i), ms=4, lw=1.3,
                    capsize=3, label=s["scaling"])
    _dim_ticks(ax, dims)
    ax.set_ylim(-3, 103)
    ax.set_xlabel("d_k (log scale)")
    ax.set_ylabel(f"% of rows with ‖J‖_F < {style.num(figure.data['below'])}")
    ax.set_title(f"{figure.title}\n{figure.data['sizes']}", fontsize=10)
    style.legend_outside(ax)
    return fig
