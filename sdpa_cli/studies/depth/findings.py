"""The depth study's theory (checked and printed) and its data-decided verdicts on the claims."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdpa_cli.framework.common import plain
from sdpa_cli.framework.result import Check
from sdpa_cli.numerics.attention_grad import frobenius
from sdpa_cli.numerics.bootstrap import median_interval
from sdpa_cli.numerics.depth import Block, backward, forward, output
from sdpa_cli.numerics.depth_trials import draw
from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.studies.depth.spec import DepthSpec

Row = Mapping[str, Any]
COLLAPSED = 0.9
# Identical tokens give exactly 0; rounding leaves ~1e-16 of ‖∂L/∂W_V‖ per operation.
ZERO_BELOW = 1e-10
THEORY_BLOCKS = 3  # blocks of the identical-token check (enough for a block above a block)
THEORY_STREAM = (1 << 31,)  # its own spawn key, apart from the trials' (b,) keys
# A block-0 frozen share this much above another rule's counts as "more saturated".
MORE_FROZEN = 0.05
# W_Q's gradient counts as vanished below this share of the first block's, and W_V's as
# kept above WV_KEPT: a fall of 10× against one of at most 2×.
WQ_VANISHED = 0.1
WV_KEPT = 0.5
SIGN_Z = 2.0  # the paired sign test's |z| beyond which one rule's gradient is the larger


def theory_lines(spec: DepthSpec) -> tuple[str, ...]:
    return (
        "Identical tokens (every row of h equal; Noci et al. 2022's rank collapse): each "
        "score row is constant, the rows of ∂L/∂S and hence its total sum vanish, so "
        "∂L/∂W_Q = ∂L/∂W_K = 0 exactly, for every rule and with the causal mask; ∂L/∂W_V is "
        "not 0. Checked below on this spec's own weights with the input's rows made equal.",
        "Xiong et al. 2020 (Post-LN against Pre-LN): at initialisation the gradient of the "
        "weights near the output does not shrink with L under Post-LN and shrinks like "
        "1/√L under Pre-LN; Post-LN's gradient grows towards the output. Printed beside the "
        "data, not checked: it is derived for their feed-forward sub-layer under their "
        "assumptions, not for W_Q here.",
    )


def theory_checks(spec: DepthSpec) -> list[Check]:
    """∂L/∂W_Q = ∂L/∂W_K = 0 (to rounding) in every block when the input's rows are equal,
    for every rule and norm of the spec, at its smallest d_k."""
    stack = spec.stack()
    rng = block_generator(spec.entropy, THEORY_STREAM)
    L = min(THEORY_BLOCKS, max(spec.layers))
    small = type(stack)(stack.d_model, stack.n, stack.max_dim, L, stack.init_std, stack.mlp,
                        stack.causal)
    d = draw(rng, small, 1)
    x = np.repeat(d.X[:, :1, :], spec.keys, axis=1)
    dk = min(spec.dims)
    blocks = [Block(b.WQ[..., :dk], b.WK[..., :dk], b.WV, b.W1, b.W2) for b in d.blocks]
    checks = []
    for nm in spec.norms:
        worst, worst_rule, top_score = 0.0, "", 1.0
        for rule in spec.scalings:
            with np.errstate(under="ignore"):
                caches = forward(x, blocks, rule, nm, causal=spec.causal)
                _, final = output(caches, nm)
                grads, _ = backward(caches, blocks, d.G, nm, final=final)
            for c in caches:
                seen = c.attn.S[np.isfinite(c.attn.S)]
                top_score = max(top_score, float(np.max(np.abs(seen))) if seen.size else 0.0)
            for g in grads:
                size = float(frobenius(g.dWV, 0))
                top = max(float(frobenius(g.dWQ, 0)), float(frobenius(g.dWK, 0)))
                # d_model 1: LN maps every row to 0 and every gradient is 0; 0 is then exact
                rel = top / size if size > 0 else (0.0 if top == 0 else float("inf"))
                if not rel <= worst:
                    worst, worst_rule = rel, rule.label
        # the zero is a cancelled row sum of scores: its rounding grows with their size
        tol = ZERO_BELOW * top_score
        ok = worst <= tol
        checks.append(Check(
            f"identical tokens {nm}", ok,
            f"‖∂L/∂W_Q‖, ‖∂L/∂W_K‖ ≤ {worst:.1e}·‖∂L/∂W_V‖ over {L} blocks and every rule "
            f"(theory: 0; pass ≤ {tol:.1e} = {ZERO_BELOW:g} × max(1, largest |score|))"
            + (f"; worst {worst_rule}" if not ok else "")))
    return checks


def expect() -> tuple[str, ...]:
    return (
        "The documents (001): saturated attention in the early blocks starves the gradient "
        "of a deep stack, and ÷√d_k prevents it.",
        "Rank collapse (Dong et al. 2021, Noci et al. 2022): with depth the tokens become "
        "alike, and attention over alike tokens passes little gradient to W_Q and W_K, "
        "scaled or not; Pre-LN's residual stream keeps them apart.",
    )


def _deepest(spec: DepthSpec, summary: Sequence[Row]) -> list[Row]:
    L = max(spec.layers)
    return [s for s in summary if s["layers"] == L]


def _span(values: Sequence[float | None], digits: str = ".3f") -> str:
    v = [x for x in values if x is not None]
    if not v:
        return "n/a"
    lo, hi = min(v), max(v)
    return f"{lo:{digits}}" if lo == hi else f"{lo:{digits}}–{hi:{digits}}"


def verdicts(spec: DepthSpec, rows: Sequence[Row], summary: Sequence[Row],
             first: Mapping[tuple[str, int], Mapping[str, np.ndarray]], seed: int = 0
             ) -> tuple[str, ...]:
    """Plain sentences decided from the data: collapse and the W_Q ratio per norm, the
    saturated-first-block comparison per (norm, d_k), then the verdict on each account.
    `first[(norm, d_k)][rule]` is block 0's per-trial values in the deepest stack (run.py's
    _first_blocks); `seed` fixes the bootstrap intervals."""
    L = max(spec.layers)
    out: list[str] = []
    collapse_by_norm: dict[str, list[Row]] = {}  # norm → its deepest stacks
    starve: list[Bottleneck] = []
    name = {"post": "Post-LN", "pre": "Pre-LN"}
    for nm in spec.norms:
        mine = [s for s in _deepest(spec, summary) if s["norm"] == nm]
        cos = [s["last_cosine"] for s in mine]
        falls = [s for s in mine if _falls(s)]
        collapsed = all(_collapsed(s) for s in mine)
        collapse_by_norm[nm] = mine
        out.append(
            f"{name[nm]}, L = {L}: after the last block the tokens' mean cosine is "
            f"{_span(cos)} over every d_k and rule ("
            + ("collapsed" if collapsed else "not all collapsed") + f" at ≥ {COLLAPSED:g}); "
            f"‖∂L/∂W_Q‖ last/first block {_span([s['wq_ratio'] for s in mine], '.3g')} "
            f"(means; medians {_span([s['median_ratio'] for s in mine], '.3g')}), below 1 by "
            f"more than 2 se in {len(falls)} of {len(mine)} stacks.")
        if L < 2:
            continue
        wv = _wv_ratios(rows, nm, L)
        if wv:
            by_rule = "; ".join(f"{s.label} {_span([wv[(d, s.label)] for d in spec.dims], '.3g')}"
                                for s in spec.scalings)
            kept = [f"{r['scaling']} at d_k = {r['dim']}" for r in mine
                    if _falls(r) and r["wq_ratio"] + 2 * r["wq_ratio_se"] < WQ_VANISHED
                    and (wv[(r["dim"], r["scaling"])] or 0.0) >= WV_KEPT]
            out.append(
                f"{name[nm]}, L = {L}: ‖∂L/∂W_V‖ last/first block (means) {by_rule}. "
                + (f"Where W_V keeps at least {WV_KEPT:g} of its gradient while W_Q's falls "
                   f"below {WQ_VANISHED:g} ({', '.join(kept)}), W_Q is starved by the "
                   "tokens' likeness, not by a gradient vanishing as a whole." if kept else
                   "In no stack does W_V keep its gradient while W_Q's vanishes."))
        for d in spec.dims:
            line = _saturated_first_block(rows, first.get((nm, d), {}), nm, d, L, name,
                                          seed + d)
            if line is not None:
                starve.append(line[0])
                out.append(line[1])
        if falls and len(falls) == len(mine) and not collapsed:
            out.append(f"{name[nm]}: the gradient on W_Q falls towards the output in every "
                       "stack although the tokens have not all collapsed: something besides "
                       "collapse shrinks it there.")
    out.append(_claim(starve))
    out.append(_collapse(spec, collapse_by_norm, name))
    return tuple(out)


def _wv_ratios(rows: Sequence[Row], nm: str, L: int) -> dict[tuple[int, str], float | None]:
    """(d_k, rule) → mean ‖∂L/∂W_V‖ at the last block ÷ at the first, deepest stacks."""
    out: dict[tuple[int, str], float | None] = {}
    firsts = [r for r in rows if r["norm"] == nm and r["layers"] == L and r["layer"] == 0]
    for f in firsts:
        last = next(r for r in rows if r["norm"] == nm and r["layers"] == L
                    and r["layer"] == L - 1 and r["dim"] == f["dim"]
                    and r["scaling"] == f["scaling"])
        a, b = last["grad_wv_mean"], f["grad_wv_mean"]
        out[(f["dim"], f["scaling"])] = a / b if a is not None and b else None
    return out


@dataclass(frozen=True)
class Bottleneck:
    """Block 0 of the rule that saturates it most, against the rule that saturates it least."""

    less: bool  # passes less gradient through its softmax (paired sign test)
    passes: float | None  # its softmax_pass ÷ the other's
    # the gradient reaching it, ‖∂L/∂W_V‖, ÷ the other's: the median over the paired trials
    # (heavy-tailed: a ratio of means moves with one draw) and its 95% bootstrap interval
    arrives: float | None
    arrives_lo: float | None = None
    arrives_hi: float | None = None


def _saturated_first_block(rows: Sequence[Row], per_trial: Mapping[str, np.ndarray], nm: str,
                           d: int, L: int, name: dict[str, str], seed: int = 0
                           ) -> tuple[Bottleneck, str] | None:
    """Does the rule that freezes most of block 0's rows pass less gradient through block 0's
    softmax than the rule that freezes fewest? Like with like: each trial's ‖∂L/∂W_Q‖ with
    the rule's own factor divided out, per unit of the gradient arriving at the block
    (‖∂L/∂W_V‖); a paired sign test over the trials (common random numbers): the share of
    trials where it passes less, against ½ in units of √(¼/trials)."""
    here = [r for r in rows if r["norm"] == nm and r["dim"] == d and r["layers"] == L
            and r["layer"] == 0 and r["scaling"] in per_trial]
    if len(here) < 2:
        return None
    most = max(here, key=lambda r: r["frozen_share"])
    least = min(here, key=lambda r: r["frozen_share"])
    if most["frozen_share"] - least["frozen_share"] < MORE_FROZEN:
        return None
    a, b = per_trial[most["scaling"]][0], per_trial[least["scaling"]][0]
    share = float(np.mean(a < b))
    z = (share - 0.5) / float(np.sqrt(0.25 / a.size))
    less, more = z > SIGN_Z, z < -SIGN_Z
    pa, pb = most["softmax_pass"], least["softmax_pass"]
    times = f" ({plain(pa / pb)}×)" if pa is not None and pb else ""
    with np.errstate(all="ignore"):
        paired = per_trial[most["scaling"]][1] / per_trial[least["scaling"]][1]
    mid, arrive_lo, arrive_hi = median_interval(paired, seed)
    arrive = mid if np.isfinite(mid) else None
    verdict = (f"it passes less{times}: saturation starves the gradient through its "
               "softmax" if less else
               f"it passes more{times}: saturation does not starve it" if more else
               f"more and less are not distinguishable (|z| ≤ {SIGN_Z:g})")
    if arrive is not None:
        verdict += (f"; the gradient arriving at the block (‖∂L/∂W_V‖) is {plain(arrive)}× "
                    f"{least['scaling']}'s (median of the {paired.size} paired trials' "
                    f"ratios, 95% interval {plain(arrive_lo)}–{plain(arrive_hi)}: a mean of "
                    "these heavy-tailed ratios would move with each extreme trial)")
    return Bottleneck(less, pa / pb if pa is not None and pb else None, arrive,
                      arrive_lo, arrive_hi), (
        f"{name[nm]}, d_k = {d}, block 0: {most['scaling']} freezes "
        f"{most['frozen_share']:.0%} of the rows against {least['frozen_share']:.0%} for "
        f"{least['scaling']}; with each rule's factor divided out, per unit of the gradient "
        f"arriving at the block, the gradient through its softmax (‖∂L/∂W_Q‖ ÷ "
        f"c·‖∂L/∂W_V‖: {plain(pa)} against {plain(pb)}) is smaller in {share:.0%} of the "
        f"paired trials (sign test z = {z:+.1f}): {verdict}.")


def _claim(starve: list[Bottleneck]) -> str:
    """What the comparisons above say of the documents' gradient claims, in measurements, not
    verdicts: the claims table judges them (severe: its bar; blocked: the W_V flow)."""
    head = ("The documents' gradient claims (001), like with like (each rule's factor divided "
            "out): ")
    if not starve:
        return head + ("not tested here: no rule freezes at least "
                       f"{MORE_FROZEN:.0%} more of the first block's rows than another.")
    passes = [b.passes for b in starve if b.passes is not None]
    arrives = [b.arrives for b in starve if b.arrives is not None]
    less = sum(b.less for b in starve)
    text = (f"the more saturated first block passes less gradient through its softmax in "
            f"{less} of {len(starve)} comparisons")
    if passes:
        text += f" ({_span(passes, '.3g')}× the other rule's)"
    if arrives:
        more = sum(a > 1 for a in arrives)
        text += (f", while the gradient reaching it is {_span(arrives, '.3g')}× the other's "
                 "(medians of the paired trials) "
                 f"({'larger' if more == len(arrives) else 'not larger'} in {more} of "
                 f"{len(arrives)}): a bottleneck at the block, not a block on the flow through "
                 "the layers; the claims table says whether it is severe")
    return head + text + "."


def _collapse(spec: DepthSpec, by_norm: dict[str, list[Row]], name: dict[str, str]) -> str:
    """Per norm: in how many of the deepest stacks the tokens collapse (cosine ≥ 0.9 after
    the last block) and W_Q's gradient falls (last/first below 1 by 2 se), and which not."""
    if max(spec.layers) < 2:
        return "Rank collapse is not tested with one block."
    parts = []
    for nm, mine in by_norm.items():
        both = [s for s in mine if _collapsed(s) and _falls(s)]
        if len(both) == len(mine):
            parts.append(f"holds under {name[nm]} in every stack: the tokens become alike "
                         "block by block and the gradient on W_Q falls towards the output, "
                         "under every rule")
            continue
        if not both:
            parts.append(f"does not hold under {name[nm]}: in none of its {len(mine)} stacks "
                         f"do the tokens reach a cosine of {COLLAPSED:g} while W_Q's gradient "
                         "falls")
            continue
        misses = ", ".join(f"{s['scaling']} at d_k = {s['dim']}" for s in mine
                           if s not in both)
        parts.append(f"holds under {name[nm]} in "
                     f"{len(both)} of {len(mine)} stacks (not: {misses}; there the tokens "
                     f"stay below a cosine of {COLLAPSED:g} or W_Q's gradient does not fall)")
    return "The rank-collapse account " + "; it ".join(parts) + "."


def _collapsed(s: Row) -> bool:
    return s["last_cosine"] is not None and s["last_cosine"] >= COLLAPSED


def _falls(s: Row) -> bool:
    return (s["wq_ratio"] is not None and s["wq_ratio_se"] is not None
            and s["wq_ratio"] + 2 * s["wq_ratio_se"] < 1.0)
