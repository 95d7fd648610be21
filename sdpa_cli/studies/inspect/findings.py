"""What the inspect rows say, in plain sentences, and the per-layer summary rows."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sdpa_cli.framework.common import plain
from sdpa_cli.framework.result import as_row
from sdpa_cli.studies.inspect.heads import SINK
from sdpa_cli.studies.inspect.rows import LayerRow
from sdpa_cli.studies.inspect.spec import InspectSpec

Row = Mapping[str, Any]
SATURATED = 0.5  # a head is saturated when more than half its rows are frozen
DOCUMENTED_RANGE = (8.0, 11.0)  # 001's "standard deviations of 8-11" for unscaled scores
SELECTORS = ("weights", "seq_len", "scaling", "layer", "head")


def _median(field: str) -> Callable[[Sequence[Row]], float | None]:
    def get(rows: Sequence[Row]) -> float | None:
        vals = [r[field] for r in rows if r[field] is not None]
        return float(np.median(vals)) if vals else None

    return get


# Quantities over the heads a documented entry's row selects (audit lookups).
SUMMARIES: dict[str, Callable[[Sequence[Row]], float | None]] = {
    **{f"median_{f}": _median(f) for f in ("score_std", "score_std_raw", "max_weight",
                                            "entropy_ratio", "frozen_share",
                                            "first_token_share", "score_std_within_raw",
                                            "score_std_within", "between_share")},
    "saturated_heads": lambda rows: float(sum(r["frozen_share"] > SATURATED for r in rows)),
    "saturated_share": lambda rows: float(np.mean([r["frozen_share"] > SATURATED
                                                   for r in rows])),
    "in_documented_range": lambda rows: float(np.mean(
        [DOCUMENTED_RANGE[0] <= r["score_std_raw"] <= DOCUMENTED_RANGE[1] for r in rows])),
}


def summary_quantity(name: str) -> Callable[[Sequence[Row]], float | None] | None:
    return SUMMARIES.get(name)


def _groups(rows: Sequence[Row], *keys: str) -> dict[tuple[Any, ...], list[Row]]:
    out: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def layer_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    out = []
    for (w, n, layer, rule), group in _groups(rows, "weights", "seq_len", "layer",
                                              "scaling").items():
        std = [r["score_std"] for r in group]
        ent = [r["entropy_ratio"] for r in group if r["entropy_ratio"] is not None]
        out.append(as_row(LayerRow(
            weights=w, seq_len=n, layer=layer, scaling=rule, heads=len(group),
            score_std_median=float(np.median(std)), score_std_min=float(min(std)),
            score_std_max=float(max(std)),
            score_std_raw_median=float(np.median([r["score_std_raw"] for r in group])),
            max_weight_median=float(np.median([r["max_weight"] for r in group])),
            entropy_ratio_median=float(np.median(ent)) if ent else None,
            frozen_share_median=float(np.median([r["frozen_share"] for r in group])),
            saturated=sum(r["frozen_share"] > SATURATED for r in group),
            first_token_median=float(np.median([r["first_token_share"] for r in group])),
            sinks=sum(r["first_token_share"] > SINK for r in group),
            score_std_within_raw_median=_median("score_std_within_raw")(group))))
    return out


def _where(r: Row) -> str:
    return f"layer {r['layer']} head {r['head']}"


def findings(spec: InspectSpec, rows: Sequence[Row], shape: tuple[int, int, int, int]
             ) -> tuple[str, ...]:
    """Per length: saturated heads with the model's rule and without; whether the raw std
    falls in the documents' 8–11 and where; init against trained."""
    out = []
    d = shape[3]
    groups = _groups(rows, "weights", "seq_len", "scaling")
    for n in spec.seq_len:
        model = groups.get(("trained", n, "model"), [])
        if not model:
            continue
        total = len(model)
        worst = max(model, key=lambda r: (r["frozen_share"], r["max_weight"]))
        line = (f"n = {n}: {_saturated(model)} of {total} heads saturated with the model's "
                f"rule; the most frozen is {_where(worst)} (frozen {worst['frozen_share']:.0%}, "
                f"largest weight {worst['max_weight']:.3f})")
        none = groups.get(("trained", n, "none"), [])
        if none:
            line += (f"; without scaling {_saturated(none)} of {total}, and the median head "
                     f"freezes {_median_frozen(none)} of its rows")
        out.append(line + f" (saturated: over half the rows frozen, ‖J‖_F < 1e-3; in "
                   f"brackets the same with the bar anywhere in {_BARS}){_fragile(model, none)}.")
        out.append(_documented_std(model, n, d))
        first = float(np.median([r["first_token_share"] for r in model]))
        out.append(f"n = {n}: the first token takes {first:.0%} of the attention in the median "
                   "head.")
        init = groups.get(("init", n, "model"), [])
        if init:
            r_init = float(np.median([r["score_std_raw"] for r in init]))
            r_tr = float(np.median([r["score_std_raw"] for r in model]))
            m_init = float(np.median([r["max_weight"] for r in init]))
            m_tr = float(np.median([r["max_weight"] for r in model]))
            e_init = float(np.median([r["entropy_ratio"] or 0.0 for r in init]))
            init_none = groups.get(("init", n, "none"), [])
            m_none = float(np.median([r["max_weight"] for r in init_none])) if init_none else 0
            unscaled = f"; without scaling {m_none:.3f}" if init_none else ""
            out.append(f"n = {n}: at initialisation the raw q·k std is {plain(r_init)} in the "
                       f"median head (trained: {plain(r_tr)}); largest weight "
                       f"{m_init:.3f} against {m_tr:.3f} trained{unscaled} (uniform: "
                       f"{1 / n:.3f}); entropy ratio {e_init:.3f} (1 is uniform).")
    return tuple(out)


_BARS = "1e-4…1e-2"
FIELDS_BY_BAR = ("frozen_share_low", "frozen_share", "frozen_share_high")  # 1e-4, 1e-3, 1e-2


def _saturated(rows: Sequence[Row]) -> str:
    """'2 (1–5)': heads with over half their rows frozen at ‖J‖_F < 1e-3, and the span the
    count takes with the bar anywhere in 1e-4…1e-2 (a looser bar freezes more)."""
    at = [sum(r[f] > SATURATED for r in rows) for f in FIELDS_BY_BAR]
    return str(at[1]) if at[0] == at[2] else f"{at[1]} ({at[0]}–{at[2]})"


def _median_frozen(rows: Sequence[Row]) -> str:
    at = [float(np.median([r[f] for r in rows])) for f in FIELDS_BY_BAR]
    return f"{at[1]:.0%}" if f"{at[0]:.0%}" == f"{at[2]:.0%}" else \
        f"{at[1]:.0%} ({at[0]:.0%}–{at[2]:.0%})"


def _fragile(model: Sequence[Row], none: Sequence[Row]) -> str:
    """Whether the median head counts as saturated flips with a bar inside 1e-4…1e-2."""
    flips = [name for name, rows in (("the model's rule", model), ("no scaling", none))
             if rows and len({float(np.median([r[f] for r in rows])) > SATURATED
                              for f in FIELDS_BY_BAR}) > 1]
    return ("; fragile: whether the median head is saturated flips inside that range under "
            + " and ".join(flips) if flips else "")


def _documented_std(model: Sequence[Row], n: int, d: int) -> str:
    """The documents' 8–11 is √64…√128: judged as written for a model with d_k in 64–128, on
    the spread within rows (what the softmax sees: a constant added to a row changes none of
    its weights), the pooled spread beside; at another d_k their own argument
    (unit-variance q and k: std √d_k) is what applies."""
    within = np.array([_within(r) for r in model])
    pooled = np.array([r["score_std_raw"] for r in model])
    med, med_p = float(np.median(within)), float(np.median(pooled))
    spread = (f"within rows median {plain(med)}, range {plain(float(within.min()))}–"
              f"{plain(float(within.max()))}; pooled over rows (their offsets counted) median "
              f"{plain(med_p)}")
    lo, hi = DOCUMENTED_RANGE
    if 64 <= d <= 128:
        inside = [r for r in model if lo <= _within(r) <= hi]
        pooled_in = sum(lo <= r["score_std_raw"] <= hi for r in model)
        named = ", ".join(_where(r) for r in inside[:4]) + (", …" if len(inside) > 4 else "")
        verdict = "holds" if lo <= med <= hi else "does not hold"
        verdict_p = "holds" if lo <= med_p <= hi else "does not"
        return (f"n = {n}: raw q·k std (d_k = {d}) {spread}; the documents' 8–11 (for d_k "
                f"64–128, as here) {verdict} for the median head within rows (pooled: "
                f"{verdict_p}); {len(inside)} of {len(model)} heads fall in it within rows"
                + (f" ({named})" if inside else "") + f", {pooled_in} pooled.")
    root = math.sqrt(d)
    return (f"n = {n}: raw q·k std (d_k = {d}) {spread}; the documents' 8–11 is for d_k "
            f"64–128 (√64 to √128), so it is not judged here: at d_k = {d} their argument "
            f"(unit-variance q and k) gives √{d} = {plain(root)}, and the median head's std "
            f"within rows is {plain(med / root)}× that.")


def _within(r: Row) -> float:
    """A head's raw std within rows (its pooled std when no row sees two keys)."""
    value = r.get("score_std_within_raw")
    return float(value if value is not None else r["score_std_raw"])


BETWEEN = 0.9  # a head whose rows' offsets carry most of its pooled variance


def within_findings(rows: Sequence[Row], seq_lens: Sequence[int], d: int) -> tuple[str, ...]:
    """Per length, the model's rule: the share of the pooled raw variance that lies between
    rows, and q·k split into ‖q‖ ‖k‖ cos θ beside unit-variance random vectors in d_k dims."""
    out = []
    for n in seq_lens:
        model = [r for r in rows if r["weights"] == "trained" and r["seq_len"] == n
                 and r["scaling"] == "model" and r["between_share"] is not None]
        if not model:
            continue
        between = [r["between_share"] for r in model]
        most = sum(b > BETWEEN for b in between)
        gap = [r["top_gap"] for r in model if r["top_gap"] is not None]
        gap_line = (f"; the two largest scores of a row (the model's rule) lie "
                    f"{plain(float(np.median(gap)))} apart in the median head (weights "
                    f"e^{plain(float(np.median(gap)))} to 1)" if gap else "")
        out.append(f"n = {n}: {float(np.median(between)):.0%} of the pooled raw variance lies "
                   f"between rows' means in the median head (the softmax ignores it), over "
                   f"{BETWEEN:.0%} in {most} of {len(model)} heads{gap_line}.")
        root = math.sqrt(d)
        q = float(np.median([r["q_norm"] for r in model])) / root
        k = float(np.median([r["k_norm"] for r in model])) / root
        c = float(np.median([r["cos_std"] for r in model])) * root
        grows = max((("‖q‖", q), ("‖k‖", k), ("cos θ", c)), key=lambda t: t[1])[0]
        out.append(f"n = {n}: q·k = ‖q‖ ‖k‖ cos θ; against unit-variance random vectors in "
                   f"d_k = {d} dimensions (‖q‖ = ‖k‖ = √{d}, cos θ std 1/√{d}) the median head "
                   f"has ‖q‖ ×{plain(q)}, ‖k‖ ×{plain(k)} and cos θ spread ×{plain(c)}: "
                   f"{grows} carries most of the excess.")
    return tuple(out)


def expect() -> tuple[str, ...]:
    return ("The documents: unscaled scores of BERT/GPT-sized heads (d_k 64–128) have std 8–11 "
            "and saturate softmax; ÷√d_k brings them to about 1.",
            "Real heads are not independent random vectors: trained q and k align, so their "
            "spread differs from head to head.")


def pattern(peaks: Any, layer: int, head: int) -> str:
    """Where one head's rows put their largest weight (each row's key index of it), on the
    pictured sequence: the previous token, the token itself, or the first token, whichever
    is most common."""
    top = np.asarray(peaks)
    rows = top.shape[0]
    idx = np.arange(rows)
    shares = {"the previous token": float(np.mean(top[1:] == idx[1:] - 1)) if rows > 1 else 0.0,
              "the token itself": float(np.mean(top == idx)),
              "the first token": float(np.mean(top == 0))}
    what, share = max(shares.items(), key=lambda kv: kv[1])
    return (f"The most saturated head (layer {layer} head {head}) puts its largest weight on "
            f"{what} in {share:.0%} of the rows of the pictured sequence.")
