"""The inspect spec: which checkpoint, which text, which lengths, rules and weights."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.spec.common import (
    Float,
    Int,
    PosInt,
    ScalingField,
    SeTolerance,
    SpecBase,
    scalings,
)

MAX_SEQ_LEN = 8192
MAX_SEQUENCES = 256
MAX_FACTOR = 1e6  # on the attention scale: far past where every row is one-hot
Factor = Annotated[Float, Field(ge=0, le=MAX_FACTOR)]
Layer = Annotated[Int, Field(ge=0)]


class InspectSpec(SpecBase):
    """Attention statistics of a real checkpoint on real text, per layer, head and rule."""

    # only --weights init and --random-tokens draw: a plain inspect run needs no seed
    draws_random: ClassVar[bool] = False

    @classmethod
    def needs_seed(cls, data: dict[str, Any]) -> bool:
        return data.get("weights") == "init" or data.get("random_tokens") is True

    study: Literal["inspect"] = "inspect"
    model: str = Field(min_length=1, description="A model folder (config.json, "
                       "model.safetensors, tokenizer.json), a GGUF file, or a cached name such "
                       "as sentence-transformers/all-MiniLM-L6-v2 (Hugging Face) or "
                       "smollm2:135m (Ollama).")
    weights: Literal["trained", "init"] = Field(
        "trained", description="trained (the checkpoint), or init: also the same "
        "architecture drawn as the family initialises it, shown beside the trained one.")
    seq_len: list[PosInt] = Field(default_factory=lambda: [128], min_length=1,
                                  description="Tokens per sequence n, special tokens "
                                  "included (default 128).")
    sequences: PosInt = Field(8, le=MAX_SEQUENCES, description="Consecutive chunks of the "
                              "text per length (default 8).")
    text: list[str] = Field(default_factory=list, description="UTF-8 files (regular files), "
                            "in order; only the tokens used are read, at most 64 MiB of each "
                            "(default: sdpa's README and topic pages).")
    induction_sequences: Int = Field(
        4, ge=0, le=MAX_SEQUENCES, description="Sequences of random tokens repeated once, "
        "per length, for each head's induction score (TransformerLens's detection); 0: none. "
        "Drawn with the run's seed (0 when none is given) and recorded in results.json.")
    random_tokens: bool = Field(False, description="Uniform random token ids instead of text "
                                "(a control).")
    scalings: list[ScalingField] = Field(
        default_factory=lambda: scalings("none").default_factory(), min_length=1,
        description="Rules applied to the same q and k in place of the model's own (default "
        "none); the model's own is always there as `model`.")
    loss: bool = Field(False, description="Also the model's mean next-token loss (nats) on "
                       "the text's sequences of the longest length (decoders; implied by "
                       "scale_factors and unscale_layers).")
    scale_factors: list[Factor] = Field(
        default_factory=list, description="Multiply every layer's attention scale (on q·k, "
        "after any QK-norm, before any soft-cap) by each factor in turn: the loss and the KL "
        "from the unchanged model's next-token distribution for each, and the same with the "
        "scale removed everywhere.")
    unscale_layers: list[Layer | Literal["all"]] = Field(
        default_factory=list, description="Set one layer's attention scale to 1 (q·k "
        "unscaled) at a time: the layers given, or all (each in turn); the loss and KL of "
        "each, and the same with the scale removed everywhere.")
    dtype: Literal["float32", "float64"] = Field("float32", description="Forward-pass "
                                                 "precision (statistics are float64).")
    require_models: bool = Field(False, description="With --check, a model that is not on "
                                 "this machine fails the check instead of being skipped.")
    fetch: str | None = Field(None, min_length=1, max_length=400, description="How to get "
                              "the model, printed when it is not on this machine (default: "
                              "for a Hugging Face name, the hf download command for the files "
                              "sdpa reads).")
    se_tolerance: SeTolerance = Field(4.0, gt=0, description="Audit tolerance in standard errors "
                                "(unused: the statistics are exact for the text given).")

    @field_validator("unscale_layers", mode="before")
    @classmethod
    def _all(cls, v: Any) -> Any:
        return [v] if v == "all" else v  # `unscale_layers: all` reads as [all]

    @property
    def interventions(self) -> bool:
        """Whether the run changes the attention scale (and so measures the loss too)."""
        return bool(self.scale_factors or self.unscale_layers)

    @model_validator(mode="after")
    def _lists(self) -> InspectSpec:
        for i, n in enumerate(self.seq_len):
            if n < 2 or n > MAX_SEQ_LEN:
                raise SpecFieldError(("seq_len", i), f"{n} is outside 2…{MAX_SEQ_LEN}")
            if n in self.seq_len[:i]:
                raise SpecFieldError(("seq_len", i), f"{n} is listed twice")
        if "all" in self.unscale_layers and len(self.unscale_layers) > 1:
            raise SpecFieldError(("unscale_layers",), "all stands alone (it is every layer)")
        for name in ("unscale_layers", "scale_factors"):
            values = getattr(self, name)
            for i, x in enumerate(values):
                if x in values[:i]:
                    raise SpecFieldError((name, i), f"{x} is listed twice")
        labels = [s.label for s in self.scalings]
        for i, label in enumerate(labels):
            if label in labels[:i]:
                raise SpecFieldError(("scalings", i), f"{label!r} is listed twice")
        return self

    @classmethod
    def resolve_paths(cls, data: dict[str, Any], base: Path) -> dict[str, Any]:
        """A spec's `model:` folder and `text:` files are relative to the spec's own folder."""
        out = dict(data)
        model = out.get("model")
        if isinstance(model, str) and not Path(model).is_absolute() and (base / model).is_dir():
            out["model"] = str(base / model)
        texts = out.get("text")
        if isinstance(texts, list):
            out["text"] = [str(base / t) if isinstance(t, str) and not Path(t).is_absolute()
                           else t for t in texts]
        return out
