"""Fields every spec shares: identity, seed, and the document's printed numbers to audit."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    field_validator,
    model_validator,
)

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.io import names
from sdpa_cli.numerics.formula import formula_problem
from sdpa_cli.numerics.scaling import Scaling

NAME_PATTERN = names.PATTERN  # a folder name that cannot climb out
# Files a batch folder holds beside its run folders: no run may take their names.
RESERVED_NAMES = names.RESERVED

# Work guard: more random draws than this would run for hours; refuse up front (exit 2).
MAX_DRAWS = 10**12

# σ_w⁸ = 1e-280 (the spread of the scores' second moment) stays a normal float64; at 1e-50
# gradients' check said "not finite", at 1e-300 every value was 0 and the checks passed, and
# depth's gradients were exactly 0 from 1e-160 (an internal error at 1e-300).
MIN_INIT_STD = 1e-35


def refuse_vanishing_init(init_std: float) -> None:
    """The one refusal of a weight scale whose measurements float64 rounds to exactly 0
    (gradients, depth: every study whose weights are drawn with init_std)."""
    if init_std < MIN_INIT_STD:
        raise SpecFieldError(("init_std",), f"init_std {init_std:g} is below "
                             f"{MIN_INIT_STD:g}: the scores' second moment grows like "
                             "init_std⁴ and its spread like init_std⁸, which float64 rounds "
                             "to 0 (every value 0, and checks that pass on zeros); "
                             f"give init_std ≥ {MIN_INIT_STD:g}")


class Model(BaseModel):
    """Strict-shaped, immutable models: unknown keys and non-finite numbers are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _no_bool(kind: str) -> Any:
    def check(v: Any) -> Any:
        # YAML true/false would otherwise pass as 1/0 for a number field.
        if isinstance(v, bool):
            raise ValueError(f"must be {kind}, got {str(v).lower()}")
        return v

    return BeforeValidator(check)


Int = Annotated[int, _no_bool("a whole number")]
Float = Annotated[float, _no_bool("a number")]
PosInt = Annotated[int, _no_bool("a whole number"), Field(ge=1)]
# How many standard errors a Monte Carlo check allows: every study that draws at random has
# this field (its declaration is refused without it), typed once here.
SeTolerance = Annotated[float, _no_bool("a number"),
                        Field(gt=0, description="A check passes when |z| ≤ K (default 4).")]


_MINUS_INF = {"-inf", "-.inf", "-infinity", "−inf", "−.inf"}


def _score_in(v: Any) -> Any:
    if isinstance(v, str) and v.strip().lower() in _MINUS_INF:
        return -math.inf
    if isinstance(v, bool):
        raise ValueError(f"must be a number, got {str(v).lower()}")
    return v


def _score_out(x: float) -> float:
    if math.isnan(x) or x == math.inf:
        raise ValueError(f"must be a finite number or -inf (a masked key), got {x}")
    return x


# A softmax input: any finite number, or -inf for a masked key (weight exactly 0).
Score = Annotated[
    float, Field(allow_inf_nan=True), BeforeValidator(_score_in), AfterValidator(_score_out),
    PlainSerializer(lambda x: "-inf" if x == -math.inf else x),
]


def _parse_scaling(v: Any) -> Scaling:
    if isinstance(v, Scaling):
        return v
    if not isinstance(v, str):
        raise ValueError(f"a scaling is a word such as 'sqrt' or 'temperature:8', got {v!r}")
    return Scaling.parse(v)


ScalingField = Annotated[
    Scaling, BeforeValidator(_parse_scaling), PlainSerializer(lambda s: s.label, return_type=str)
]


def refuse_repeats(field: str, items: Sequence[Any], *, show: Callable[[Any], str] = repr
                   ) -> None:
    """The one check of a list that must not repeat an item (dims, keys, scalings by label,
    optimisers, …): SpecFieldError at the second occurrence, `shown` as the message says it."""
    seen: set[Any] = set()
    for i, item in enumerate(items):
        if item in seen:
            raise SpecFieldError((field, i), f"{show(item)} is listed twice")
        seen.add(item)


def scalings(*labels: str, description: str | None = None) -> Any:
    """A default list of scaling rules (defaults are not validated, so parse them here)."""
    return Field(default_factory=lambda: [Scaling.parse(x) for x in labels], min_length=1,
                 description=description)


# --- printed numbers ------------------------------------------------------------------------

_PRINTED = re.compile(
    r"""^\s*(?P<approx>≈|~)?\s*
    (?P<sign>[-+−])?
    (?P<int>\d{1,3}(?:,\d{3})+|\d*)
    (?:\.(?P<frac>\d*))?
    (?:\s*(?:[eE](?P<exp>[-+]?\d+)|[×x]\s*10\^(?P<exp10>[-+]?\d+)))?
    \s*(?P<pct>%)?\s*$""",
    re.X,
)


@dataclass(frozen=True)
class Printed:
    """A number as a document printed it: its value and the unit of its last digit."""

    value: float
    unit: float  # 1 for "16", 0.01 for "16.05", 0.001 for "94.7%"
    text: str
    approx: bool = False  # printed with "≈" or "~"

    @classmethod
    def parse(cls, raw: Any) -> Printed:
        if isinstance(raw, Printed):
            return raw
        if isinstance(raw, bool) or raw is None:
            raise ValueError(f"a documented value must be a number, got {raw!r}")
        text = repr(raw) if isinstance(raw, float) else str(raw)
        m = _PRINTED.match(text)
        if not m or not (m["int"] or m["frac"]):
            raise ValueError(f"cannot read {text!r} as a printed number")
        digits = m["int"].replace(",", "") or "0"
        frac = m["frac"] or ""
        exp_text = (m["exp"] or m["exp10"] or "0").lstrip("+-")
        # Counted before int(): an exponent of 5000 digits is past Python's limit on parsing
        # digits, and one of 400 overflows 10.0 ** exp (OverflowError, not a ValueError).
        if len(exp_text.lstrip("0")) > 5:
            raise ValueError(f"{_short(text)}: an exponent of {len(exp_text)} digits is beyond "
                             "float64's range")
        exp = int(m["exp"] or m["exp10"] or 0)
        value = float(f"{digits}.{frac or '0'}e{exp}")
        if not math.isfinite(value):
            raise ValueError(f"{_short(text)} is beyond float64's range (about ±1.8e+308)")
        if value == 0 and (digits + frac).strip("0"):
            raise ValueError(f"{_short(text)} is below float64's smallest number (5e-324); "
                             "it would be read as 0")
        try:
            unit = 10.0 ** (exp - len(frac))
        except OverflowError:
            raise ValueError(f"{_short(text)}: its last digit's unit is beyond float64's "
                             "range") from None
        if m["pct"]:
            value, unit = value / 100.0, unit / 100.0
        if m["sign"] in ("-", "−"):
            value = -value
        return cls(value, unit, text.strip(), bool(m["approx"]))


def _short(text: str, limit: int = 40) -> str:
    """repr() of a printed value for a one-line message, cut to `limit` characters."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit - 4] + "...'"


PrintedTree = Printed | list["PrintedTree"]


def _parse_tree(v: Any) -> PrintedTree:
    """A printed number, or a (nested) list of them, e.g. a row of softmax weights."""
    if isinstance(v, list):
        if not v:
            raise ValueError("an empty list documents nothing")
        return [_parse_tree(item) for item in v]
    return Printed.parse(v)


def _dump_tree(v: PrintedTree) -> Any:
    return [_dump_tree(item) for item in v] if isinstance(v, list) else v.text


PrintedValue = Annotated[Any, BeforeValidator(_parse_tree), PlainSerializer(_dump_tree)]

QUANTITY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\[\d+\])*$"


class Documented(Model):
    """A number the document prints, with where it appears and how to compare it."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              populate_by_name=True)

    where: str = Field(min_length=1)  # section or line of the document
    # The publication the number comes from when it is not the spec's own document (a paper,
    # a library's documentation): the audit then names it instead of the spec's `source:`.
    cites: str | None = Field(None, min_length=1)
    quantity: str = Field(pattern=QUANTITY_PATTERN)  # e.g. variance, probs[0], weights[1][2]
    row: dict[str, str | int | float] = {}  # picks one row of the table, e.g. {dim: 16}
    part: str | None = None  # worked examples: which part of the example
    value: PrintedValue  # as printed; a list is compared element by element
    approx: bool = False  # printed with "≈": allow a whole unit of the last digit
    tolerance: float | None = Field(None, ge=0)  # absolute, replaces the printed-digit rule
    rel_tolerance: float | None = Field(None, ge=0)  # relative to the computed value
    accepted: str | None = None  # why a known mismatch is accepted (kept in the audit)
    note: str | None = None  # shown beside the finding
    # Root causes (issue 28). `replay`: the arithmetic the document did from its own printed
    # numbers, e.g. "6.89 / 3"; a mismatch it reproduces is `rounding`, or `carried` when
    # `from` names a printed value that is itself wrong. `cause` overrides the classification
    # (`inconsistent`: disagrees with values the document prints elsewhere). `material`: the
    # conclusion of the document this error flips, in a few words.
    replay: str | None = Field(None, min_length=1)
    from_: str | None = Field(None, alias="from", pattern=QUANTITY_PATTERN)
    cause: Literal["own", "carried", "rounding", "inconsistent"] | None = None
    material: str | None = Field(None, min_length=1)

    @field_validator("replay")
    @classmethod
    def _replay_reads(cls, v: str | None) -> str | None:
        problem = formula_problem(v) if v is not None else None
        if problem:
            raise ValueError(f"cannot read {v!r} as arithmetic ({problem})")
        return v

    @field_validator("row", mode="before")
    @classmethod
    def _row_values(cls, v: Any) -> Any:
        if isinstance(v, dict):
            for key, item in v.items():
                if isinstance(item, bool) or not isinstance(item, str | int | float):
                    raise ValueError(f"row key {key!r} needs a number or a word")
        return v


class ClaimRef(Model):
    """Another measured quantity of the run, for `than:`."""

    quantity: str = Field(pattern=QUANTITY_PATTERN)
    row: dict[str, str | int | float] = {}
    part: str | None = None
    # compared with this multiple of the quantity ("less than a tenth of ÷√d_k's"); with a
    # `range:` on the test, the multiples a reader could fairly choose instead
    times: float = Field(1.0, gt=0)


class ClaimTest(Model):
    """One measurement a claim is held against: a quantity of this run (picked like a
    documented number, by `row:` or `part:`) compared with a threshold sdpa sets, or with
    another quantity of the run (`than:`)."""

    quantity: str = Field(pattern=QUANTITY_PATTERN)
    row: dict[str, str | int | float] = {}
    part: str | None = None
    op: Literal["<", ">", "≈"]
    value: float | None = None  # the threshold (sdpa's bar, never a document's result)
    than: ClaimRef | None = None  # or: compared with this quantity of the same run
    tolerance: float | None = Field(None, ge=0)  # for ≈: absolute slack
    # The span of thresholds a reader could fairly choose instead of `value` (a threshold of
    # < or > needs one): the verdict is reported as fragile when it flips inside the span.
    range: tuple[float, float] | None = None

    @model_validator(mode="after")
    def _one_side(self) -> ClaimTest:
        if (self.value is None) == (self.than is None):
            raise ValueError("give exactly one of value: (a threshold) or than: (a quantity)")
        if self.range is not None:
            lo, hi = self.range
            bar = self.value if self.value is not None else (
                self.than.times if self.than is not None and self.than.times != 1.0 else None)
            if bar is None or self.op == "≈":
                raise ValueError("range: belongs to a threshold (value:, or than: with times:, "
                                 "with < or >)")
            if not lo <= bar <= hi:
                raise ValueError(f"range: must hold the threshold {bar:g}, "
                                 f"got [{lo:g}, {hi:g}]")
        return self


class Claim(Model):
    """A statement of the document (numeric or qualitative), paraphrased, and the tests this
    spec's run holds it to: holds (all pass), partly (some), fails (none), or untested."""

    where: str = Field(min_length=1)  # section or line of the document
    # The document file when it is not the spec's own (a claim several documents make is
    # judged where it is measured).
    document: str | None = Field(None, pattern=r"^\S+\.(txt|md|ipynb)$")
    claim: str = Field(min_length=1)  # the statement in sdpa's words (never copied)
    # What the claim takes for granted (saturation happens, the variance is stable): tested
    # and reported beside the verdict, never part of it; when it fails the claim is untested.
    premise: list[ClaimTest] = []
    tests: list[ClaimTest] = []  # the decisive tests: the verdict is theirs
    untested: str | None = Field(None, min_length=1)  # why no run here can measure it
    note: str | None = None  # what the verdict rests on, in a few words
    # Several specs may judge one claim; the batch shows one verdict, that of the specs that
    # decide. A spec that tests it beyond the claim's own setting says so here, and then
    # does not decide (its verdict is shown beside the deciding one).
    beyond: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _tested_or_why(self) -> Claim:
        if not self.tests and not self.untested:
            raise ValueError("a claim needs tests: or untested: (the reason)")
        if self.tests and self.untested:
            raise ValueError("a claim has tests: or untested:, not both")
        if self.premise and not self.tests:
            raise ValueError("premise: needs tests: (the premise is reported beside them)")
        return self


class Answer(Model):
    """The part of the answer to "why √d_k?" this run gives: report.html and index.md open
    on each such run's first `found:` lines and its key figure, in the order of `step`."""

    step: PosInt = Field(description="Its place in the answer (1 first).")
    topic: str = Field(min_length=1, max_length=60, description="What it is about, in a "
                       "few words ('The variance of q·k').")
    found: PosInt = Field(1, le=5, description="How many of its first found: lines to quote.")
    figure: str | None = Field(None, min_length=1, max_length=100, description="Its key "
                               "figure's name (default: its first figure).")


class SpecBase(Model):
    """Identity and bookkeeping shared by every study."""

    # False for a study that draws nothing at random: no seed is drawn for it, so its
    # resolved spec (and results.json) is the same from run to run.
    draws_random: ClassVar[bool] = True

    @classmethod
    def needs_seed(cls, data: dict[str, Any]) -> bool:
        """Does a run of this (not yet validated) spec draw random numbers?"""
        return cls.draws_random

    study: str
    name: str | None = Field(None, pattern=NAME_PATTERN)  # output folder; default: file stem
    title: str = ""  # one line shown above the table
    source: str = ""  # document file and section this spec reproduces
    description: str = ""  # one line for listings and the report
    seed: Int | None = Field(None, ge=0)  # entropy of the run; drawn and recorded if absent
    documented: list[Documented] = []  # the document's printed numbers, audited
    claims: list[Claim] = []  # the document's statements this run judges (issue 28)
    answer: Answer | None = None  # its part of the answer the batch report opens on
    # This run judges its claims (its spec's and those its study states itself) beyond their
    # own setting, and says how: in a batch they are shown beside the deciding verdict.
    beyond: str | None = Field(None, min_length=1)
    # The shipped specs whose rows hold the same values as this spec's and that print numbers
    # of the same document (set by the loader): the audit reads their printed numbers beside
    # this spec's own, as one document (framework.document). Not a field: never written.
    _siblings: tuple[Any, ...] = PrivateAttr(default=())

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, v: str | None) -> str | None:
        why = names.reserved_problem(v) if v is not None else None
        if why:
            raise ValueError(why)
        return v

    @classmethod
    def resolve_paths(cls, data: dict[str, Any], base: Path) -> dict[str, Any]:
        """A spec's raw fields with the file names it gives made relative to `base`, its
        own folder (most specs name no files)."""
        return data

    @property
    def document(self) -> str:
        """The document file named in `source` (the part before the first comma)."""
        return self.source.split(",")[0].strip()

    @property
    def siblings(self) -> tuple[SpecBase, ...]:
        """The sibling specs the loader found (empty for a spec built in code)."""
        return self._siblings

    def input_record(self) -> dict[str, Any]:
        """What entered the study, for `sdpa run`'s unchanged check: the resolved spec, and
        the printed numbers of the sibling specs its audit reads beside its own."""
        doc = self.model_dump(mode="json")
        if self._siblings:
            doc["_siblings"] = [{"name": s.name, "source": s.source,
                                 "documented": s.model_dump(mode="json")["documented"]}
                                for s in self._siblings]
        return doc

    @property
    def entropy(self) -> int:
        """The seed once drawn (spec.load draws and records one for a study that needs it)."""
        assert self.seed is not None, "the seed is drawn when the spec is loaded"
        return int(self.seed)
