"""Root causes of an audit's mismatches: own, carried (from), rounding or inconsistent.

Each printed number is checked twice: against the exact chain (the audit's match/mismatch) and
against the document's own printed inputs of that step (the replay). A mismatch is
- `rounding` when the replay reproduces it and every printed input it used is right (or off
  only by rounding itself): the document computed correctly from its rounded numbers;
- `carried` when the replay reproduces it but a printed input is wrong: `from` names that
  input, `root` the error at the start of the chain;
- `inconsistent` when it restates a value printed earlier in the document and disagrees with it
  (or the spec says so: a ratio or column that does not follow from numbers printed elsewhere);
- `own` otherwise: wrong given the document's own printed inputs.
A restatement equal to its first print replays as that print. `rounding` and `carried` always
rest on a replay within reach (`replayed`, `replay_spread`), whatever a spec's `cause:` says:
with no reading of the printed inputs that gives the printed value, the number is `own`.
Like statcheck's decision errors, a root error is `material` when it flips a conclusion the
document draws from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sdpa_cli.framework.claims import CLAIM_STATUSES, coverage, verdicts
from sdpa_cli.framework.result import AuditEntry
from sdpa_cli.numerics.formula import evaluate
from sdpa_cli.spec.common import Documented, Printed

# A key names one printed number: (part, quantity), e.g. ("", "weights[1][2]").
Key = tuple[str, str]


@dataclass(frozen=True)
class Replay:
    """A printed number recomputed from the document's own printed inputs."""

    value: float
    inputs: tuple[Key, ...]  # the printed inputs used (the rest came from the exact chain)
    spread: float  # how far the inputs' own rounding (half a unit each) can move the value

    def reaches(self, a: AuditEntry, tolerance: float | None = None) -> bool:
        """Does some reading of the printed inputs give the printed number (within its own
        tolerance, or `tolerance`, and the inputs' rounding)?"""
        tol = a.tolerance if tolerance is None else tolerance
        return abs(a.documented - self.value) <= (tol + self.spread) * (1 + 1e-9) + 1e-12


# replayer(key, printed) -> Replay | None; `printed(key)` gives the document's first printed
# value of a key, or None when the document never prints it.
Replayer = Callable[[Key, Callable[[Key], Printed | None]], Replay | None]
# materiality(documented, audit entry) -> the conclusion it flips, or None.
Materiality = Callable[[Documented, AuditEntry], str | None]


def classify(
    pairs: Sequence[tuple[str, Documented, AuditEntry]],
    replayer: Replayer | None = None,
    materiality: Materiality | None = None,
) -> tuple[AuditEntry, ...]:
    """Each (part, documented entry, audit entry) in document order, with its cause."""
    first: dict[Key, int] = {}
    for i, (part, doc, a) in enumerate(pairs):
        first.setdefault(key_of(part, a.quantity, doc.row), i)
    out: list[AuditEntry] = []

    def printed(key: Key) -> Printed | None:
        i = first.get(key)
        if i is None:
            return None
        doc, a = pairs[i][1], pairs[i][2]
        try:
            p = Printed.parse(a.printed)
        except ValueError:
            return Printed(a.documented, a.tolerance * 2.0, a.printed)
        return dataclasses.replace(p, approx=p.approx or doc.approx)

    def state(key: Key) -> AuditEntry | None:
        i = first.get(key)
        if i is None:  # `from: variance.scores` names the entry resolved to population/sample
            i = next((n for k, n in first.items()
                      if k[0] == key[0] and k[1].startswith(key[1] + ".")), None)
        return out[i] if i is not None and i < len(out) else None

    for i, (part, doc, a) in enumerate(pairs):
        key = key_of(part, a.quantity, doc.row)
        if a.status != "mismatch":
            a = _identity(i, part, doc, a, key, first, pairs, out, printed, state, replayer)
            if a.status == "mismatch":
                flip = doc.material or (materiality(doc, a) if materiality else None)
                a = dataclasses.replace(a, material=flip, root=a.label)
            out.append(a)
            continue
        a = _cause(i, part, doc, a, key, first, pairs, out, printed, state, replayer)
        if a.is_root:
            flip = doc.material or (materiality(doc, a) if materiality else None)
            a = dataclasses.replace(a, material=flip, root=a.label)
        out.append(a)
    return tuple(out)


def _cause(
    i: int, part: str, doc: Documented, a: AuditEntry, key: Key, first: dict[Key, int],
    pairs: Sequence[tuple[str, Documented, AuditEntry]], out: list[AuditEntry],
    printed: Callable[[Key], Printed | None], state: Callable[[Key], AuditEntry | None],
    replayer: Replayer | None,
) -> AuditEntry:
    if doc.cause in ("own", "inconsistent"):
        src = state((part, doc.from_)) if doc.from_ else None
        return dataclasses.replace(a, cause=doc.cause,
                                   from_=src.label if src is not None else doc.from_)
    j = first[key]
    if j < i:  # the document prints this number again: a restatement of the first print
        earlier = out[j]
        tol = max(rounding_tolerance(pairs[j][1], earlier), rounding_tolerance(doc, a))
        if abs(earlier.documented - a.documented) > tol * (1 + 1e-9):
            return dataclasses.replace(a, cause="inconsistent", from_=earlier.label)
        if earlier.status == "mismatch":  # its replay is the first print, within either's tolerance
            return dataclasses.replace(
                a, cause="rounding" if earlier.cause == "rounding" else "carried",
                from_=earlier.label,
                root=None if earlier.cause == "rounding" else (earlier.root or earlier.label),
                replayed=earlier.documented, replay_spread=max(0.0, tol - a.tolerance))
    replay = _replay(doc, key, printed, replayer)
    if replay is None:  # no reading of printed inputs: whatever `cause:` says, its own
        return dataclasses.replace(a, cause="own")
    a = dataclasses.replace(a, replayed=replay.value, replay_spread=replay.spread)
    if not replay.reaches(a, rounding_tolerance(doc, a)):
        return dataclasses.replace(a, cause="own")
    if doc.cause is not None:  # carried or rounding, as the spec says (the replay holds)
        src = state((part, doc.from_)) if doc.from_ else None
        root = (src.root or src.label) if src is not None and src.status == "mismatch" else None
        return dataclasses.replace(a, cause=doc.cause,
                                   from_=src.label if src is not None else doc.from_,
                                   root=root if doc.cause == "carried" else None)
    wrong = [s for s in (state(k) for k in replay.inputs)
             if s is not None and s.status == "mismatch" and s.cause != "rounding"]
    if doc.from_ and not replay.inputs:
        src = state((part, doc.from_))
        if src is not None and src.status == "mismatch" and src.cause != "rounding":
            wrong = [src]
    if wrong:
        src = wrong[0]
        return dataclasses.replace(a, cause="carried", from_=src.label,
                                   root=src.root or src.label)
    return dataclasses.replace(a, cause="rounding")


def rounding_tolerance(doc: Documented, a: AuditEntry) -> float:
    """How far a print may sit from what its own printed inputs give: the rounding of its
    digits (half a unit of the last, a whole one after "≈"), or the spec's explicit
    tolerance; never a Monte Carlo allowance, which says how far a draw may sit from the
    truth, not how far one printed number may sit from another it follows from."""
    if doc.tolerance is not None or doc.rel_tolerance is not None:
        return a.tolerance
    try:
        p = Printed.parse(a.printed)
    except ValueError:
        return a.tolerance
    return p.unit if (p.approx or doc.approx) else p.unit / 2.0


def _identity(
    i: int, part: str, doc: Documented, a: AuditEntry, key: Key, first: dict[Key, int],
    pairs: Sequence[tuple[str, Documented, AuditEntry]], out: Sequence[AuditEntry],
    printed: Callable[[Key], Printed | None], state: Callable[[Key], AuditEntry | None],
    replayer: Replayer | None,
) -> AuditEntry:
    """A number that matches the truth (within its tolerance, Monte Carlo's included) and
    yet does not follow from the printed numbers it follows from by an identity (a restated
    print, a quotient, a derived column) beyond their rounding: `inconsistent`."""
    tol = rounding_tolerance(doc, a)
    j = first[key]
    if j < i:  # a restatement: the same number printed again
        earlier_doc, earlier = pairs[j][1], pairs[j][2]
        tol = max(tol, rounding_tolerance(earlier_doc, earlier))
        if abs(earlier.documented - a.documented) > tol * (1 + 1e-9) + 1e-12:
            return dataclasses.replace(a, status="mismatch", cause="inconsistent",
                                       from_=earlier.label)
        return a
    replay = _replay(doc, key, printed, replayer)
    if replay is None or (not replay.inputs and doc.replay is None) or replay.reaches(a, tol):
        return a
    seen = [out[first[k]] if first[k] < len(out) else pairs[first[k]][2]
            for k in replay.inputs if k in first]
    named = state((part, doc.from_)) if doc.from_ else None  # `from:` names the input
    seen += [named] if named is not None else []
    if any(s.status == "mismatch" and s.cause != "rounding" for s in seen):
        return a  # a right number beside a wrong input: that input's error, counted there
    inputs = [s.label for s in seen]
    return dataclasses.replace(a, status="mismatch", cause="inconsistent",
                               from_=", ".join(inputs) or doc.replay,
                               replayed=replay.value, replay_spread=replay.spread)


def _replay(doc: Documented, key: Key, printed: Callable[[Key], Printed | None],
            replayer: Replayer | None) -> Replay | None:
    if doc.replay is not None:
        try:
            value, spread = evaluate(doc.replay)
        except (OverflowError, ValueError, ZeroDivisionError):
            return None  # arithmetic that overflows replays nothing: the entry stays own
        return Replay(value, (), spread)
    if replayer is None:
        return None
    return replayer(key, printed)


def key_of(part: str, quantity: str, row: Mapping[str, Any]) -> Key:
    """The key of a printed number: its part, its quantity and the row a table study's entry
    picks (none for worked examples), numbers written one way (1, 1.0 → 1.0): the same
    quantity at another row is another number, not a restatement."""
    return part, _bare(quantity) + "".join(f"@{k}={_canon(v)}" for k, v in sorted(row.items()))


def _canon(v: Any) -> str:
    return repr(float(v)) if isinstance(v, int | float) and not isinstance(v, bool) else str(v)


def _bare(quantity: str) -> str:
    """'part/weights[1][2]' → 'weights[1][2]' (multi-part examples prefix the part)."""
    return quantity.split("/", 1)[-1]


# --- summaries -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """Root errors first: how many printed lines carry an error of their own or an
    inconsistency, how many numbers inherit them, how many are rounding only."""

    own: int
    inconsistent: int
    carried: int
    rounding: int
    material: int
    matched: int
    numbers: int
    # Of `carried`, those whose root error is printed outside these entries (a sibling
    # spec's table): "them" would name the wrong errors.
    elsewhere: int = 0
    # Root errors of a publication a spec cites (`cites:`), not of the documents: shown
    # apart, never among the documents' own.
    cited: int = 0

    def headline(self, whose: str = "its") -> str:
        """'5 errors of its own, 2 inconsistencies; 126 values inherit them, …' (`whose`:
        "their" over several documents)."""
        if self.numbers == 0:
            return "no printed numbers"
        parts = [_count(self.own, f"error of {whose} own", f"errors of {whose} own"),
                 _count(self.inconsistent, "inconsistency", "inconsistencies")]
        text = ", ".join(parts)
        if self.material:  # the material ones are among both kinds of root error
            roots = self.own + self.inconsistent
            text += (f"; {self.material} of the {roots} root error{'s' if roots != 1 else ''} "
                     f"{'is' if self.material == 1 else 'are'} material (flip"
                     f"{'s' if self.material == 1 else ''} a conclusion)")
        n, m = self.carried - self.elsewhere, self.elsewhere
        if n or not m:
            text += f"; {n} value inherits them" if n == 1 else f"; {n} values inherit them"
        if m:
            text += "; " if not n else ", "
            text += f"{m} value{'s' if m != 1 else ''} inherit{'s' if m == 1 else ''} " \
                "errors printed elsewhere in the document"
        if self.rounding:
            text += f", {self.rounding} differ by rounding only"
        if self.cited:
            text += "; " + _count(self.cited, "error", "errors") + " in a cited paper"
        return text + f"; {self.matched} of {self.numbers} match"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def tally(audit: Sequence[AuditEntry]) -> Tally:
    """Root errors are counted once per printed line (a printed row, matrix or range is one
    error), the values that inherit them once per number. A number quoted from a cited
    publication (`cites:`) is not the documents': its errors are counted apart."""
    numbers = [a for a in audit if a.kind == "number"]
    mine = [a for a in numbers if a.cites is None]
    own = _distinct(a for a in mine if a.is_root and a.cause != "inconsistent")
    inconsistent = _distinct(a for a in mine if a.cause == "inconsistent")
    material = _distinct(a for a in mine if a.is_root and a.material)
    roots = {a.label for a in numbers if a.is_root}
    return Tally(
        own=len(own), inconsistent=len(inconsistent),
        carried=sum(a.cause == "carried" for a in numbers),
        elsewhere=sum(a.cause == "carried" and a.root is not None and a.root not in roots
                      for a in numbers),
        rounding=sum(a.cause == "rounding" for a in numbers),
        material=len(material),
        matched=sum(a.status == "match" for a in numbers), numbers=len(numbers),
        cited=len(_distinct(a for a in numbers if a.cites is not None and a.is_root)))


def _distinct(roots: Iterable[AuditEntry]) -> set[tuple[object, ...]]:
    """Root errors as printed lines, each counted once: two specs that audit the same printed
    line of a document (the same numbers printed and computed) count it once."""
    lines: dict[tuple[str, str], list[AuditEntry]] = {}
    for a in roots:
        lines.setdefault(_line(a), []).append(a)
    return {(key[0].partition(", ")[0], tuple(a.documented for a in items),
             tuple(None if a.computed is None else float(f"{a.computed:.6g}") for a in items))
            for key, items in lines.items()}


def _line(a: AuditEntry) -> tuple[str, str]:
    """A printed line: where it is printed and its table row (`line`); an entry written
    before lines were recorded, by its quantity without its element index."""
    return a.source, a.line if a.line is not None else a.quantity.split("[", 1)[0]


def grouped(audit: Sequence[AuditEntry]
            ) -> list[tuple[list[AuditEntry], list[AuditEntry]]]:
    """Root errors by printed line, in document order, each with the mismatches that
    inherit from it (carried), so a reader sees the cause before its echoes."""
    lines: dict[tuple[str, str], list[AuditEntry]] = {}
    line_of: dict[str, tuple[str, str]] = {}
    for a in audit:
        if a.is_root:
            lines.setdefault(_line(a), []).append(a)
            line_of[a.label] = _line(a)
    heirs: dict[tuple[str, str], list[AuditEntry]] = {k: [] for k in lines}
    for a in audit:
        if a.cause == "carried" and a.root in line_of:
            heirs[line_of[a.root]].append(a)
    return [(roots, heirs[k]) for k, roots in lines.items()]


def claim_coverage(audit: Sequence[AuditEntry]) -> str:
    """'41 holds, 9 partly, 7 fails, 12 untested': each claim once (framework.claims)."""
    return coverage(audit)


def counts(audit: Sequence[AuditEntry]) -> dict[str, int]:
    """The audit's counts for JSON, root errors first (results.json, sdpa-batch.json); each
    claim once, by its deciding verdict."""
    t = tally(audit)
    found = verdicts(audit)
    return {"own": t.own, "inconsistent": t.inconsistent, "material": t.material,
            "cited": t.cited,
            "carried": t.carried, "rounding": t.rounding, "matched": t.matched,
            "numbers": t.numbers,
            **{f"claims_{s}": sum(v.status == s for v in found) for s in CLAIM_STATUSES}}
