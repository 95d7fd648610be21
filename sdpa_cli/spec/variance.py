"""The variance spec: Monte Carlo of q·k versus dimension, raw and scaled."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.common import (
    MAX_DRAWS,
    Float,
    Int,
    PosInt,
    ScalingField,
    SpecBase,
    scalings,
)

DEFAULT_DIMS = (3, 100, 1000)  # the Day-74 experiment


class VectorLawFields(SpecBase):
    """How queries and keys are drawn; shared by the studies that draw random vectors."""

    distribution: Literal["normal", "uniform", "rademacher", "sphere"] = "normal"
    mean: Float = 0.0  # mean of every component
    std: Float = Field(1.0, gt=0, le=1e150)  # standard deviation of every component
    correlation: Float = Field(0.0, ge=-1.0, le=1.0)  # corr(q_i, k_i)
    d_model: PosInt | None = None  # with heads: d_k = d_model / heads
    heads: PosInt | None = None
    method: Literal["direct", "exact"] = "direct"  # exact: q·k from its law, O(1) per pair

    # Largest |mean/std| the study computes exactly (it centres q·k, so only the ratio's own
    # float64 range limits it); studies that form QKᵀ directly lower it.
    MAX_MEAN_RATIO: ClassVar[float] = 1e150

    @model_validator(mode="after")
    def _law_rules(self) -> VectorLawFields:
        if abs(self.mean) > self.MAX_MEAN_RATIO * self.std:
            raise SpecFieldError(
                ("mean",), f"|mean| may be at most {self.MAX_MEAN_RATIO:.0e} × std here; beyond "
                "that the spread is below float64's resolution of the mean")
        if self.distribution == "sphere":
            for name, default in (("mean", 0.0), ("std", 1.0), ("correlation", 0.0)):
                if getattr(self, name) != default:
                    raise SpecFieldError(
                        (name,), f"unit vectors (distribution: sphere) have no {name}; remove it"
                    )
        if self.method == "exact" and self.distribution not in ("normal", "sphere"):
            raise SpecFieldError(
                ("method",), f"the exact method exists for normal and sphere, not "
                f"{self.distribution}; use method: direct"
            )
        if (self.d_model is None) != (self.heads is None):
            missing = "heads" if self.heads is None else "d_model"
            raise SpecFieldError((missing,), "d_model and heads go together; give both")
        if self.d_model is not None and self.heads is not None and self.d_model % self.heads:
            raise SpecFieldError(
                ("heads",), f"d_model {self.d_model} is not divisible by {self.heads} heads"
            )
        return self

    def resolve_dims(self, dims: list[int] | None) -> list[int]:
        """dims as given, or d_model/heads, or the default; never both sources."""
        if self.d_model is not None and self.heads is not None:
            d_k = self.d_model // self.heads
            # A resolved spec.yaml carries both; they must agree.
            if dims is not None and list(dims) != [d_k]:
                raise SpecFieldError(("dims",), f"d_model/heads gives d_k = {d_k}; drop dims "
                                     f"or make it [{d_k}]")
            return [d_k]
        return list(dims) if dims is not None else list(DEFAULT_DIMS)


class VarianceSpec(VectorLawFields):
    """Dot-product variance versus dimension."""

    study: Literal["variance"] = "variance"
    dims: list[PosInt] | None = Field(None, min_length=1)  # default 3, 100, 1000
    pairs: Int = Field(1000, ge=2)  # (q, k) pairs per dimension
    scalings: list[ScalingField] = scalings("none", "sqrt")
    bins: Int = Field(50, ge=1, le=1000)  # histogram bins in the figures
    se_tolerance: Float = Field(4.0, gt=0)  # a check passes when |z| ≤ this

    def _moments_in_range(self, d: int) -> None:
        found = _moment_refusal(self.mean, self.std, d)
        if found is not None:
            raise SpecFieldError((found[0],), found[1])

    @property
    def dim_list(self) -> list[int]:
        """dims once resolved (from d_model/heads or the default): never None after load."""
        assert self.dims is not None, "dims are resolved when the spec is validated"
        return list(self.dims)

    @model_validator(mode="after")
    def _resolve(self) -> VarianceSpec:
        dims = self.resolve_dims(self.dims)
        object.__setattr__(self, "dims", dims)
        self._moments_in_range(max(dims))
        labels = [s.label for s in self.scalings]
        for i, label in enumerate(labels):
            if label in labels[:i]:
                raise SpecFieldError(("scalings", i), f"{label!r} is listed twice")
        for i, s in enumerate(self.scalings):
            # the variance study measures q·k times a factor of d alone, one pair at a time
            why = _refusal(s)
            if why is not None:
                raise SpecFieldError(("scalings", i), why)
        if self.method == "exact" and any(s.cosine for s in self.scalings):
            raise SpecFieldError(("scalings",), "cosine scaling needs the vectors: method direct")
        per_pair = 3 if self.method == "exact" else 2
        draws = sum(self.pairs * (per_pair if self.method == "exact" else per_pair * d)
                    for d in dims)
        if draws > MAX_DRAWS:
            raise SpecFieldError(
                ("pairs",), f"would draw {draws:.2g} random numbers (hours of work); the limit "
                f"is {MAX_DRAWS:.0e}: lower pairs or dims, or use method: exact"
            )
        return self


# The study reports q·k's moments in the spec's own units: Var(q_i k_i) = σ⁴ + 2μ²σ² and, over
# d terms and with the mean d·μ², up to d·(μ² + σ²)², whose standard errors square them again
# over the pairs. Kept inside [TINY, HUGE] every one is a normal float64 with room to spare;
# outside, a product rounds to exactly 0 (std 1e-200: variance 0 = theory 0, a check passed
# on zeros) or to inf (reported as null).
TINY, HUGE = 1e-280, 1e300
MIN_STD = 1e-70  # std⁴ = TINY


def _moment_refusal(mean: float, std: float, d: int) -> tuple[str, str] | None:
    """(field, why) when q·k's moments leave float64's range for these values, else None."""
    if std < MIN_STD:  # products (never **, which raises OverflowError) would underflow
        return "std", (f"std {std:g} makes the variance of one product q_i·k_i (std⁴) about "
                       f"1e{4 * math.log10(std):.0f}, below {TINY:g}: float64 rounds it to 0 "
                       f"and every check would pass on zeros; give std ≥ {MIN_STD:g} (the "
                       "study is scale-free: std 1 measures the same law)")
    second = mean * mean + std * std
    if not math.isfinite(second) or d * second * second > HUGE:
        field = "mean" if abs(mean) > std else "std"
        big, small = max(abs(mean), std), min(abs(mean), std)
        size = math.log10(d) + 4 * math.log10(big) + 2 * math.log10(1 + (small / big) ** 2)
        return field, (f"d·(mean² + std²)² is about 1e{size:.0f} for d = {d}, above "
                       f"{HUGE:g}: the moments of q·k would overflow float64 to infinity "
                       "(reported as null); lower mean and std (the study is scale-free)")
    return None


def _refusal(s: Scaling) -> str | None:
    """Why the variance study cannot measure rule s (None when it can), in that rule's terms."""
    if s.log_n is not None:
        return (f"{s.label} multiplies q·k by {s.log_n:g}·ln n, n the number of keys, and the "
                "variance study draws single q·k pairs (it has no n); measure it with "
                "softmax-sweep or jacobian (--dims, --keys)")
    if s.norm is not None:
        return (f"{s.label} normalises q and k before the product, so its scores are not a "
                "multiple of q·k; measure it with softmax-sweep or jacobian (--dims)")
    if s.cap is not None:
        return (f"{s.label} caps the scores (C·tanh(s/C)), so they are not a multiple of q·k; "
                "measure it with softmax-sweep or jacobian (--dims)")
    return None
