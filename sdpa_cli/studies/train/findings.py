"""The documents' claims about training, each set beside what the train study measured."""

from __future__ import annotations

import math

from sdpa_cli.framework.result import AuditEntry, Column
from sdpa_cli.numerics import recall
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
ONE_HOT = 0.1  # a query row counts as collapsed when its entropy is below this share of ln n


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


def audit_claims(spec: TrainSpec, rows: list[TrainRow], sens: list[SensitivityRow]
                 ) -> tuple[list[ClaimRow], list[str]]:
    """(claim rows, one plain sentence per finding)."""
    ref = _reference(spec)
    labels = [s.label for s in spec.scalings]
    if "none" not in labels or ref is None:
        why = "not tested: the spec must run scaling none and at least one scaled rule"
        return [ClaimRow(source=f"{D1}, Empirical Validation",
                         claim="training becomes unstable for large d_k", verdict="not tested",
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
    claims = [_instability_claim(spec, worse_at_big, big, ref,
                                 blew_up=counts["none"][0] > counts[ref][0])]
    claims.append(_collapse_claim(rows, big, spec.pairs + 1))
    claims.append(_stable_claim(spec, rows, sens, ref, dims))
    claims.append(_lr_claim(spec, rows, sens, ref, big))
    verdicts = ", ".join(f"{o}: {_word(v)}" for o, v in worse_at_big.items())
    claims.append(ClaimRow(
        source=f"{D1}, Empirical Validation", claim="\"ablation studies confirm\"",
        verdict="no study cited",
        evidence=f"the document names no ablation; this run is one (d_k = {small}…{big}, "
                 f"{spec.seeds} seeds): unscaled vs {ref} at d_k = {big} — {verdicts}"))
    for c in claims:
        sentences.append(f"Claim {c.claim} ({c.source}): {c.verdict} — {c.evidence}.")
    return claims, sentences


def _word(v: int) -> str:
    return {1: "unscaled trained worse", -1: "unscaled trained better",
            0: "no clear difference"}[v]


def _instability_claim(spec: TrainSpec, worse: dict[str, int], big: int, ref: str, *,
                       blew_up: bool) -> ClaimRow:
    n_worse = sum(v == 1 for v in worse.values())
    verdict = ("holds" if n_worse == len(worse) else "fails" if n_worse == 0 else
               "holds for " + ", ".join(o for o, v in worse.items() if v == 1) + " only")
    if n_worse and not blew_up:
        # "unstable" suggests blow-up; what was measured is slower or stalled learning
        verdict += " as 'trains worse' (stalls; no more divergence than scaled)"
    evidence = f"at d_k = {big}, unscaled vs {ref} (best rate each): " + "; ".join(
        f"{o}: {_word(v)}" for o, v in worse.items())
    return ClaimRow(source=f"{D1}, Empirical Validation; {D0}, Implementation Comparison",
                    claim="\"training becomes unstable for large d_k\"", verdict=verdict,
                    evidence=evidence + " (worse: fewer seeds reach the target, or the seed "
                             "ranges of steps or final loss do not overlap)")


def _collapse_claim(rows: list[TrainRow], big: int, keys: int) -> ClaimRow:
    init = [r.entropy_init for r in rows if r.scaling == "none" and r.dim == big
            and r.entropy_init is not None]
    ln_n = math.log(keys)
    claim = "\"attention patterns collapse to near-uniform or one-hot\""
    if not init:
        return ClaimRow(source=f"{D1}, Empirical Validation", claim=claim,
                        verdict="not measured", evidence="no finite entropy was logged")
    h = max(init)  # step 1 is the same for every optimiser and rate of a seed
    verdict = "holds (one-hot)" if h < ONE_HOT * ln_n else "does not hold at this d_k"
    return ClaimRow(source=f"{D1}, Empirical Validation", claim=claim, verdict=verdict,
                    evidence=f"unscaled, d_k = {big}: the query row's entropy at step 1 "
                             f"(median over seeds) is {h:.3g} nats against ln n = {ln_n:.3g} "
                             "for uniform weights")


def _stable_claim(spec: TrainSpec, rows: list[TrainRow], sens: list[SensitivityRow],
                  ref: str, dims: list[int]) -> ClaimRow:
    failed = [(opt, d) for opt in spec.rates for d in dims
              if _best(rows, sens, d, ref, opt).reached < spec.seeds]
    return ClaimRow(source=f"{D0}, Implementation Comparison",
                    claim="scaled attention: \"stable for any d_k\"",
                    verdict="holds over these d_k" if not failed else "fails somewhere",
                    evidence=(f"{ref} reached the target in every seed at every d_k for every "
                              "optimiser" if not failed else f"{ref} missed the target in some "
                              "seed at " + ", ".join(f"{o} d_k = {d}" for o, d in failed)))


def _lr_claim(spec: TrainSpec, rows: list[TrainRow], sens: list[SensitivityRow],
              ref: str, big: int) -> ClaimRow:
    source = f"{D1}, Low Learning Rates"
    claim = "unscaled attention \"requires much smaller learning rates\""
    swept = [o for o, r in spec.rates.items() if len(r) > 1]
    if not swept:
        return ClaimRow(source=source, claim=claim, verdict="not tested",
                        evidence="one learning rate per optimiser; the lr sweep spec tests it")
    parts, smaller = [], 0
    for opt in swept:
        a, b = _sweep(sens, big, "none", opt), _sweep(sens, big, ref, opt)
        smaller += a.best_lr < b.best_lr
        edge = [x for x, s in (("unscaled", a), (ref, b)) if s.best_at_edge]
        note = f" (best at the sweep's edge for {', '.join(edge)})" if edge else ""
        parts.append(f"{opt}: best lr {a.best_lr:g} unscaled vs {b.best_lr:g} {ref}{note}; "
                     f"lr sensitivity {a.lr_sensitivity:.3g} vs {b.lr_sensitivity:.3g}")
    verdict = ("holds" if smaller == len(swept) else "fails" if smaller == 0 else "mixed")
    return ClaimRow(source=source, claim=claim, verdict=verdict,
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
    """A claim row's verdict as an audit status: holds, partly, fails or untested."""
    v = verdict.lower()
    if v.startswith(("not tested", "not measured", "no study cited")):
        return "untested"
    if v.startswith(("fails", "does not hold")):
        return "fails"
    if v in ("holds", "holds (one-hot)", "holds over these d_k"):
        return "holds"
    return "partly"  # "holds for sgd only", "holds as 'trains worse' …", "mixed"


def claim_entries(claims: list[ClaimRow], spec_name: str) -> tuple[AuditEntry, ...]:
    """The claims table as kind: claim audit entries (issue 28): the evidence is the
    measurement; the seeds' spread is its uncertainty, named in the evidence."""
    out = []
    for c in claims:
        status = claim_status(c.verdict)
        out.append(AuditEntry(
            source=c.source, quantity=c.claim.replace('"', ""), documented=math.nan,
            computed=None, status=status, printed="", tolerance=0.0, basis="claim",
            kind="claim", measurement=f"{c.verdict}: {c.evidence}" if status != "untested"
            else None, spec_name=spec_name,
            reason=c.evidence if status == "untested" else None))
    return tuple(out)
