"""The documents' claims about training, each set beside what the train study measured."""

from __future__ import annotations

import math

import numpy as np

from sdpa_cli.framework.result import AuditEntry, Column
from sdpa_cli.numerics.bootstrap import median_interval
from sdpa_cli.studies.train import recall
from sdpa_cli.studies.train.rows import ClaimRow, SensitivityRow, TrainRow
from sdpa_cli.studies.train.spec import TrainSpec, optimiser_name

# A narrow terminal shows claim and verdict (wrapped); the evidence and the source are in
# the notes printed below the table, and whole in every file.
CLAIM_COLUMNS = (
    Column("source", "source", "text", priority=2, wrap=True),
    Column("claim", "claim", "text", priority=0, wrap=True),
    Column("verdict", "verdict", "text", priority=0, wrap=True),
    Column("evidence", "evidence", "text", priority=1),
    Column("robustness", "robust?", "text", priority=0, wrap=True),
)
D1 = "001_409455fed8d25d77.txt"
D0 = "000_0e5125495e9ebe01.txt"
# Where each claim is printed (its document's lines), named in its source.
VALIDATION = f"{D1}, Empirical Validation"
UNSTABLE_SRC = f"{VALIDATION}, line 725"
COLLAPSE_SRC = f"{VALIDATION}, line 726"
DEGRADES_SRC = f"{VALIDATION}, line 727"
ABLATION_SRC = f"{VALIDATION}, line 724"
LR_SRC = f"{D1}, Low Learning Rates, line 714"
COMPARISON_SRC = f"{D0}, Implementation Comparison, line 842"
LR_CLAIM = "unscaled attention \"requires much smaller learning rates\""
LR_SWEEP = "lr-sweep"  # experiments/train/slow/lr-sweep.yaml: the sweep that judges it
ONE_HOT = 0.1  # a query row counts as collapsed when its entropy is below this share of ln n
ONE_HOT_RANGE = (0.05, 0.2)  # the bars a reader could fairly choose instead
NUDGED = "robust: the same verdict with the initial weights nudged by 1e-12"
DEGRADED = 0.1  # performance degrades significantly: final accuracy lower by this much
DEGRADED_RANGE = (0.05, 0.2)


def _reference(spec: TrainSpec) -> str | None:
    """The scaled rule the unscaled one is compared with: ÷√d_k if run, else the first other."""
    labels = [s.label for s in spec.scalings]
    if "sqrt" in labels:
        return "sqrt"
    others = [x for x in labels if x != "none"]
    return others[0] if others else None


def _best(rows: list[TrainRow], sens: list[SensitivityRow], dim: int, rule: str,
          opt: str) -> TrainRow:
    """The row of this (d_k, rule, optimiser) at its best rate."""
    s = _sweep(sens, dim, rule, opt)
    return next(r for r in rows if (r.dim, r.scaling, r.optimiser, r.lr) ==
                (dim, rule, opt, s.best_lr))


def _sweep(sens: list[SensitivityRow], dim: int, rule: str, opt: str) -> SensitivityRow:
    return next(x for x in sens if (x.dim, x.scaling, x.optimiser) == (dim, rule, opt))


def compare(a: TrainRow, b: TrainRow) -> int:
    """+1 when row a trained worse than row b, −1 better, 0 no clear difference. Worse: fewer
    seeds reached the target, or every seed's final loss of a lies above every seed's of b
    (the ranges over seeds do not overlap), or both reached it in every seed and a's fastest
    seed was slower than b's slowest."""
    if a.reached != b.reached:
        return 1 if a.reached < b.reached else -1
    if a.reached == a.seeds and b.reached == b.seeds:
        # every seed reached the target, so lo and hi are both set
        lo_a, hi_a = _loss(a.steps_to_target_lo), _loss(a.steps_to_target_hi)
        lo_b, hi_b = _loss(b.steps_to_target_lo), _loss(b.steps_to_target_hi)
        if lo_a > hi_b:
            return 1
        if lo_b > hi_a:
            return -1
        return 0
    la, ha, lb, hb = (_loss(a.final_loss_lo), _loss(a.final_loss_hi),
                      _loss(b.final_loss_lo), _loss(b.final_loss_hi))
    if la > hb:
        return 1
    if lb > ha:
        return -1
    return 0


def _loss(v: float | None) -> float:
    """A value of the row, +∞ where it is missing (never reached, or diverged)."""
    return math.inf if v is None else float(v)


def _steps(row: TrainRow) -> str:
    if row.reached == 0:
        return f"never (0/{row.seeds} seeds)"
    med = row.steps_to_target_median
    shown = f"median {med:g} steps" if med is not None else "median beyond the run"
    return f"{shown} ({row.reached}/{row.seeds} seeds)"


def _loss_text(row: TrainRow) -> str:
    v = row.final_loss_median
    return "diverged" if v is None else f"{v:.3g}"


def audit_claims(spec: TrainSpec, rows: list[TrainRow], sens: list[SensitivityRow],
                 init: np.ndarray | None = None) -> tuple[list[ClaimRow], list[str]]:
    """(claim rows, one plain sentence per finding). `init`: the unscaled query row's
    entropy at step 1 at the largest d_k over many initialisations (the collapse claim's
    median and its interval; the trained seeds' when None)."""
    ref = _reference(spec)
    labels = [s.label for s in spec.scalings]
    if "none" not in labels or ref is None:
        why = "not tested: the spec must run scaling none and at least one scaled rule"
        return [ClaimRow(source=UNSTABLE_SRC,
                         claim="training becomes unstable for large d_k", verdict="untested",
                         evidence=why)], [why + "."]
    dims = sorted(spec.dims)
    big, small = dims[-1], dims[0]
    target = f"{spec.target_accuracy:g} accuracy"
    sentences: list[str] = []
    worse_at_big: dict[str, int] = {}
    for opt in spec.rates:
        parts = []
        for d in dims:
            a, b = _best(rows, sens, d, "none", opt), _best(rows, sens, d, ref, opt)
            parts.append(f"d_k = {d}: unscaled {_steps(a)}, loss {_loss_text(a)}; {ref} "
                         f"{_steps(b)}, loss {_loss_text(b)}")
        worse_at_big[opt] = compare(_best(rows, sens, big, "none", opt),
                                    _best(rows, sens, big, ref, opt))
        sentences.append(f"{optimiser_name(opt)} (best rate of each rule) steps to {target} "
                         f"within {spec.steps} steps — " + "; ".join(parts) + ".")
    counts = {rule: (sum(r.diverged for r in rows if r.scaling == rule),
                     sum(r.seeds for r in rows if r.scaling == rule))
              for rule in ("none", ref)}
    sentences.append(
        f"Runs that diverged (loss not finite or above {recall.DIVERGED_ABOVE:g}·ln V), over all "
        f"d_k and rates: unscaled {counts['none'][0]} of {counts['none'][1]}, {ref} "
        f"{counts[ref][0]} of {counts[ref][1]}"
        + ("; any shortfall of the unscaled head is slow or stalled learning, not blow-up."
           if counts["none"][0] <= counts[ref][0] else "."))
    sentences.append(_gradient_sentence(rows, big, ref))
    blew_up = counts["none"][0] > counts[ref][0]
    claims = [_instability_claim(worse_at_big, big, ref, blew_up=blew_up),
              _instability_claim(worse_at_big, big, ref, blew_up=blew_up, document=D0)]
    claims.append(_collapse_claim(rows, big, spec.pairs + 1, init, spec.seed or 0))
    claims.append(_performance_claim(spec, rows, sens, ref, big))
    claims.append(_stable_claim(spec, rows, sens, ref, dims))
    claims.append(_lr_claim(spec, rows, sens, ref, big))
    verdicts = ", ".join(f"{o}: {_word(v)}" for o, v in worse_at_big.items())
    claims.append(ClaimRow(
        source=ABLATION_SRC, claim="\"ablation studies confirm\"",
        verdict="untested",
        evidence=f"the document cites no ablation study; this run is one (d_k = {small}…{big}, "
                 f"{spec.seeds} seeds): unscaled vs {ref} at d_k = {big} — {verdicts}"))
    for c in claims:
        sentences.append(f"Claim {c.claim} ({c.source}): {c.verdict} — {c.evidence}.")
    return claims, sentences


def _word(v: int) -> str:
    return {1: "unscaled trained worse", -1: "unscaled trained better",
            0: "no clear difference"}[v]


def _instability_claim(worse: dict[str, int], big: int, ref: str, *,
                       blew_up: bool, document: str = D1) -> ClaimRow:
    """Unstable: trains worse (decisive test 1) and blows up more often (test 2). Worse
    without more blow-up is partly: it stalls, it does not diverge. 001 says it (Empirical
    Validation) and 000 too (Implementation Comparison): a claim of each, judged alike."""
    n_worse = sum(v == 1 for v in worse.values())
    if n_worse == 0:
        verdict = "fails"
    elif n_worse == len(worse) and blew_up:
        verdict = "holds"
    else:
        verdict = "partly"
    how = ("it trains worse and diverges more often" if n_worse and blew_up else
           "it trains worse (slower or stalled) but diverges no more often than "
           f"{ref}" if n_worse else "it does not train worse")
    only = ("" if n_worse in (0, len(worse)) else
            " (worse with " + ", ".join(o for o, v in worse.items() if v == 1) + " only)")
    evidence = f"at d_k = {big}, unscaled vs {ref} (best rate each): " + "; ".join(
        f"{o}: {_word(v)}" for o, v in worse.items())
    return ClaimRow(source=UNSTABLE_SRC if document == D1 else COMPARISON_SRC,
                    claim="\"training becomes unstable for large d_k\"" if document == D1 else
                    "unscaled attention: \"unstable for large d_k\"", verdict=verdict,
                    evidence=f"{how}{only}: " + evidence + " (worse: fewer seeds reach the "
                             "target, or the seed ranges of steps or final loss do not overlap)")


def _collapse_claim(rows: list[TrainRow], big: int, keys: int, init: np.ndarray | None,
                    seed: int) -> ClaimRow:
    """Collapsed: the unscaled query row's entropy at step 1 is below ONE_HOT of ln n (or
    above 1 − ONE_HOT of it: near uniform), by the median over initialisations. A bar
    anywhere in ONE_HOT_RANGE is as fair: the verdict is fragile when such a bar lies
    within the median's 95% bootstrap interval (a few seeds' median moves by more than
    the gap to a bar; many initialisations pin it down)."""
    claim = "\"attention patterns collapse to near-uniform or one-hot\""
    if init is None:
        init = np.asarray([r.entropy_init for r in rows if r.scaling == "none" and
                           r.dim == big and r.entropy_init is not None], dtype=float)
    init = init[np.isfinite(init)]
    if not init.size:
        return ClaimRow(source=COLLAPSE_SRC, claim=claim,
                        verdict="untested", evidence="no finite entropy was logged")
    ln_n = math.log(keys)
    h, h_lo, h_hi = median_interval(init, seed)
    share = h / ln_n
    uniform = share >= 0.5

    def near(v: float) -> float:  # distance to one-hot (0) or to uniform (1), in ln n
        return 1.0 - v / ln_n if uniform else v / ln_n

    d, d_lo, d_hi = near(h), *sorted((near(h_lo), near(h_hi)))
    verdict = "holds" if d < ONE_HOT else "fails"
    lo, hi = ONE_HOT_RANGE
    inside = lo <= d <= hi  # a bar in the range flips the median itself
    reach = d_lo <= hi and d_hi >= lo  # or lies within its interval
    what = (f"{d:.3g} of ln n from {'uniform' if uniform else 'one-hot'} (median over "
            f"{init.size} initialisations, 95% bootstrap interval {d_lo:.3g}–{d_hi:.3g}); "
            f"sdpa's bar {ONE_HOT:g}: ")
    if inside:
        what += f"a bar in {lo:g}…{hi:g} below {d:.3g} would flip it (fragile)"
    elif reach:
        what += (f"no bar in {lo:g}…{hi:g} flips the median, but its interval reaches "
                 f"{lo if d < lo else hi:g} (fragile)")
    else:
        what += f"the same for any bar in {lo:g}…{hi:g}, across the interval"
    return ClaimRow(source=COLLAPSE_SRC, claim=claim, verdict=verdict,
                    evidence=f"unscaled, d_k = {big}: the query row's entropy at step 1 is "
                             f"{h:.3g} nats against ln n = {ln_n:.3g} for uniform weights: "
                             + what,
                    robustness=(f"fragile: a bar in {lo:g}…{hi:g} of ln n lies within the "
                                "median's 95% interval" if inside or reach else "not measured"))


def _stable_claim(spec: TrainSpec, rows: list[TrainRow], sens: list[SensitivityRow],
                  ref: str, dims: list[int]) -> ClaimRow:
    failed = [(opt, d) for opt in spec.rates for d in dims
              if _best(rows, sens, d, ref, opt).reached < spec.seeds]
    return ClaimRow(source=COMPARISON_SRC,
                    claim="scaled attention: \"stable for any d_k\"",
                    verdict="holds" if not failed else "fails",
                    evidence=(f"{ref} reached the target in every seed at every d_k for every "
                              "optimiser" if not failed else f"{ref} missed the target in some "
                              "seed at " + ", ".join(f"{o} d_k = {d}" for o, d in failed)))


def _lr_claim(spec: TrainSpec, rows: list[TrainRow], sens: list[SensitivityRow],
              ref: str, big: int) -> ClaimRow:
    """"Unscaled attention requires much smaller learning rates to avoid instabilities,
    slowing training": its best rate is smaller than ref's (decisive test 1, per swept
    optimiser), and at that smaller rate it trains, only slower (test 2: every seed reaches
    the target). Smaller but still not training is partly: the rate is not what holds it
    back. One rate per optimiser sweeps nothing: untested, judged by the sweep."""
    swept = [o for o, r in spec.rates.items() if len(r) > 1]
    if not swept:
        return ClaimRow(source=LR_SRC, claim=LR_CLAIM, verdict="untested",
                        evidence="one learning rate per optimiser here; judged by "
                                 f"{LR_SWEEP} (experiments/train/slow/lr-sweep.yaml)")
    parts, passed = [], []
    for opt in swept:
        a, b = _sweep(sens, big, "none", opt), _sweep(sens, big, ref, opt)
        at_best = _best(rows, sens, big, "none", opt)
        smaller = a.best_lr < b.best_lr
        trains = at_best.reached == at_best.seeds
        passed += [smaller, trains]
        edge = [x for x, s in (("unscaled", a), (ref, b)) if s.best_at_edge]
        note = f" (best at the sweep's edge for {', '.join(edge)})" if edge else ""
        parts.append(f"{opt}: best lr {a.best_lr:g} unscaled vs {b.best_lr:g} {ref}{note}, "
                     f"{'smaller' if smaller else 'not smaller'}; at it the unscaled head "
                     f"reaches the target in {at_best.reached}/{at_best.seeds} seeds; lr "
                     f"sensitivity {a.lr_sensitivity:.3g} vs {b.lr_sensitivity:.3g}")
    verdict = ("holds" if all(passed) else "fails" if not any(passed) else "partly")
    return ClaimRow(source=LR_SRC, claim=LR_CLAIM, verdict=verdict,
                    evidence=f"d_k = {big}: " + "; ".join(parts))


def _gradient_sentence(rows: list[TrainRow], big: int, ref: str) -> str:
    """Did the unscaled head start with a vanishing gradient on W_Q? (Same weights, same
    batches: step 1 is identical across optimisers and rates, so any row of the rule will do.)"""
    def at_start(rule: str) -> tuple[float | None, float | None, float | None]:
        r = next(x for x in rows if (x.dim, x.scaling) == (big, rule))
        return r.grad_wq_init, r.grad_wk_init, r.entropy_init

    (qa, ka, ea), (qb, kb, eb) = at_start("none"), at_start(ref)
    if None in (qa, ka, qb, kb, ea, eb):
        return f"At d_k = {big} a gradient norm at step 1 was not finite."
    assert qa is not None and qb is not None and ka is not None and kb is not None
    ratio = qa / qb if qb > 0 else math.inf
    # A total over all query rows: it cannot show rows that saturation froze (their
    # gradient vanishes while the others carry the total), so it rules out nothing per row.
    how = ("smaller: the unscaled gradient on W_Q starts out vanishing" if ratio < 0.5 else
           "not smaller in total (a total can hide frozen query rows; per-row gradients "
           "are not measured here)" if ratio >= 1 else "somewhat smaller")
    return (f"At step 1, d_k = {big} (median over seeds): ‖∂L/∂W_Q‖ = {qa:.3g} unscaled vs "
            f"{qb:.3g} {ref}, ‖∂L/∂W_K‖ = {ka:.3g} vs {kb:.3g}, query-row entropy {ea:.3g} vs "
            f"{eb:.3g} nats — {ratio:.3g}× the {ref} gradient, {how}.")


def claim_status(verdict: str) -> str:
    """A claim row's verdict is already one of holds, partly, fails, untested (one word per
    claim per run, in the claims table, the notes and the audit alike)."""
    if verdict not in ("holds", "partly", "fails", "untested"):
        raise ValueError(f"a train claim's verdict must be one word, got {verdict!r}")
    return verdict


def claim_entries(claims: list[ClaimRow], spec_name: str, beyond: str | None = None
                  ) -> tuple[AuditEntry, ...]:
    """The claims table as kind: claim audit entries: the evidence is the
    measurement; the seeds' spread is its uncertainty, named in the evidence. `beyond`: the
    spec judges them outside their setting (it does not decide them in a batch)."""
    out = []
    for c in claims:
        status = claim_status(c.verdict)
        # the swept rates decide the learning-rate claim, whatever else a sweep is beyond;
        # a run with one rate only points to the sweep and decides nothing
        lr = c.claim == LR_CLAIM
        mine = beyond if not (lr and status != "untested") else None
        decides = mine is None and not (lr and status == "untested")
        measured = c.evidence + (f" [beyond the claim's setting: {mine}]" if mine else "")
        out.append(AuditEntry(
            source=c.source, quantity=c.claim.replace('"', ""), documented=math.nan,
            computed=None, status=status, printed="", tolerance=0.0, basis="claim",
            kind="claim", measurement=measured if status != "untested" else None,
            spec_name=spec_name, reason=c.evidence if status == "untested" else None,
            robustness=None if status == "untested" or c.robustness == "not measured" else
            NUDGED if c.robustness == "robust" else c.robustness,
            decides=decides))
    return tuple(out)


def _performance_claim(spec: TrainSpec, rows: list[TrainRow], sens: list[SensitivityRow],
                       ref: str, big: int) -> ClaimRow:
    """Performance degrades significantly: the unscaled head's final accuracy (median over
    seeds, best rate) is below the scaled one's by at least DEGRADED, for every optimiser."""
    lo, hi = DEGRADED_RANGE
    drops = {}
    for opt in spec.rates:
        a, b = _best(rows, sens, big, "none", opt), _best(rows, sens, big, ref, opt)
        drops[opt] = (b.final_accuracy_median or 0.0) - (a.final_accuracy_median or 0.0)
    verdict = ("holds" if all(d >= DEGRADED for d in drops.values()) else
               "fails" if all(d < DEGRADED for d in drops.values()) else "partly")
    flips = [o for o, d in drops.items() if lo <= d <= hi]
    return ClaimRow(
        source=DEGRADES_SRC, claim="\"model performance degrades "
        "significantly\"", verdict=verdict,
        evidence=f"d_k = {big}, final accuracy (median over seeds, best rate) unscaled vs "
                 f"{ref}: " + "; ".join(
                     f"{o}: {_acc(_best(rows, sens, big, 'none', o))} vs "
                     f"{_acc(_best(rows, sens, big, ref, o))} (lower by {d:.3g})"
                     for o, d in drops.items())
                 + f"; sdpa's bar: lower by {DEGRADED:g}",
        robustness=(f"fragile: a bar in {lo:g}…{hi:g} flips it for "
                    + ", ".join(flips) if flips else "not measured"))


def _acc(row: TrainRow) -> str:
    v = row.final_accuracy_median
    return "—" if v is None else f"{100 * v:.0f}%"


def reach_sentence(spec: TrainSpec, rows: list[TrainRow]) -> str:
    """What the run found first: at which d_k each rule reaches the target accuracy in every
    seed, and where never (no seed, at the best of every optimiser and rate)."""
    parts = []
    for rule in dict.fromkeys(r.scaling for r in rows):
        mine = [r for r in rows if r.scaling == rule]
        dims = sorted({r.dim for r in mine})
        never = [d for d in dims if all(r.reached == 0 for r in mine if r.dim == d)]
        always = [d for d in dims if all(r.reached == r.seeds for r in mine if r.dim == d)]
        some = [d for d in dims if d not in never and d not in always]
        said = ([f"never at d_k = {_and(never)}"] if never else []) + \
            ([f"in every seed at d_k = {_and(always)}"] if always else []) + \
            ([f"in some seeds at d_k = {_and(some)}"] if some else [])
        parts.append(f"{'unscaled' if rule == 'none' else rule} " + ", ".join(said))
    return (f"reaching {100 * spec.target_accuracy:.0f}% accuracy within {spec.steps} steps "
            "(any optimiser or rate): " + "; ".join(parts) + ".")


def _and(xs: list[int]) -> str:
    words = [str(x) for x in xs]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
