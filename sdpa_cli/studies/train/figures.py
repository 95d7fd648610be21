"""Figures of the train study: loss curves, query-row entropy and largest |score|, loss vs lr."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.result import Figure
from sdpa_cli.studies.train.spec import optimiser_name

T = TypeVar("T")
LOG_SPAN = 20.0  # a log axis only when the values span more than this factor



def _panels(data: Mapping[str, Any], rows: Sequence[T], opt: Callable[[T], str] = str
            ) -> tuple[Any, Iterator[tuple[T, int, Any]]]:
    """A figure of a row of panels per item of `rows` and a column per d_k, and its panels as
    (item, d_k, axes) to draw in: each is titled by its optimiser `opt(item)` and d_k once
    drawn, and a row's legend is placed when its last panel is."""
    dims = data["dims"]
    # at least 8 inches: with one d_k (the depth specs) the two-line title ran off the canvas
    width = max(3.3 * len(dims) + 2.2, 8.0)
    fig, axes = style.new(width, 2.7 * len(rows) + 0.9, len(rows), len(dims))

    def panels() -> Iterator[tuple[T, int, Any]]:
        for r, row in enumerate(rows):
            for col, dim in enumerate(dims):
                yield row, dim, axes[r][col]
                axes[r][col].set_title(f"{optimiser_name(opt(row))}, d_k = {dim}", fontsize=10)
            style.legend_outside(axes[r][-1])

    return fig, panels()


def _curve(data: Mapping[str, Any], dim: int, rule: str, opt: str) -> dict[str, Any] | None:
    for c in data["curves"]:
        if (c["dim"], c["scaling"], c["optimiser"]) == (dim, rule, opt):
            return c
    return None


def _log_if_wide(ax, values: np.ndarray, what: str) -> str:
    """Set a log y-axis when positive values span more than LOG_SPAN; the label says which."""
    v = values[np.isfinite(values) & (values > 0)]
    if v.size and v.max() / v.min() > LOG_SPAN:
        ax.set_yscale("log")
        return f"{what} (log scale)"
    return what


def _label(data: Mapping[str, Any], i: int) -> str:
    rule, formula = data["scalings"][i], data["formulas"][i]
    return "unscaled (q·k)" if rule == "none" else formula


def _bands(ax: Any, data: Mapping[str, Any], dim: int, opt: str, what: str, alpha: float,
           label: Callable[[int, dict[str, Any]], str]) -> list[float]:
    """Each rule's median of `what` over the steps, in the band of its seeds' range; every
    value drawn (for the axis's scale)."""
    seen: list[float] = []
    for i, rule in enumerate(data["scalings"]):
        c = _curve(data, dim, rule, opt)
        if c is None:
            continue
        steps = np.asarray(c["steps"], dtype=float)
        med, lo, hi = (style.array(c[f"{what}{end}"]) for end in ("", "_lo", "_hi"))
        ax.fill_between(steps, lo, hi, color=style.color(i), alpha=alpha, lw=0)
        ax.plot(steps, med, color=style.color(i), label=label(i, c))
        seen.extend([*med, *lo, *hi])
    return seen


def draw_loss_curves(figure: Figure):
    data = figure.data
    fig, panels = _panels(data, data["optimisers"])
    for opt, dim, ax in panels:
        seen = _bands(ax, data, dim, opt, "loss", 0.18,
                      lambda i, c: f"{_label(data, i)}, lr {style.num(c['lr'])}")
        ax.axhline(data["chance"], color="0.4", ls="--", lw=0.9, label="chance ln V")
        ax.set_ylabel(_log_if_wide(ax, np.asarray([*seen, data["chance"]]),
                                   "training loss (nats)"))
        ax.set_xlabel("step")
    fig.suptitle(f"{figure.title}\nline: median of {data['seeds']} seeds; band: their range; "
                 f"each point a mean over {data['log_every']} steps of {data['batch']} "
                 "sequences", fontsize=10)
    return fig


def draw_traces(figure: Figure):
    data = figure.data
    rows = [(opt, what) for opt in data["optimisers"] for what in ("entropy", "max_score")]
    fig, panels = _panels(data, rows, lambda row: row[0])
    ln_n = float(np.log(data["keys"]))
    for (opt, what), dim, ax in panels:
        seen = _bands(ax, data, dim, opt, what, 0.15, lambda i, c: _label(data, i))
        if what == "entropy":
            ax.axhline(ln_n, color="0.4", ls="--", lw=0.9, label="uniform: ln n")
            ax.set_ylabel("query-row entropy (nats)")
            ax.set_ylim(bottom=0)
        else:
            ax.set_ylabel(_log_if_wide(ax, np.asarray(seen), "largest |score|"))
        ax.set_xlabel("step")
    fig.suptitle(f"{figure.title}\nn = {data['keys']} rows per sequence; median and range "
                 f"over {data['seeds']} seeds at each rule's best rate", fontsize=10)
    return fig


def draw_loss_vs_lr(figure: Figure):
    data = figure.data
    fig, panels = _panels(data, data["optimisers"])
    for opt, dim, ax in panels:
        for i, rule in enumerate(data["scalings"]):
            pts = sorted((p for p in data["points"] if (p["dim"], p["scaling"],
                          p["optimiser"]) == (dim, rule, opt)), key=lambda p: p["lr"])
            if not pts:
                continue
            lr = style.array([p["lr"] for p in pts])
            med = style.array([p["final_loss_median"] for p in pts])
            lo = style.array([p["final_loss_lo"] for p in pts])
            hi = style.array([p["final_loss_hi"] for p in pts])
            ax.errorbar(lr, med, yerr=[np.clip(med - lo, 0, None),
                                       np.clip(hi - med, 0, None)],
                        color=style.color(i), marker="o", ms=4, capsize=2,
                        label=_label(data, i))
        ax.axhline(data["chance"], color="0.4", ls="--", lw=0.9, label="chance ln V")
        ax.set_xscale("log")
        ax.set_xlabel("learning rate (log scale)")
        ax.set_ylabel("final loss (nats)")
        ax.set_ylim(bottom=0)
    fig.suptitle(f"{figure.title}\nmedian and range over {data['seeds']} seeds; a missing "
                 "point diverged", fontsize=10)
    return fig
