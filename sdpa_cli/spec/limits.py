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
    """What one spec will cost, and which field to lower for each part."""

    work: int  # elementary steps
    memory: int  # peak bytes
    output: int  # bytes written
    rows: int  # rows of the largest result table
    lower: Loc  # the field whose value drives the cost (the error points at it)
    hint: str  # "lower pairs or dims"
    rows_field: Loc = ()  # the field that sets the number of rows, and how
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


def _count(n: int) -> str:
    return f"{n:.2g}"


def _bytes(n: int) -> str:
    return f"{n / 1024**3:.3g} GB" if n >= 1024**3 else f"{max(n, 1) / 1024**2:.3g} MB"


def _table(rows: int, work: int, *, entries: int = 0, memory: int = 0) -> tuple[int, int, int]:
    """Work, memory and output of a table of `rows` rows holding `entries` listed numbers."""
    return (work + rows * ROW_WORK, memory + rows * ROW_BYTES + entries * ENTRY_MEMORY,
            rows * ROW_BYTES + entries * ENTRY_BYTES)


# --- one estimator per study (registry.Study.limits) ------------------------------------


def variance(spec: Any) -> Cost:
    per_pair = (lambda d: 3) if spec.method == "exact" else (lambda d: 2 * d)
    draws = sum(spec.pairs * per_pair(d) for d in spec.dims)
    rows = len(spec.dims) * len(spec.scalings)
    work, memory, output = _table(rows, draws)
    field: Loc = ("dims",) if len(spec.dims) * 2 > spec.pairs else ("pairs",)
    return Cost(work, memory, output, rows, field,
                "lower pairs or the number of dims, or use method: exact",
                ("dims",), "dims × scalings", "give fewer dims")


# Multipliers of the scores softmax takes. Beyond them the weights would already be exactly
# one-hot (or uniform), but the scaled scores a row reports would overflow or vanish: such a
# scale is refused rather than silently clamped (studies.score_cells holds scales here).
SCALE_RANGE = (1e-300, 1e300)


def _scale_in_range(spec: Any) -> None:
    source = spec.score_source
    if source == "explicit" and not spec.uses_rules:
        named = [(("scales", i), c, f"scale {c:g}") for i, c in enumerate(spec.scale_list)]
    else:
        dims = [spec.dim or 1] if source in ("explicit", "leading") else (spec.dim_list or [1])
        # logn's factor S·ln n needs n: the score count, or the largest key count
        n = len(spec.scores) if source == "explicit" else max(spec.key_list)
        named = [(("scalings", i), s.factor(d, n), f"{s.label} at d = {d} multiplies by "
                  f"{s.factor(d, n):g}; that")
                 for i, s in enumerate(spec.scalings) for d in dims]
    for loc, c, what in named:
        if not SCALE_RANGE[0] <= c <= SCALE_RANGE[1]:
            raise SpecFieldError(loc, f"{what} is outside [{SCALE_RANGE[0]:g}, "
                                 f"{SCALE_RANGE[1]:g}], where the scaled scores overflow or "
                                 "vanish (the weights there are already exactly one-hot or "
                                 "uniform)")


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


def score_source(spec: Any) -> Cost:
    """softmax-sweep and jacobian: explicit scores, random vectors, or Gaussian scores."""
    source = spec.score_source
    if source != "gaussian":
        _scale_in_range(spec)
    if source == "leading":  # exact: a few numbers per (n, rule)
        rows = len(spec.key_list) * len(spec.scalings)
        work, memory, output = _table(rows, rows)
        return Cost(work, memory, output, rows, ("keys",), "give fewer keys", ("keys",),
                    "keys × scalings", "give fewer keys or scalings")
    if source == "explicit":
        n = len(spec.scores)
        rows = len(spec.scalings) if spec.uses_rules else len(spec.scale_list)
        # each row keeps the scaled scores and their weights: 2n numbers
        work, memory, output = _table(rows, rows * n * 200, entries=2 * n * rows)
        field: Loc = ("scalings",) if spec.uses_rules else ("scales",)
        return Cost(work, memory, output, rows, field, "give fewer scales or fewer scores",
                    field, "one per multiplier", f"give fewer {field[0]}")
    keys = spec.key_list
    if source == "vectors":
        h = spec.additive or 0  # additive scores: W₂ (h × d) and n keys per trial
        rows = len(spec.dim_list) * len(keys) * (len(spec.scalings) + (1 if h else 0))
        # additive scores draw W₂ (h × d) and form the n × h products kᵀW₂ᵀ for every
        # trial, one trial at a time (a Python loop: ADDITIVE_TRIAL_WORK each)
        draws = sum(spec.trials * (2 * n * d + n * n * (1 + len(spec.scalings))
                                   + (h * d * (1 + n) + ADDITIVE_TRIAL_WORK if h else 0))
                    for d in spec.dim_list for n in keys)
        # a block holds a few n × n score matrices and n × d vectors (float64); an additive
        # trial holds W₂ twice (drawn, then scaled) and three n × h arrays
        blocks = 8 * max(max(6 * n * n, 6 * n * d) for n in keys for d in spec.dim_list)
        weights = 8 * max(2 * h * d + 3 * n * h for n in keys for d in spec.dim_list)
        work, memory, output = _table(rows, draws, memory=max(blocks, weights))
        field = ("dims",) if spec.dims is not None else ("d_model",)
        lower, hint = ((("additive",), "lower additive, dims or keys")
                       if weights > MAX_MEMORY // 2 and weights > blocks
                       else (("trials",), "lower trials, keys or dims"))
        return Cost(work, memory, output, rows, lower, hint,
                    field, "dims × keys × scalings", "give fewer dims, keys or scalings")
    stds = spec.score_stds or []
    rows = len(keys) * len(stds)
    work, memory, output = _table(rows, spec.trials * sum(keys) * (1 + len(stds)))
    return Cost(work, memory, output, rows, ("trials",), "lower trials or keys",
                ("score_stds",), "keys × score_stds", "give fewer score_stds or keys")


def worked_example(spec: Any) -> Cost:
    """Exact arithmetic on a page of numbers (at most spec.worked.MAX_ENTRIES per matrix):
    no budget to speak of, but every product, quotient and square it forms must stay a
    finite float64, so numbers whose arithmetic would overflow are refused here."""
    for i, part in enumerate(spec.parts):
        _worked_part_range(part, ("parts", i))
    return Cost(0, 0, 0, 0, ("parts",), "")


# Worked examples square their numbers (variances) and sum up to 4096 products of two:
# with every intermediate within ±1e150, squares and sums stay far inside float64.
WORKED_RANGE = 1e150


def _largest(m: Any) -> float:
    if m is None:
        return 0.0
    flat = [abs(x) for row in m for x in (row if isinstance(row, list) else [row])]
    return max((x for x in flat if x != float("inf")), default=0.0)


def _worked_part_range(part: Any, at: Loc) -> None:
    def refuse(name: str, what: str) -> None:
        raise SpecFieldError((*at, name), f"{what} beyond ±{WORKED_RANGE:.0e}, where the "
                             "example's products and squares would overflow float64; "
                             "use smaller numbers")

    if part.kind == "variance" and part.values is not None:
        top = _largest(part.values)
        if top > WORKED_RANGE:
            refuse("values", "values reach")
        if part.divisor is not None and top / part.divisor > WORKED_RANGE:
            refuse("divisor", "values ÷ divisor reach")
    elif part.kind == "scaling-arithmetic":
        for name in ("variances", "factors"):
            if _largest(getattr(part, name)) > WORKED_RANGE:
                refuse(name, f"{name} reach")
    elif part.kind == "attention":
        products = [("embeddings", "w_q"), ("embeddings", "w_k"), ("embeddings", "w_v"),
                    ("q", "k")]
        score = _largest(part.scores)
        if score > WORKED_RANGE:
            refuse("scores", "scores reach")
        for a, b in products:
            ma, mb = getattr(part, a), getattr(part, b)
            if ma is None or mb is None:
                continue
            width = max(len(row) for row in ma)
            bound = _largest(ma) * _largest(mb) * width
            if bound > WORKED_RANGE:
                refuse(b, f"products of {a} and {b} can reach {bound:.2g},")
            if (a, b) == ("q", "k"):
                score = max(score, bound)
        d_k = part.d_k or (max(len(row) for row in part.k) if part.k else 1)
        divisor = d_k ** 0.5 if part.scale == "sqrt" else float(part.scale)
        if score / divisor > WORKED_RANGE:
            refuse("scale", f"scores ÷ {divisor:.3g} reach")
