"""The documents' claims judged by a run: holds, partly, fails or untested, with the
measurement behind each verdict, its uncertainty and the spec that measured it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sdpa_cli.framework.audit import Lookup
from sdpa_cli.framework.result import AuditEntry
from sdpa_cli.spec.common import Claim, ClaimRef, ClaimTest, Documented


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


def judge(claim: Claim, lookup: Lookup, document: str, spec_name: str,
          k: float = NOISE_SE) -> AuditEntry:
    """One claim: each test measured and compared; the verdict from how many pass."""
    document = claim.document or document
    source = f"{document}, {claim.where}" if document else claim.where
    def entry(status: str, computed: float | None = None, measurement: str | None = None,
              uncertainty: float | None = None, reason: str | None = None) -> AuditEntry:
        return AuditEntry(source=source, quantity=claim.claim, documented=math.nan,
                          computed=computed, status=status, printed="", tolerance=0.0,
                          basis="claim", note=claim.note, kind="claim",
                          measurement=measurement, spec_name=spec_name,
                          uncertainty=uncertainty, reason=reason)

    if not claim.tests:
        return entry("untested", reason=claim.untested)
    passed: list[bool] = []
    texts: list[str] = []
    ses: list[float] = []
    first: float | None = None
    for test in claim.tests:
        x, se = _measure(test, lookup, claim.where)
        if test.than is not None:
            bar, bar_se = _measure(test.than, lookup, claim.where)
            bar_text = _label(test.than) + (f" = {plain(bar)}" if bar is not None else "")
        else:
            bar, bar_se, bar_text = test.value, 0.0, plain(test.value or 0.0)
        if x is None or bar is None:
            return entry("untested", reason=f"this run has no {_label(test)}")
        first = x if first is None else first
        se_all = math.hypot(se, bar_se)
        ses.append(se_all)
        if test.op == "<":
            ok = x < bar
        elif test.op == ">":
            ok = x > bar
        else:
            ok = abs(x - bar) <= max(test.tolerance or 0.0, k * se_all)
        close = test.op != "≈" and se_all > 0 and abs(x - bar) < k * se_all
        shown = f"{plain(x)} ± {plain(se)}" if se > 0 else plain(x)
        texts.append(f"{_label(test)} = {shown} {test.op} {bar_text}: "
                     f"{'yes' if ok else 'no'}{' (within noise)' if close else ''}")
        passed.append(ok)
    status = "holds" if all(passed) else "fails" if not any(passed) else "partly"
    return entry(status, first, "; ".join(texts), max(ses) if ses else None)


def judge_all(claims: Sequence[Claim], lookup: Lookup, document: str, spec_name: str,
              k: float = NOISE_SE) -> tuple[AuditEntry, ...]:
    return tuple(judge(c, lookup, document, spec_name, k) for c in claims)
