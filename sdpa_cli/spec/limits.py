"""Work, memory and output guards, estimated from a resolved spec before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sdpa_cli.errors import SpecFieldError

if TYPE_CHECKING:
    from sdpa_cli.spec.common import SpecBase

Loc = tuple[str | int, ...]

# The budgets: a run beyond any of them would take many minutes, most of the machine's
# memory, or write more than anyone reads. Each study's estimator says what its spec costs.
MAX_WORK = 10**12  # elementary steps (random numbers drawn, scores handled, per-row work)
MAX_MEMORY = 1024**3  # bytes held at once
MAX_OUTPUT = 100 * 1024**2  # bytes of tables and results.json written to the run folder
MAX_ROWS = 2000  # rows of one result table: each costs a summary, a line in every table

# Measured on the shipped studies (tests/test_limits.py keeps these honest): one table row
# costs about as much as this many random numbers (its moments, histogram and checks) and
# about this many bytes in table.md, table.csv, results.json and metrics.json together.
ROW_WORK = 10**6
ROW_BYTES = 2600
# A number kept per row in a list (explicit scores, their weights): its text in three files,
# and a Python float with its list slot, held several times over while the files are built.
ENTRY_BYTES = 60
ENTRY_MEMORY = 200
# An additive-score trial is drawn in a Python loop of its own: about 10 µs of overhead.
ADDITIVE_TRIAL_WORK = 1000


@dataclass(frozen=True)
class Cost:
    """What one spec will cost, and where a refusal points. `lower` and `rows_field` are
    each ONE location in the spec (`("pairs",)`, `("sizes", 0)`), the line the one-line
    error names; the fields to lower are named in `hint` (registration checks the places)."""

    work: int  # elementary steps
    memory: int  # peak bytes
    output: int  # bytes written
    rows: int  # rows of the largest result table
    lower: Loc  # where a spec over work, memory or output points: ("pairs",)
    hint: str  # what to do: "lower pairs or dims"
    rows_field: Loc = ()  # where a spec of too many rows points, and how they come about
    rows_of: str = ""  # "dims × scalings"
    rows_hint: str = ""  # "give fewer dims"


Estimator = Callable[[Any], Cost]


def check(spec: SpecBase, estimate: Estimator | None) -> None:
    """Refuse (SpecFieldError, exit 2 at the caller) a spec over any budget."""
    if estimate is None:
        return
    cost = estimate(spec)
    if cost.rows > MAX_ROWS:
        raise SpecFieldError(cost.rows_field, f"would make a table of {cost.rows} rows "
                             f"({cost.rows_of}); at most {MAX_ROWS}: {cost.rows_hint}")
    over = [(cost.work, MAX_WORK, "steps of work (hours)", _count),
            (cost.memory, MAX_MEMORY, "of memory", _bytes),
            (cost.output, MAX_OUTPUT, "of files in the run folder", _bytes)]
    for amount, limit, what, show in over:
        if amount > limit:
            raise SpecFieldError(cost.lower, f"would need about {show(amount)} {what}; at most "
                                 f"{show(limit)}: {cost.hint}")


def count(n: int) -> str:
    """A count as `1.2e+15`, also past float64's range (an int of 400 digits: `1.0e+399`),
    where formatting it as a float would raise OverflowError."""
    if abs(n) <= 10**300:
        return f"{n:.2g}"
    digits = str(abs(n)) if n.bit_length() < 14_000 else None  # str() stops at 4300 digits
    if digits is None:
        return "more than 1e+4000"
    return f"{'-' if n < 0 else ''}{digits[0]}.{digits[1]}e+{len(digits) - 1}"


def _count(n: int) -> str:
    return count(n)


def _bytes(n: int) -> str:
    if n >= 1024**3 * 10**290:  # past float64 as a number of GB: the count alone says it
        return f"{count(n // 1024**3)} GB"
    return f"{n / 1024**3:.3g} GB" if n >= 1024**3 else f"{max(n, 1) / 1024**2:.3g} MB"


def table_cost(rows: int, work: int, *, entries: int = 0, memory: int = 0) -> tuple[int, int, int]:
    """Work, memory and output of a table of `rows` rows holding `entries` listed numbers."""
    return (work + rows * ROW_WORK, memory + rows * ROW_BYTES + entries * ENTRY_MEMORY,
            rows * ROW_BYTES + entries * ENTRY_BYTES)


# Each study's estimator (its declaration's `cost`) lives in the study's package.


# Multipliers of the scores softmax takes. Beyond them the weights would already be exactly
# one-hot (or uniform), but the scaled scores a row reports would overflow or vanish: such a
# scale is refused rather than silently clamped (studies.score_cells holds scales here).
SCALE_RANGE = (1e-300, 1e300)


def check_factors(scalings: Any, dims: list[int], n: int) -> None:
    """Refuse a rule whose multiplier at some d lies outside SCALE_RANGE (power:1e300 at
    d = 4 multiplies by 0, power:-1e300 by inf): the scores it feeds to softmax would vanish
    or overflow, so gradients and training would compute NaN (studies that keep such a
    row as null with a note, like variance, do not call this)."""
    for i, s in enumerate(scalings):
        for d in dims:
            c = s.factor(d, n)
            if not SCALE_RANGE[0] <= c <= SCALE_RANGE[1]:
                raise SpecFieldError(("scalings", i), f"{s.label} at d = {d} multiplies the "
                                     f"scores by {c:g}; that is outside [{SCALE_RANGE[0]:g}, "
                                     f"{SCALE_RANGE[1]:g}], where they overflow or vanish")
