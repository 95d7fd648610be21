"""The worked-example spec: a document's small examples, replayed exactly and audited."""

from __future__ import annotations

import difflib
import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, model_validator

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.spec.common import Float, Model, PosInt, SpecBase

# What a `documented:` entry can name (`part:` picks the part; it may be left out when there
# is only one). Indices pick entries: `weights[1]` with a list value compares a whole row,
# `scores[0][2]` one number.
#   attention: q, k, v, products (q_i·k_j term by term), scores, scaled_scores,
#     unscaled_weights, weights, unscaled_output, output, output_terms (weights[i][j]·v_j),
#     exp_scores, exp_sums, exp_scaled_scores, exp_scaled_sums, d_k, sqrt_d_k,
#     variance.<scores|scaled_scores>.<population|sample>, mean.<scores|scaled_scores>,
#     <unscaled_weights|weights>.<max|min>; `printed.*` the same with the document's own
#     divisor (scale: 1.73), `from_weights.*` the embeddings·weights path.
#   variance: values, scaled_values, divisor, mean.<values|scaled_values>,
#     variance.<values|scaled_values>.<population|sample>.
#   scaling-arithmetic: dims, variances, factor (1/√d), scaled_variance (Var/d), ratio
#     (Var/Var of the first dim), expected_ratio (d/first d); printed.factor and
#     printed.scaled_variance (factor² × Var with the printed factors).
#   cost: d_k, projection, projections, scores_per_head, scores, softmax_per_head, softmax,
#     weighted_sum_per_head, weighted_sum, output_projection, quadratic_term, linear_term,
#     crossover_n, total.
# A variance written without .population or .sample (documents rarely say which) is compared
# with the closer of the two, and the audit names the one it used.

# A worked example is done by hand: beyond this many entries a matrix is a data set, and the
# step panels would be pages long.
MAX_ENTRIES = 4096

PART_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,59}$"


def _parse_scale(v: Any) -> Any:
    """'sqrt', or the number a document actually divided by (e.g. 1.73 for √3)."""
    if isinstance(v, str):
        if v == "sqrt":
            return v
        close = difflib.get_close_matches(v, ["sqrt"], n=1, cutoff=0.5)
        hint = " (did you mean 'sqrt'?)" if close else ""
        raise ValueError(f"must be sqrt or a positive number (the divisor the document used), "
                         f"got {v!r}{hint}")
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"must be sqrt or a positive number, got {v!r}")
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"must be a positive finite divisor, got {v!r}")
    return float(v)


Scale = Annotated[Any, BeforeValidator(_parse_scale)]
Row = Annotated[list[Float], Field(min_length=1)]
Matrix = Annotated[list[Row], Field(min_length=1)]  # a list of rows: [[1, 2], [3, 4]]


class Part(Model):
    """One example of a document. `kind` says which of the field groups below apply."""

    name: str = Field(pattern=PART_NAME)  # how documented entries and the report name it
    kind: Literal["attention", "variance", "scaling-arithmetic", "cost"]
    description: str = ""  # one line shown above the part's steps

    # --- kind: attention ---------------------------------------------------------------------
    # Q, K, V come from `q`/`k`/`v` as stated, or from embeddings·weights (row vectors:
    # Q = E·W_Q). When a document gives both, the steps follow the stated vectors (its later
    # numbers derive from them) and the weights path is replayed beside as `from_weights.*`.
    # `scores` gives QKᵀ directly (a document's softmax table with no Q or K behind it).
    tokens: list[str] | None = None  # labels of the query rows (and of the keys, if as many)
    key_tokens: list[str] | None = None  # labels of the key rows, when they differ
    embeddings: Matrix | None = None  # E, one row per token
    w_q: Matrix | None = None  # W_Q: Q = E·W_Q
    w_k: Matrix | None = None  # W_K: K = E·W_K
    w_v: Matrix | None = None  # W_V: V = E·W_V
    q: Matrix | None = None  # query vectors as the document states them, one per row
    k: Matrix | None = None  # key vectors as stated, one per row (so QKᵀ[i][j] = q_i·k_j)
    v: Matrix | None = None  # value vectors as stated, one per row
    scores: Matrix | None = None  # QKᵀ given directly (then d_k is required)
    d_k: PosInt | None = None  # key width; default: the width of K
    # The divisor of the scores. `sqrt`: √d_k. A number: the divisor the document actually used
    # (1.73 for √3); the steps still follow ÷√d_k, and the document's divisor is replayed
    # beside as `printed.*`, so the audit shows what the rounding did.
    scale: Scale = "sqrt"
    exp_tables: bool = False  # show exp(score) tables and their row sums, as documents do

    # --- kind: variance ----------------------------------------------------------------------
    values: Annotated[list[Float], Field(min_length=2)] | None = None  # the numbers
    divisor: Float | None = Field(None, gt=0)  # divide every number by this ("scale it")

    # --- kind: scaling-arithmetic ------------------------------------------------------------
    # A document's per-dimension variances (its own inputs, taken as given), the factor 1/√d
    # applied to each, and the claims made with the results.
    dims: Annotated[list[PosInt], Field(min_length=1)] | None = None  # e.g. [1, 2, 3]
    variances: Annotated[list[Float], Field(min_length=1)] | None = None  # one per dim
    factors: Annotated[list[Float], Field(min_length=1)] | None = None  # as printed: 0.707…

    # --- kind: cost --------------------------------------------------------------------------
    n: PosInt | None = None  # sequence length
    d: PosInt | None = None  # model width
    h: PosInt | None = None  # number of heads (d_k = d / h)


    @property
    def title(self) -> str:
        """The part as a reader knows it: its description up to the colon ("Steps 1-5"),
        never the spec's identifier ("stated-vectors") when a description is given."""
        return part_title(self.name, self.description)


def part_title(name: str, description: str) -> str:
    """A part's heading: its description up to the first colon, else its name in words."""
    text = description.split(":")[0].strip()
    return text or name.replace("-", " ")


COMMON_FIELDS = ("name", "kind", "description")
FIELDS_BY_KIND: dict[str, tuple[str, ...]] = {
    "attention": ("tokens", "key_tokens", "embeddings", "w_q", "w_k", "w_v", "q", "k", "v",
                  "scores", "d_k", "scale", "exp_tables"),
    "variance": ("values", "divisor"),
    "scaling-arithmetic": ("dims", "variances", "factors"),
    "cost": ("n", "d", "h"),
}
_DEFAULTS = {"scale": "sqrt", "exp_tables": False}


def _given(part: Part, field: str) -> bool:
    value = getattr(part, field)
    return value is not None and (field not in _DEFAULTS or value != _DEFAULTS[field])


def shape(m: list[list[float]]) -> tuple[int, int]:
    return len(m), len(m[0])


def _fmt_shape(s: tuple[int, int]) -> str:
    return f"{s[0]}×{s[1]}"


class WorkedExampleSpec(SpecBase):
    """A document's worked examples: one or more parts, each replayed step by step."""

    draws_random: ClassVar[bool] = False  # nothing is random: no seed is drawn
    # The replayed parts, computed once per spec by the study (its check of the documented
    # entries and its run both read them); never part of the spec's data.
    _computed: Any = PrivateAttr(default=None)

    study: Literal["worked-example"] = "worked-example"
    expand: bool = Field(
        False,
        description="Show every QKᵀ entry as its dot-product expansion (--expand).")
    parts: list[Part] = Field(min_length=1, description="The examples, in the document's order.")

    @model_validator(mode="after")
    def _parts_make_sense(self) -> WorkedExampleSpec:
        seen: dict[str, int] = {}
        for i, part in enumerate(self.parts):
            at = ("parts", i)
            if part.name in seen:
                raise SpecFieldError((*at, "name"),
                                     f"parts[{seen[part.name]}] is already named {part.name!r}")
            seen[part.name] = i
            for kind, fields in FIELDS_BY_KIND.items():
                if kind == part.kind:
                    continue
                for f in fields:
                    if f not in FIELDS_BY_KIND[part.kind] and _given(part, f):
                        raise SpecFieldError(
                            (*at, f), f"belongs to a {kind} part, not to this {part.kind} part")
            {
                "attention": _check_attention,
                "variance": _check_variance,
                "scaling-arithmetic": _check_scaling,
                "cost": _check_cost,
            }[part.kind](part, at)
        return self


def _need(part: Part, at: tuple[str | int, ...], *fields: str) -> None:
    for f in fields:
        if getattr(part, f) is None:
            raise SpecFieldError((*at, f), f"is required for a {part.kind} part")


def _count(n: int) -> str:
    return f"{n} number" if n == 1 else f"{n} numbers"


def _check_matrix(m: list[list[float]] | None, loc: tuple[str | int, ...]) -> None:
    """Rows of equal length, and hand-sized."""
    if m is None:
        return
    width = len(m[0])
    for r, row in enumerate(m):
        if len(row) != width:
            raise SpecFieldError((*loc, r), f"has {_count(len(row))} but row 0 has "
                                 f"{_count(width)}; every row of a matrix needs the same length")
    if len(m) * width > MAX_ENTRIES:
        raise SpecFieldError(loc, f"has {len(m) * width} entries; a worked example is done by "
                             f"hand (at most {MAX_ENTRIES})")


def _check_attention(part: Part, at: tuple[str | int, ...]) -> None:
    for f in ("embeddings", "w_q", "w_k", "w_v", "q", "k", "v", "scores"):
        _check_matrix(getattr(part, f), (*at, f))
    e = part.embeddings
    if e is None:
        for w in ("w_q", "w_k", "w_v"):
            if getattr(part, w) is not None:
                raise SpecFieldError((*at, w), f"needs embeddings ({w[-1].upper()} = "
                                     f"embeddings · {w})")
    elif all(getattr(part, w) is None for w in ("w_q", "w_k", "w_v")):
        raise SpecFieldError((*at, "embeddings"), "are not used without w_q, w_k or w_v; give "
                             "the weight matrices, or leave the embeddings out")
    if e is not None:
        width = len(e[0])
        for w in ("w_q", "w_k", "w_v"):
            m = getattr(part, w)
            if m is not None and len(m) != width:
                raise SpecFieldError((*at, w), f"has {len(m)} rows but the embeddings have "
                                     f"{width} columns; embeddings · {w} needs them equal")
    if part.scores is not None:
        for f in ("q", "k", "embeddings"):
            if getattr(part, f) is not None:
                raise SpecFieldError((*at, f), "give scores, or the vectors behind them, not "
                                     "both")
        if part.d_k is None:
            raise SpecFieldError((*at, "d_k"), "is required with scores given directly (there "
                                 "is no key to measure)")
        n_keys = len(part.scores[0])
        n_queries = len(part.scores)
    else:
        projected = _projected_shapes(part)
        for x in ("q", "k"):
            if getattr(part, x) is None and projected[x] is None:
                raise SpecFieldError((*at, x), f"is required: give {x}, or embeddings with "
                                     f"w_{x}")
        for x in ("q", "k", "v"):
            stated, proj = getattr(part, x), projected[x]
            if stated is not None and proj is not None and shape(stated) != proj:
                raise SpecFieldError((*at, x), f"is {_fmt_shape(shape(stated))} but embeddings "
                                     f"· w_{x} is {_fmt_shape(proj)}; they cannot be compared")
        q_shape = shape(part.q) if part.q is not None else projected["q"]
        k_shape = shape(part.k) if part.k is not None else projected["k"]
        assert q_shape is not None and k_shape is not None
        if q_shape[1] != k_shape[1]:
            where = "k" if part.k is not None else "w_k"
            raise SpecFieldError((*at, where), f"gives keys of width {k_shape[1]} but queries "
                                 f"have width {q_shape[1]}; q·k needs equal widths")
        if part.d_k is not None and part.d_k != k_shape[1]:
            raise SpecFieldError((*at, "d_k"), f"is the key width, {k_shape[1]}, here; leave it "
                                 "out or make them agree")
        n_keys, n_queries = k_shape[0], q_shape[0]
    v_shape = shape(part.v) if part.v is not None else (
        _projected_shapes(part)["v"] if part.scores is None else None)
    if v_shape is not None and v_shape[0] != n_keys:
        where = "v" if part.v is not None else "w_v"
        raise SpecFieldError((*at, where), f"gives {v_shape[0]} value rows for {n_keys} keys; "
                             "each key needs one value row")
    if part.tokens is not None and len(part.tokens) != n_queries:
        raise SpecFieldError((*at, "tokens"), f"has {len(part.tokens)} labels for {n_queries} "
                             "query rows")
    if part.key_tokens is not None and len(part.key_tokens) != n_keys:
        raise SpecFieldError((*at, "key_tokens"), f"has {len(part.key_tokens)} labels for "
                             f"{n_keys} keys")


def _projected_shapes(part: Part) -> dict[str, tuple[int, int] | None]:
    """Shapes of E·W_Q, E·W_K, E·W_V where both factors are given."""
    out: dict[str, tuple[int, int] | None] = {}
    for x in ("q", "k", "v"):
        w = getattr(part, f"w_{x}")
        out[x] = (len(part.embeddings), len(w[0])) if part.embeddings is not None and \
            w is not None else None
    return out


def _check_variance(part: Part, at: tuple[str | int, ...]) -> None:
    _need(part, at, "values")


def _check_scaling(part: Part, at: tuple[str | int, ...]) -> None:
    _need(part, at, "dims", "variances")
    assert part.dims is not None and part.variances is not None
    if len(part.variances) != len(part.dims):
        raise SpecFieldError((*at, "variances"), f"has {len(part.variances)} numbers for "
                             f"{len(part.dims)} dims; give one variance per dimension")
    if part.factors is not None and len(part.factors) != len(part.dims):
        raise SpecFieldError((*at, "factors"), f"has {len(part.factors)} numbers for "
                             f"{len(part.dims)} dims; give one factor per dimension")
    for i, v in enumerate(part.variances):
        if v < 0:
            raise SpecFieldError((*at, "variances", i), f"is {v:g}: a variance is the mean of "
                                 "squares and cannot be negative")
    if part.variances[0] == 0:
        raise SpecFieldError((*at, "variances", 0), "is the reference the others are compared "
                             "with; it cannot be 0")


def _check_cost(part: Part, at: tuple[str | int, ...]) -> None:
    _need(part, at, "n", "d", "h")
    assert part.d is not None and part.h is not None
    if part.d % part.h:
        raise SpecFieldError((*at, "h"), f"d = {part.d} is not divisible by {part.h} heads")
