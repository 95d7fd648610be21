"""How queries and keys are drawn: the spec fields of every study that draws random vectors."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.spec.common import Float, PosInt, SpecBase

DEFAULT_DIMS = (3, 100, 1000)  # the Day-74 experiment


class VectorLawFields(SpecBase):
    """How queries and keys are drawn; shared by the studies that draw random vectors."""

    distribution: Literal["normal", "uniform", "rademacher", "sphere"] = Field(
        "normal",
        description="normal | uniform | rademacher | sphere (unit vectors).")
    # mean of every component
    mean: Float = Field(0.0, description="Mean of each component (default 0).")
    # standard deviation of every component
    std: Float = Field(
        1.0, gt=0, le=1e150,
        description="Standard deviation of each component (default 1).")
    correlation: Float = Field(
        0.0, ge=-1.0, le=1.0,
        description="corr(q_i, k_i) in [-1, 1] (default 0).")
    # with heads: d_k = d_model / heads
    d_model: PosInt | None = Field(None, description="Model width; with --heads gives d_k.")
    heads: PosInt | None = Field(None, description="Number of heads; d_k = d_model / heads.")
    # exact: q·k from its law, O(1) per pair
    method: Literal["direct", "exact"] = Field(
        "direct",
        description="direct (default) | exact (normal, sphere).")

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
