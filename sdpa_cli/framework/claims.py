"""The documents' claims judged by a run: holds, partly, fails or untested, with the
measurement behind each verdict, its uncertainty, its premise and how its thresholds move it;
and one verdict per claim when several runs judge it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sdpa_cli.framework.audit import Lookup
from sdpa_cli.framework.result import AuditEntry
from sdpa_cli.spec.common import Claim, ClaimRef, ClaimTest, Documented

CLAIM_STATUSES = ("holds", "partly", "fails", "untested")


def plain(x: float) -> str:
    """Four significant digits (the measurement beside a claim)."""
    return f"{x:.4g}"


# A comparison closer than this many standard errors is reported as within noise (a spec's
# `se_tolerance` replaces it; ≈ allows this many standard errors).
NOISE_SE = 3.0


def _measure(ref: ClaimTest | ClaimRef, lookup: Lookup, where: str
             ) -> tuple[float | None, float]:
    entry = Documented.model_validate({"where": where, "quantity": ref.quantity,
                                       "row": ref.row, "part": ref.part, "value": 0})
    value, se = lookup(entry, ref.quantity)
    if value is None or not math.isfinite(value):
        return None, 0.0
    return float(value), float(se) if se is not None and math.isfinite(se) else 0.0


def _label(ref: ClaimTest | ClaimRef) -> str:
    at = ", ".join(f"{k} {v}" for k, v in ref.row.items())
    part = f"{ref.part}/" if ref.part else ""
    return f"{part}{ref.quantity}" + (f" ({at})" if at else "")


@dataclass(frozen=True)
class Outcome:
    """One test of a claim: passed or not, how it reads, and where its threshold flips it."""

    passed: bool
    text: str
    se: float
    value: float
    flips: str | None = None  # "… flips inside its range" (None: robust or no threshold)
    robust: str | None = None  # "… holds across its range" (None: no threshold range)


def _test(test: ClaimTest, lookup: Lookup, where: str, k: float) -> Outcome | str:
    """A test's outcome, or the reason it cannot be measured in this run."""
    x, se = _measure(test, lookup, where)
    base: float | None = None
    if test.than is not None:
        base, base_se = _measure(test.than, lookup, where)
        times = test.than.times
        bar = None if base is None else times * base
        bar_se = times * base_se
        bar_text = (f"{plain(times)} × " if times != 1.0 else "") + _label(test.than) + (
            f" = {plain(bar)}" if bar is not None else "")
    else:
        bar, bar_se, bar_text = test.value, 0.0, plain(test.value or 0.0)
    if x is None or bar is None:
        missing = test if x is None else test.than
        return f"this run has no {_label(missing) if missing is not None else _label(test)}"
    se_all = math.hypot(se, bar_se)
    if test.op == "<":
        ok = x < bar
    elif test.op == ">":
        ok = x > bar
    else:
        ok = abs(x - bar) <= max(test.tolerance or 0.0, k * se_all)
    close = test.op != "≈" and se_all > 0 and abs(x - bar) < k * se_all
    shown = f"{plain(x)} ± {plain(se)}" if se > 0 else plain(x)
    text = (f"{_label(test)} = {shown} {test.op} {bar_text}: "
            f"{'yes' if ok else 'no'}{' (within noise)' if close else ''}")
    flips = robust = None
    if test.range is not None:
        # x < t (or x > t) changes its answer at t = x (at a multiple x/base of `than`):
        # inside the range, a fair reader's threshold would have given the other answer.
        lo, hi = test.range
        span = f"{plain(lo)}…{plain(hi)}"
        at, chosen = (x, test.value or 0.0) if base is None else (
            (x / base if base else math.inf), test.than.times if test.than else 1.0)
        what = "a threshold" if base is None else "a multiple"
        if lo <= at <= hi:
            flips = (f"{_label(test)} flips at {what} of {plain(at)}, inside the range "
                     f"{span} (at {plain(chosen)}: {'yes' if ok else 'no'})")
        else:
            robust = f"{_label(test)}: the same answer for every {what[2:]} in {span}"
    return Outcome(ok, text, se_all, x, flips, robust)


def judge(claim: Claim, lookup: Lookup, document: str, spec_name: str,
          k: float = NOISE_SE, *, skipped: str | None = None) -> AuditEntry:
    """One claim: its premise measured and reported beside it; its decisive tests decide:
    holds when all pass, fails when none does, partly otherwise; fragile where a threshold
    inside its stated range would flip one. A run that measured nothing (`skipped`, its
    reason) leaves the claim untested, and says why."""
    document = claim.document or document
    source = f"{document}, {claim.where}" if document else claim.where
    if claim.lines:
        source += ", line" + ("s " if len(claim.lines) > 1 else " ") + ", ".join(
            str(n) for n in claim.lines)

    def entry(status: str, computed: float | None = None, measurement: str | None = None,
              uncertainty: float | None = None, reason: str | None = None,
              premise: str | None = None, robustness: str | None = None) -> AuditEntry:
        return AuditEntry(source=source, quantity=claim.claim, documented=math.nan,
                          computed=computed, status=status, printed="", tolerance=0.0,
                          basis="claim", note=claim.note, kind="claim",
                          measurement=measurement, spec_name=spec_name,
                          uncertainty=uncertainty, reason=reason, premise=premise,
                          robustness=robustness,
                          decides=claim.beyond is None and claim.judged_by is None)

    if skipped is not None:
        return entry("untested", reason=f"this run measured nothing: {skipped}")
    if claim.judged_by is not None:
        return entry("untested", reason=(f"{claim.untested}; " if claim.untested else "")
                     + f"judged by {claim.judged_by}")
    if not claim.tests:
        return entry("untested", reason=claim.untested)
    premise: list[Outcome] = []
    for test in claim.premise:
        got = _test(test, lookup, claim.where, k)
        if isinstance(got, str):
            return entry("untested", reason=got)
        premise.append(got)
    premise_text = None
    if premise:
        held = all(p.passed for p in premise)
        premise_text = ("holds: " if held else "does not hold: ") + "; ".join(
            p.text for p in premise)
        if not held:
            return entry("untested", reason="its premise does not hold in this run ("
                         + "; ".join(p.text for p in premise if not p.passed) + ")",
                         premise=premise_text)
    outcomes: list[Outcome] = []
    for test in claim.tests:
        got = _test(test, lookup, claim.where, k)
        if isinstance(got, str):
            return entry("untested", reason=got, premise=premise_text)
        outcomes.append(got)
    passed = [o.passed for o in outcomes]
    status = "holds" if all(passed) else "fails" if not any(passed) else "partly"
    flips = [o.flips for o in outcomes if o.flips]
    robust = [o.robust for o in outcomes if o.robust]
    robustness = ("fragile: " + "; ".join(flips) if flips else
                  "robust: " + "; ".join(robust) if robust else None)
    measurement = "; ".join(o.text for o in outcomes)
    aside = [_test(t, lookup, claim.where, k) for t in claim.beside]
    if aside:
        measurement += " [what the claim does not imply: " + "; ".join(
            a if isinstance(a, str) else a.text for a in aside) + "]"
    if claim.beyond:
        measurement += f" [beyond the claim's setting: {claim.beyond}]"
    return entry(status, outcomes[0].value, measurement, max(o.se for o in outcomes),
                 premise=premise_text, robustness=robustness)


def judge_all(claims: Sequence[Claim], lookup: Lookup, document: str, spec_name: str,
              k: float = NOISE_SE, *, skipped: str | None = None) -> tuple[AuditEntry, ...]:
    """Every claim of a spec, each in its own setting (`beyond:` is the claim's: a spec may
    decide one claim and judge another beyond its setting); `skipped`: the run measured
    nothing, for this reason (each claim untested, saying so)."""
    return tuple(judge(c, lookup, document, spec_name, k, skipped=skipped) for c in claims)


# --- one verdict per claim ------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """A claim of a document as the batch counts it: once, with the verdict of the runs that
    decide it, and every run that judged it."""

    document: str
    claim: str
    status: str
    entries: tuple[AuditEntry, ...]  # every run's judgement, the deciding ones first
    why: str  # which runs decide, and why, when several judged it

    @property
    def specs(self) -> tuple[str, ...]:
        return tuple(a.spec_name or "" for a in self.entries)

    @property
    def fragile(self) -> bool:
        return any(a.fragile for a in self.entries if a.status == self.status)


def claim_key(a: AuditEntry) -> tuple[str, str]:
    """A claim's identity across runs: its document and its words (a claim several
    documents make is a claim of each)."""
    document = a.source.partition(", ")[0]
    return document, " ".join(a.quantity.split()).strip('"').rstrip(".").lower()


def verdicts(audit: Sequence[AuditEntry]) -> list[Verdict]:
    """Each claim once, in first-seen order. A claim judged by several runs takes the
    verdict of those that measured it within its own setting (`decides`); one untested
    where another measured it is the measured one's; deciding runs that disagree give
    `partly`, and `why` names them."""
    groups: dict[tuple[str, str], list[AuditEntry]] = {}
    for a in audit:
        if a.kind == "claim":
            groups.setdefault(claim_key(a), []).append(a)
    out = []
    for (document, _), entries in groups.items():
        measured = [a for a in entries if a.status != "untested"]
        deciding = [a for a in measured if a.decides] or measured or entries
        statuses = sorted({a.status for a in deciding}, key=CLAIM_STATUSES.index)
        status = statuses[0] if len(statuses) == 1 else "partly"
        rest = [a for a in entries if a not in deciding]
        why = ""
        if len(entries) > 1:
            names = ", ".join(f"{a.spec_name} ({a.status})" for a in deciding)
            why = f"decided by {names}"
            if len(statuses) > 1:
                why += ": the deciding runs disagree"
            if rest:
                why += "; also judged by " + ", ".join(
                    f"{a.spec_name} ({a.status}"
                    + (", beyond its setting" if not a.decides else "") + ")" for a in rest)
        out.append(Verdict(document, entries[0].quantity, status, (*deciding, *rest), why))
    return out


def coverage(audit: Sequence[AuditEntry]) -> str:
    """'41 holds, 9 partly, 7 fails, 12 untested': each claim once (claims judged by several
    runs are counted by their deciding verdict)."""
    found = verdicts(audit)
    return ", ".join(f"{sum(v.status == s for v in found)} {s}" for s in CLAIM_STATUSES)
