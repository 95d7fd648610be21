"""The variance spec: Monte Carlo of q·k versus dimension, raw and scaled."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.common import (
    MAX_DRAWS,
    Int,
    PosInt,
    ScalingField,
    SeTolerance,
    refuse_repeats,
    scalings,
)
from sdpa_cli.spec.limits import count
from sdpa_cli.spec.vectors import VectorLawFields


class VarianceSpec(VectorLawFields):
    """Dot-product variance versus dimension."""

    study: Literal["variance"] = "variance"
    # default 3, 100, 1000
    dims: list[PosInt] | None = Field(
        None, min_length=1,
        description="Dimensions to sample (default 3 100 1000).")
    pairs: Int = Field(1000, ge=2, description="(q, k) pairs per dimension (default 1000).")
    scalings: list[ScalingField] = scalings(
        "none", "sqrt",
        description=("none sqrt linear sqrt-half temperature:T power:P cosine[:TAU] (default none "
                     "sqrt)."))
    bins: Int = Field(50, ge=1, le=1000, description="Histogram bins in the figures (default 50).")
    float16: bool = Field(
        False, description=("Also form each rule's scores in float16, the factor applied after "
                            "q·k and split over q and k (tables.float16; default false)."))
    # a check passes when |z| ≤ this
    se_tolerance: SeTolerance = Field(
        4.0, description="A check passes when |z| ≤ K (default 4).")

    @property
    def dim_list(self) -> list[int]:
        """dims once resolved (from d_model/heads or the default): never None after load."""
        assert self.dims is not None, "dims are resolved when the spec is validated"
        return list(self.dims)

    @model_validator(mode="after")
    def _resolve(self) -> VarianceSpec:
        dims = self.resolve_dims(self.dims)
        object.__setattr__(self, "dims", dims)
        refuse_repeats("scalings", [s.label for s in self.scalings])
        for i, s in enumerate(self.scalings):
            # the variance study measures q·k times a factor of d alone, one pair at a time
            why = _refusal(s)
            if why is not None:
                raise SpecFieldError(("scalings", i), why)
        if self.method == "exact" and any(s.cosine for s in self.scalings):
            raise SpecFieldError(("scalings",), "cosine scaling needs the vectors: method direct")
        if self.float16 and (self.method == "exact" or self.distribution == "sphere"
                             or any(s.cosine for s in self.scalings)):
            raise SpecFieldError(("float16",), "float16 forms q·k from vectors of iid "
                                 "components times a factor: method direct, no sphere, "
                                 "no cosine rule")
        per_pair = 3 if self.method == "exact" else 2
        draws = sum(self.pairs * (per_pair if self.method == "exact" else per_pair * d)
                    for d in dims)
        if draws > MAX_DRAWS:
            raise SpecFieldError(
                ("pairs",), f"would draw {count(draws)} random numbers (hours of work); the limit "
                f"is {MAX_DRAWS:.0e}: lower pairs or dims, or use method: exact"
            )
        return self


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
