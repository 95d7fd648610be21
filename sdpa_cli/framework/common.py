"""Small pieces every study uses: the pair law of a spec, z-scores, JSON-safe numbers."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sdpa_cli.framework import derive
from sdpa_cli.framework.audit import (
    Lookup,
    audit_check,
    canonical,
    find_rows,
    pick,
    split_quantity,
)
from sdpa_cli.framework.causes import classify, key_of
from sdpa_cli.framework.claims import judge_all
from sdpa_cli.framework.document import document_pairs, own_entries
from sdpa_cli.framework.result import Check, Figure, Result, Table
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.common import Documented


def law_of(spec: Any) -> tuple[PairLaw, float]:
    """The standardized pair law of a spec's vectors, and the unit σ² that maps its q·k to
    physical units (σ·σ, not σ**2: a float power raises OverflowError where a product
    gives inf)."""
    if spec.distribution == "sphere":
        return PairLaw("sphere"), 1.0
    return PairLaw(spec.distribution, spec.mean / spec.std, spec.correlation), spec.std * spec.std


def finite(x: Any) -> float | None:
    """A finite float, or None (JSON null) for NaN, ±inf and missing values."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def zscore(measured: float, expected: float, se: float) -> float:
    """(measured − expected)/se; exact agreement with se = 0 is 0, disagreement ±inf."""
    if se > 0:
        return (measured - expected) / se
    return 0.0 if measured == expected else math.copysign(math.inf, measured - expected)


def own_se(row: Mapping[str, Any], name: str) -> float | None:
    """A quantity's standard error as most rows carry it: the field `<name>_se`."""
    se = row.get(f"{name}_se")
    return float(se) if isinstance(se, int | float) and not isinstance(se, bool) else None


def row_lookup(rows: Sequence[Mapping[str, Any]],
               se_of: Callable[[Mapping[str, Any], str], float | None] = own_se) -> Lookup:
    """The audit's one look-up: the single row an entry's `row:` selects (its scaling label
    normalised first, so `temperature: 8` finds 'temperature:8'), the quantity's value in it,
    and that value's standard error as `se_of(row, quantity)` gives it."""

    def find(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
        found = find_rows(rows, canonical(entry).row)
        if len(found) != 1:
            return None, None
        row = found[0]
        name, idx = split_quantity(quantity)
        value = pick(row.get(name), idx)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return (float(value) if number else None), se_of(row, name)

    return find


def assemble(
    spec: Any, *, study: str, title: str, table: Table, checks: Sequence[Check],
    lookup: Lookup, theory: Sequence[str], notes: Sequence[str] = (),
    figures: Sequence[Figure] = (), tables: Sequence[Table] = (),
    findings: Sequence[str] = (), expect: Sequence[str] = (),
    derived: derive.Derived | None = None,
) -> Result:
    """The Result of a table study: audit the spec's documented numbers against the rows (with
    its siblings' printed numbers, as one document, and each mismatch replayed by `derived`,
    the study's declared column derivations, from the printed inputs of its row), add the
    audit's check, and fill in the spec's identity (title falls back to `title`)."""
    pairs, mine = document_pairs(spec, lookup, spec.se_tolerance)
    replayer = None if derived is None else derive.replayer(
        derived, table.rows, {key_of(part, a.quantity, doc.row): (a.quantity, doc.row)
                              for part, doc, a in pairs})
    audit = own_entries(classify(pairs, replayer), mine)
    audit += judge_all(spec.claims, lookup, spec.document, spec.name or study,
                       spec.se_tolerance)
    check = audit_check(audit)
    return Result(
        study=study,
        name=spec.name or study,
        title=spec.title or title,
        source=spec.source,
        description=spec.description,
        spec=spec.model_dump(mode="json"),
        table=table,
        checks=(*checks, check) if check else tuple(checks),
        audit=audit,
        theory=tuple(theory),
        notes=tuple(notes),
        figures=tuple(figures),
        tables=tuple(tables),
        findings=tuple(findings),
        expect=tuple(expect),
    )


def skipped(spec: Any, *, study: str, title: str, table: Table, reason: str,
            checks: Sequence[Check] = ()) -> Result:
    """The Result of a run that measured nothing (`reason`: why, and how to fix it): no rows,
    and the spec's claims kept in the count, each untested for that reason."""
    name = spec.name or study
    return Result(study=study, name=name, title=spec.title or title, source=spec.source,
                  description=spec.description, spec=spec.model_dump(mode="json"),
                  table=table, checks=tuple(checks), skipped=reason,
                  audit=judge_all(spec.claims, _unmeasured, spec.document, name,
                                  skipped=reason))


def _unmeasured(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
    return None, None  # a skipped run has no rows (judge does not look them up)


def divisor_label(s: Scaling, d: float | None) -> str:
    """How a rule divides the scores at d_k = d, as a reader writes it: ÷√512, ÷64,
    unscaled (the formula itself when d is unknown or the rule is cosine)."""
    if s.cosine or d is None or s.norm is not None or s.cap is not None or s.log_n is not None:
        return s.formula
    divisor = s.temperature * float(d) ** s.power
    if divisor == 1.0:
        return "unscaled"
    square = divisor * divisor
    whole = round(square)
    if whole >= 1 and abs(square - whole) <= 1e-9 * square and (
            s.power == 0.5 or not math.isclose(divisor, round(divisor), rel_tol=1e-12)):
        return f"÷√{whole}"
    return f"÷{divisor:.4g}"


def percent(share: float) -> str:
    """A share of rows (0.63062) as every view shows it: 63.1%. One unit per quantity: the
    tables (fmt "pct"), the findings and the figures all show shares in percent."""
    return f"{plain(100.0 * share)}%"


def plain(x: float, *, whole: bool = False) -> str:
    """Three significant digits, written out (1057, 3.46, 0.998) while that stays short;
    with `whole`, whole numbers as they are (d_k, n, a multiplier of 20)."""
    if whole and float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    if x == 0 or not 1e-3 <= abs(x) < 1e6:
        return f"{x:.3g}"
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"

