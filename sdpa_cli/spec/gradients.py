"""The gradients spec: one attention layer at initialisation, gradient norms versus d_k."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.numerics.grad_trials import Layer
from sdpa_cli.spec.common import Float, Int, PosInt, ScalingField, SpecBase, scalings

DEFAULT_DIMS = (16, 64, 256, 1024)
MAX_WIDTH = 1 << 14  # d_k, d_v and d_model: one trial's weights stay below ~1 GB
MAX_KEYS = 4096  # n: the score matrix of one trial is n × n
# Work guard: about this many multiply-adds take an hour on a loaded 2-core machine.
MAX_FLOPS = 1e13
MAX_TRIAL_FLOATS = 1 << 27  # one trial's arrays (1 GB): a block never holds less than one
MAX_KEPT = 4 * 10**6  # trials × rules: per-trial values kept for the medians (~200 MB)


class GradientsSpec(SpecBase):
    """Gradients of a random upstream loss through one attention layer, per (d_k, rule)."""

    study: Literal["gradients"] = "gradients"
    dims: list[PosInt] = Field(default_factory=lambda: list(DEFAULT_DIMS), min_length=1)  # d_k
    d_model: PosInt = Field(64, le=MAX_WIDTH)  # width of X and the rows of every W
    keys: Int = Field(16, ge=2, le=MAX_KEYS)  # n: sequence length (queries = keys = n)
    d_v: PosInt | None = Field(None, le=MAX_WIDTH)  # value width; default d_v = d_k per row
    trials: Int = Field(200, ge=2, le=10**6)  # independent draws of X, weights and G per d_k
    scalings: list[ScalingField] = scalings("none", "sqrt", "linear")
    init_std: Float = Field(1.0, gt=0, le=1e6)  # σ_w: weights iid N(0, σ_w²/d_model)
    alignment: Float = Field(0.0, ge=0.0, le=1.0)  # a: W_K = a·W_Q + √(1−a²)·W'
    causal: bool = False  # query i sees keys 0…i
    se_tolerance: Float = Field(4.0, gt=0)  # a score check passes when |z| ≤ this

    def layer(self, d_k: int) -> Layer:
        return Layer(d_model=self.d_model, d_k=d_k, d_v=self.d_v or d_k, n=self.keys,
                     init_std=self.init_std, alignment=self.alignment, causal=self.causal)

    @model_validator(mode="after")
    def _rules(self) -> GradientsSpec:
        for i, d in enumerate(self.dims):
            if d > MAX_WIDTH:
                raise SpecFieldError(("dims", i), f"d_k {d} is above the limit {MAX_WIDTH}")
            if d in self.dims[:i]:
                raise SpecFieldError(("dims", i), f"{d} is listed twice")
        labels = [s.label for s in self.scalings]
        for i, s in enumerate(self.scalings):
            if s.label in labels[:i]:
                raise SpecFieldError(("scalings", i), f"{s.label!r} is listed twice")
            if getattr(s, "norm", None) == "layer" and min(self.dims) < 2:
                raise SpecFieldError(("scalings", i), f"{s.label} centres q and k: it needs "
                                     "every d_k ≥ 2 (one centred component is 0)")
        rules = len(self.scalings)
        for i, d in enumerate(self.dims):
            if self.layer(d).floats_per_trial(rules) > MAX_TRIAL_FLOATS:
                raise SpecFieldError(("dims", i), f"one trial at d_k {d} with d_model "
                                     f"{self.d_model} would hold more than 1 GB; lower them")
        if self.trials * rules > MAX_KEPT:
            raise SpecFieldError(("trials",), f"{self.trials} trials × {rules} rules keep more "
                                 f"than {MAX_KEPT:.0e} per-trial values; lower trials")
        flops = self.trials * sum(self.layer(d).flops_per_trial(rules) for d in self.dims)
        if flops > MAX_FLOPS:
            raise SpecFieldError(
                ("trials",), f"would need about {flops:.1e} multiply-adds (hours of work); the "
                f"limit is {MAX_FLOPS:.0e}: lower trials, dims, d_model or keys")
        return self
