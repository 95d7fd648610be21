"""The saturation specs: where softmax scores come from, for softmax-sweep and jacobian."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.common import (
    MAX_DRAWS,
    Float,
    Int,
    PosInt,
    ScalingField,
    Score,
    SeTolerance,
    refuse_repeats,
    scalings,
)
from sdpa_cli.spec.vectors import VectorLawFields

PosFloat = Annotated[float, Field(gt=0)]
Keys = Annotated[int, Field(ge=2, le=1 << 20)]

MAX_SCORES = 4096  # explicit score vectors: a page of YAML, and n up to 4096 everywhere
MAX_SEQUENCE = 4096  # source 2 holds one n × n score matrix per trial in memory
BATCHES = 20  # fixed batches of trials for the standard error of a median (batch means)
MEDIAN_BATCH_VALUES = 1 << 24  # per-row values held for one batch median (128 MB)

# Which source each optional key belongs to; a key set away from its source is an error.
_ONLY = {
    "scales": ("explicit",),
    "dim": ("explicit", "leading"),
    "keys": ("vectors", "gaussian", "leading"),
    "trials": ("vectors", "gaussian"),
    "threshold": ("vectors", "gaussian"),
    "distribution": ("vectors",),
    "mean": ("vectors",),
    "std": ("vectors",),
    "correlation": ("vectors",),
    "mask": ("vectors",),
    "additive": ("vectors",),
    "se_tolerance": ("vectors", "gaussian"),
    "mark_dims": ("gaussian",),
}
_SOURCE_TEXT = {
    "explicit": "explicit scores (scores)",
    "vectors": "random queries and keys (dims, or d_model with heads)",
    "gaussian": "random Gaussian scores (score_stds)",
    "leading": "one key leading n − 1 tied keys (margin)",
}
DEFAULT_KEYS = {"vectors": (10,), "gaussian": (16, 128, 1024),
                "leading": (2, 8, 64, 512, 4096, 32768)}


class SaturationFields(VectorLawFields):
    """Where the scores fed to softmax come from, and how many are drawn.

    Exactly one source: `scores` (explicit scores times multipliers), `dims` or
    `d_model` + `heads` (random queries and keys under each scaling rule), or `score_stds`
    (random N(0, s²) scores).
    """

    # Scores are formed as QKᵀ directly: with |mean| beyond 1e6·std the spread of the scores
    # (about mean·std·√d) would sink below float64's resolution of their size (d·mean²).
    MAX_MEAN_RATIO: ClassVar[float] = 1e6

    @classmethod
    def needs_seed(cls, data: dict[str, Any]) -> bool:
        # Explicit scores and the leading-key family are exact: no seed, same every run.
        return data.get("scores") is None and data.get("margin") is None

    # source 1: explicit scores
    scores: list[Score] | None = Field(
        None, min_length=1, max_length=MAX_SCORES,
        description="Source 1: explicit scores (negative numbers are values).")
    # multipliers (default [1])
    scales: list[PosFloat] | None = Field(
        None, min_length=1,
        description="Source 1: multipliers of the scores (default 1).")
    # with scalings: multipliers are the rules' factors at this d_k
    dim: PosInt | None = Field(
        None,
        description="Source 1: d_k of the scores; multipliers come from --scalings.")
    # source 2: random queries and keys (distribution, mean, std, correlation, d_model and
    # heads come from VectorLawFields)
    # d_k values
    dims: list[PosInt] | None = Field(
        None, min_length=1,
        description="Source 2: d_k of random queries and keys.")
    # applied to the same draws
    scalings: list[ScalingField] = scalings(
        "none", "sqrt",
        description=("none sqrt linear sqrt-half temperature:T power:P cosine[:TAU] qknorm[:rms] "
                     "softcap:C logn:S linear:C mup[:C] (default none sqrt)."))
    # causal: query i sees keys 0…i
    mask: Literal["none", "causal"] = Field(
        "none",
        description="Source 2: none (default) | causal.")
    # hidden width h of additive (Bahdanau) scores vᵀtanh(W₁q + W₂k), drawn beside the rules
    additive: PosInt | None = Field(
        None,
        description="Source 2: also additive scores vᵀtanh(W₁q + W₂k), hidden width H.")
    # source 3: random Gaussian scores
    # s of the N(0, s²) scores
    score_stds: list[PosFloat] | None = Field(
        None, min_length=1,
        description="Source 3: std s of iid N(0, s²) scores.")
    # source 4: the leading-key family, exact: one key leads the n − 1 others by margin (q·k)
    margin: Float | None = Field(
        None,
        description="Source 4: one key leads n − 1 tied keys by G, exactly (no draws).")
    # sources 2, 3 and 4
    # n (default 10, or 16 128 1024)
    keys: list[Keys] | None = Field(
        None, min_length=1,
        description="Sources 2-4: keys per row (default 10; 16 128 1024 for source 3).")
    # score rows (source 3) / sequences (source 2)
    trials: Int = Field(
        2000, ge=2, le=10**7,
        description="Sources 2, 3: sequences / score rows per cell (default 2000).")
    # a score-variance check passes when |z| ≤ this
    se_tolerance: SeTolerance = Field(
        4.0,
        description="Score-law checks pass when |z| ≤ K (default 4).")

    @property
    def score_source(self) -> str:
        """'explicit', 'vectors' or 'gaussian' (validated to be exactly one)."""
        return next(iter(self._given_sources()))

    @property
    def dim_list(self) -> list[int]:
        """Source 2's d_k values: dims, or d_model/heads."""
        if self.d_model is not None and self.heads is not None:
            return [self.d_model // self.heads]
        return list(self.dims or [])

    @property
    def key_list(self) -> list[int]:
        """n values of sources 2 and 3, with the source's default."""
        if self.keys is not None:
            return list(self.keys)
        return list(DEFAULT_KEYS.get(self.score_source, ()))

    @property
    def uses_rules(self) -> bool:
        """Explicit scores go through the scaling rules: dim given, or scalings set."""
        return self.score_source == "explicit" and (
            self.dim is not None or not self._is_default("scalings"))

    @property
    def scale_list(self) -> list[float]:
        """Source 1's multipliers given as scales (default: the scores as they are)."""
        return list(self.scales) if self.scales is not None else [1.0]

    def _given_sources(self) -> dict[str, list[str]]:
        given = {
            "explicit": ["scores"] if self.scores is not None else [],
            "vectors": [k for k in ("dims", "d_model") if getattr(self, k) is not None],
            "gaussian": ["score_stds"] if self.score_stds is not None else [],
            "leading": ["margin"] if self.margin is not None else [],
        }
        return {k: v for k, v in given.items() if v}

    def _is_default(self, name: str) -> bool:
        info = type(self).model_fields[name]
        return bool(getattr(self, name) == info.get_default(call_default_factory=True))

    @model_validator(mode="after")
    def _source_rules(self) -> SaturationFields:
        given = self._given_sources()
        if not given:
            raise SpecFieldError((), "say where the scores come from: give one of " +
                                 "; ".join(_SOURCE_TEXT.values()))
        if len(given) > 1:
            keys = [k for ks in given.values() for k in ks]
            # Field names only: the spec layer knows no flags (a flag given on the command
            # line is named in front of the message by the CLI layer).
            named = " and ".join(keys)
            raise SpecFieldError((keys[-1],), f"{named} choose different score sources; give "
                                 "only one of " + "; ".join(_SOURCE_TEXT.values()))
        source = self.score_source
        for name, sources in _ONLY.items():
            if name in type(self).model_fields and source not in sources \
                    and not self._is_default(name):
                where = " or ".join(_SOURCE_TEXT[s] for s in sources)
                raise SpecFieldError((name,), f"applies to {where} only; this spec uses "
                                     f"{_SOURCE_TEXT[source]}")
        if self.method != "direct":
            raise SpecFieldError(("method",), "the saturation studies draw whole vectors; "
                                 "only method: direct applies")
        if source == "explicit":
            self._explicit_rules()
        elif source == "vectors":
            self._vector_rules()
        elif source == "leading":
            self._leading_rules()
        else:
            self._gaussian_rules()
        if source != "explicit":
            refuse_repeats("keys", self.key_list, show=str)
        return self

    def _explicit_rules(self) -> None:
        if self.scores is not None and all(x == float("-inf") for x in self.scores):
            raise SpecFieldError(("scores",), "every score is masked (-inf); softmax needs at "
                                 "least one finite score")
        if self.scales is not None and self.uses_rules:
            raise SpecFieldError(("scales",), "scales are plain multipliers; give scales, or "
                                 "scalings (with dim when a rule depends on d), not both")
        if not self.uses_rules:
            return
        for i, s in enumerate(self.scalings):
            if s.cosine or s.norm is not None:
                raise SpecFieldError(("scalings", i), f"{s.label} normalises q and k: it needs "
                                     "the vectors, not explicit scores")
            if self.dim is None and s.power != 0:
                raise SpecFieldError(("scalings", i), f"{s.label} depends on d_k: add dim "
                                     "(--dim) for explicit scores")
        refuse_repeats("scalings", [s.label for s in self.scalings])

    def _vector_rules(self) -> None:
        if self.dims is not None and self.d_model is not None:
            raise SpecFieldError(("dims",), "give dims or d_model with heads, not both")
        refuse_repeats("dims", self.dim_list)
        refuse_repeats("scalings", [s.label for s in self.scalings])
        for i, n in enumerate(self.key_list):
            if n > MAX_SEQUENCE:
                raise SpecFieldError(("keys", i), f"random queries and keys hold an n × n "
                                     f"score matrix; n may be at most {MAX_SEQUENCE}")
        n_rules = len(self.scalings)
        h = self.additive or 0
        work = sum(self.trials * (2 * n * d + n * n * (1 + n_rules) + (h * (d + 2 * n)
                                                                         if h else 0))
                   for d in self.dim_list for n in self.key_list)
        if self.additive is not None and self.mask != "none":
            raise SpecFieldError(("additive",), "additive scores are drawn one query per "
                                 "trial: mask: causal does not apply")
        self._work_guard(work)

    def _leading_rules(self) -> None:
        if self.dim is None and self._is_default("scalings"):
            object.__setattr__(self, "scalings", [Scaling.parse("none"), Scaling.parse("logn:1")])
        for i, s in enumerate(self.scalings):
            if s.cosine or s.norm is not None:
                raise SpecFieldError(("scalings", i), f"{s.label} normalises q and k: the "
                                     "leading-key family is given as scores")
            if self.dim is None and s.power != 0:
                raise SpecFieldError(("scalings", i), f"{s.label} depends on d_k: add dim "
                                     "(--dim) for the leading-key family")
        refuse_repeats("scalings", [s.label for s in self.scalings])

    def _gaussian_rules(self) -> None:
        stds = self.score_stds or []
        refuse_repeats("score_stds", stds)
        self._work_guard(self.trials * sum(self.key_list) * (1 + len(stds)))

    def _work_guard(self, work: int) -> None:
        if work > MAX_DRAWS:
            raise SpecFieldError(("trials",), f"would handle {work:.2g} random numbers and "
                                 f"scores (hours of work); the limit is {MAX_DRAWS:.0e}: lower "
                                 "trials, keys or dims")


class SoftmaxSweepSpec(SaturationFields):
    """Softmax weights as the scores grow: largest weight, entropy, saturation."""

    study: Literal["softmax-sweep"] = "softmax-sweep"
    # a row is saturated when max weight > this
    threshold: Float = Field(
        0.99, gt=0, lt=1,
        description="A row is saturated when its largest weight exceeds T (default 0.99).")


class JacobianSpec(SaturationFields):
    """The softmax Jacobian J = diag(p) − ppᵀ as the scores grow: vanishing gradients."""

    study: Literal["jacobian"] = "jacobian"
    # ≥ 2 per batch for median se
    trials: Int = Field(
        2000, ge=2 * BATCHES, le=10**7,
        description="Sources 2, 3: sequences / score rows per cell (default 2000).")
    # phase diagram: s = √d
    mark_dims: list[PosInt] = Field(
        default_factory=lambda: [64, 512],
        description="Phase diagram: mark unscaled attention at s = √d (default 64 512).")
    refine_peak: bool = Field(
        True,
        description="S* by golden section on the same draws (else grid parabola).")

    @model_validator(mode="after")
    def _median_memory(self) -> JacobianSpec:
        if self.score_source == "vectors":
            per_batch = -(-self.trials // BATCHES) * max(self.key_list)
            if per_batch > MEDIAN_BATCH_VALUES:
                raise SpecFieldError(("trials",), f"the median holds one batch of rows "
                                     f"(trials/{BATCHES} × keys = {per_batch:.2g} values); "
                                     f"the limit is {MEDIAN_BATCH_VALUES:.2g}: lower trials")
        return self
