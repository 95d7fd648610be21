"""What the sinks, head types and weight-only bounds say, in plain sentences (apart from the
saturation and 8–11 sentences in findings.py), and the per-(n, rule) summary rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sdpa_cli.framework.common import plain
from sdpa_cli.framework.result import Check, as_row
from sdpa_cli.studies.inspect.heads import SINK, Induction, has_type
from sdpa_cli.studies.inspect.measure import PRE
from sdpa_cli.studies.inspect.rows import SummaryRow

Row = Mapping[str, Any]
SATURATED = 0.5  # as findings.SATURATED: more than half the rows frozen
TYPES = ("sink", "sink-later", "previous-token", "induction")
# float32 forwards: a score may pass the bound by rounding (relative 1e-7 of a few tens)
FLOOR_SLACK = 1e-6


def _median(values: Sequence[Any]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def summary_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r["weights"], r["seq_len"], r["scaling"]), []).append(r)
    return [as_row(SummaryRow(
        weights=w, seq_len=n, scaling=rule, heads=len(g),
        saturated=sum(r["frozen_share"] > SATURATED for r in g),
        sinks=sum(r["first_token_share"] > SINK for r in g),
        sinks_later=sum(r["sink_other"] > SINK for r in g),
        previous_token=sum(has_type(r, "previous-token") for r in g),
        induction=sum(has_type(r, "induction") for r in g),
        score_std_raw_median=float(np.median([r["score_std_raw"] for r in g])),
        entropy_ratio_median=_median([r["entropy_ratio"] for r in g]),
        entropy_bound_median=_median([r["entropy_bound"] for r in g]),
        score_std_within_raw_median=_median([r["score_std_within_raw"] for r in g]),
        sink_rate=float(np.mean([r["sink_rate"] for r in g]))))
        for (w, n, rule), g in groups.items()]


def _types(group: Sequence[Row]) -> str:
    counts = {t: sum(has_type(r, t) for r in group) for t in TYPES}
    other = sum(r["head_type"] == "other" for r in group)
    several = sum("+" in str(r["head_type"]) for r in group)
    return (f"sinks {counts['sink']} on the first token, {counts['sink-later']} on a later "
            f"one; previous-token heads {counts['previous-token']}; induction heads "
            f"{counts['induction']}; none of these {other}; types overlap: {several} "
            + ("head is" if several == 1 else "heads are") + " of two or more")


def head_findings(rows: Sequence[Row], seq_lens: Sequence[int], induction: Induction | None
                  ) -> tuple[str, ...]:
    """Per length, trained weights: the heads of each type with the model's rule, and the
    types of the heads that saturate with it and without scaling."""
    out = []
    for i, n in enumerate(seq_lens):
        model = [r for r in rows if r["weights"] == "trained" and r["seq_len"] == n
                 and r["scaling"] == "model"]
        if not model:
            continue
        how = "" if i else (
            f" (a sink: mean weight above {SINK} on one position, Gu et al. 2024; a type: "
            f"more than {SINK} of the attention on TransformerLens's pattern, induction on "
            "repeated random tokens)" if induction is not None else
            f" (a sink: mean weight above {SINK} on one position, Gu et al. 2024; no "
            "induction score: induction_sequences is 0)")
        out.append(f"n = {n}, the model's rule, {len(model)} heads by type: "
                   f"{_types(model)}{how}.")
        kind = {(r["layer"], r["head"]): r for r in model}
        for rule, words in (("model", "with the model's rule"), ("none", "without scaling")):
            sat = [r for r in rows if r["weights"] == "trained" and r["seq_len"] == n
                   and r["scaling"] == rule and r["frozen_share"] > SATURATED]
            typed = [kind[(r["layer"], r["head"])] for r in sat]
            if len(typed) == 1:
                r = typed[0]
                out.append(f"n = {n}: the one head saturated {words} (layer {r['layer']} "
                           f"head {r['head']}) is of type {r['head_type']} with the model's "
                           "rule.")
            elif typed:
                out.append(f"n = {n}: the {len(sat)} heads saturated {words}, by their type "
                           f"with the model's rule: {_types(typed)}.")
    return tuple(out)


def bound_findings(rows: Sequence[Row], seq_lens: Sequence[int], d: int) -> tuple[str, ...]:
    """The weight-only diagnostics at the longest length: the spectral norm, the score bound
    and the entropy floor beside the measured entropy."""
    n = max(seq_lens)
    model = [r for r in rows if r["weights"] == "trained" and r["seq_len"] == n
             and r["scaling"] == "model" and r["logit_bound"] is not None]
    if not model:
        return ()
    norm = np.array([r["qk_spectral"] for r in model])
    bound = float(np.median([r["logit_bound"] for r in model]))
    seen = float(np.median([r["score_max"] for r in model]))
    floor = _median([r["entropy_bound"] for r in model])
    measured = _median([r["entropy_ratio"] for r in model])
    loose = sum((r["entropy_bound"] or 0.0) < 0.01 for r in model)
    if loose == len(model):  # says nothing for any head: the numbers stay in table.md
        return ()
    return (f"n = {n}, from the weights alone: ‖W_Q W_Kᵀ‖₂/√d_k (d_k = {d}, the norm's gain "
            f"folded in) median {plain(float(np.median(norm)))}, range "
            f"{plain(float(norm.min()))}–{plain(float(norm.max()))}; with the model's rule no "
            f"score can pass {plain(bound)} in the median head (the largest measured: "
            f"{plain(seen)}), so its entropy ratio is at least {floor or 0.0:.3f} (measured "
            f"{measured or 0.0:.3f}); the floor says nothing (below 0.01) for {loose} of "
            f"{len(model)} heads.",)


def prenorm_findings(rows: Sequence[Row], seq_lens: Sequence[int]) -> tuple[str, ...]:
    """A QK-norm model: the raw scores before the norm beside after, and how many heads the
    model's scale alone would leave saturated without the norm."""
    out = []
    for n in seq_lens:
        def pick(label: str, n: int = n) -> list[Row]:
            return [r for r in rows if r["weights"] == "trained" and r["seq_len"] == n
                    and r["scaling"] == label]
        before, after = pick(PRE + "model"), pick("model")
        if not before or not after:
            continue
        raw_b = float(np.median([r["score_std_raw"] for r in before]))
        raw_a = float(np.median([r["score_std_raw"] for r in after]))
        sat_b = sum(r["frozen_share"] > SATURATED for r in before)
        sat_a = sum(r["frozen_share"] > SATURATED for r in after)
        out.append(f"n = {n}: before the QK-norm the raw q·k std is {plain(raw_b)} in the "
                   f"median head (after it: {plain(raw_a)}); the model's scale on the "
                   f"un-normalised q and k would saturate {sat_b} of {len(before)} heads "
                   f"(with the norm: {sat_a}).")
    return tuple(out)


def floor_check(rows: Sequence[Row]) -> Check | None:
    """Every head's measured scores inside the bound its weights imply, and its measured
    entropy ratio at or above the floor that bound implies."""
    held = [r for r in rows if r["logit_bound"] is not None]
    if not held:
        return None
    bad = sum(r["score_max"] > r["logit_bound"] * (1 + FLOOR_SLACK)
              or (r["entropy_ratio"] is not None and r["entropy_bound"] is not None
                  and r["entropy_ratio"] < r["entropy_bound"] - FLOOR_SLACK) for r in held)
    return Check("weight-only bounds", bad == 0,
                 f"{len(held) - bad} of {len(held)} head rows measure every |score| within the "
                 "bound their W_Q, W_K and norm imply, and an entropy ratio at or above its "
                 "floor")


def _token(label: str, bos: str | None) -> str:
    """A token as a sentence names it: the BOS by that name (its text, <bos> or <s>, would
    read as markup in a page), others quoted."""
    return "BOS" if bos is not None and label == bos else repr(label)


def sink_findings(rows: Sequence[Row], seq_lens: Sequence[int],
                  first: Mapping[int, Sequence[str]], bos: str | None) -> tuple[str, ...]:
    """Per length, the model's rule: Gu et al.'s sink rate (threshold α_0 per sequence, then
    average) beside the rate of α_0 averaged first, α_0's spread across sequences, the token
    at position 0, and the sink heads' value there beside their later values."""
    out = []
    for n in seq_lens:
        model = [r for r in rows if r["weights"] == "trained" and r["seq_len"] == n
                 and r["scaling"] == "model"]
        if not model:
            continue
        rate = float(np.mean([r["sink_rate"] for r in model]))
        once = float(np.mean([r["first_token_share"] > SINK for r in model]))
        spread = [r["first_token_std"] for r in model]
        tokens = first.get(n, [])
        kinds = sorted(set(tokens))
        held = (f"{_token(kinds[0], bos)} in every sequence" if len(kinds) == 1 else
                f"{len(kinds)} different tokens ("
                + ", ".join(_token(t, bos) for t in kinds[:3])
                + (", …" if len(kinds) > 3 else "") + ")")
        where = "the tokenizer puts BOS there" if bos else "no BOS: the text's own first token"
        line = (f"n = {n}: Gu et al.'s sink rate (α_0 > {SINK} in each sequence, then the mean) "
                f"is {rate:.0%} of heads ({once:.0%} with α_0 averaged over sequences first); "
                f"α_0 varies across sequences by a std of {plain(float(np.median(spread)))} in "
                f"the median head (at most {plain(float(max(spread)))}); position 0 holds "
                f"{held} ({where})")
        sinks = [r for r in model if r["first_token_share"] > SINK
                 and r["sink_value_norm"] is not None and r["value_norm"]]
        if sinks:
            ratio = float(np.median([r["sink_value_norm"] / r["value_norm"] for r in sinks]))
            line += (f"; in the median sink head the value at position 0 is {plain(ratio)}× as "
                     "long as at later positions (a short one: the weight parked there adds "
                     "little)")
        out.append(line + ".")
    return tuple(out)


def residual_findings(residual: Sequence[Row], seq_lens: Sequence[int], bos: str | None
                      ) -> tuple[str, ...]:
    """Massive activations (Sun et al. 2024): the largest residual activation per length,
    where it sits, and how many layers' largest sit at position 0."""
    out = []
    for n in seq_lens:
        layers = [r for r in residual if r["weights"] == "trained" and r["seq_len"] == n]
        if not layers:
            continue
        top = max(layers, key=lambda r: r["largest"])
        at_first = sum(r["position"] == 0 for r in layers)
        out.append(f"n = {n}: the largest residual activation is {plain(top['largest'])} "
                   f"after layer {top['layer']} (position {top['position']}, token "
                   f"{_token(top['token'], bos)}, channel {top['channel']}), "
                   f"{plain(top['largest'] / max(top['median_abs'], 1e-300))}× that layer's "
                   f"median |h|; {at_first} of {len(layers)} layers have their largest at "
                   "position 0 (table residual).")
    return tuple(out)
