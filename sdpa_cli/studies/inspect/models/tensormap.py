"""One family's tensors declared once: target name → stored tensor and conversion, GGUF name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models.common import Reader


@dataclass(frozen=True)
class Source:
    """A tensor as a checkpoint stores it.

    name: its Hugging Face name without a prefix such as "model."; shape: as stored (−1: any
    size); gguf: llama.cpp's name for it (None: the family has no GGUF form); permute: llama.cpp
    stored its rows interleaved per head for its rotation, in this many heads (0: as is);
    offset: llama.cpp stored offset + w (Gemma's norms), which the reader takes off again."""

    name: str
    shape: tuple[int, ...]
    required: bool = True
    gguf: str | None = None
    permute: int = 0
    offset: float = 0.0


@dataclass(frozen=True)
class Target:
    """A tensor the forward reads, in (out, in) layout: its source, a block of the source's
    rows (a part of a fused tensor), transposed first when the source is stored (in, out)."""

    name: str
    source: Source
    rows: tuple[int, int] | None = None
    transpose: bool = False

    @property
    def converted(self) -> bool:
        return self.rows is not None or self.transpose


@dataclass(frozen=True)
class QK:
    """How one layer's q·k is bounded from its weights alone (models/qkbound.py).

    q, k: the targets' prefix ("{q}.weight" (out, in), and "{q}.bias" when `biases`: read
    if the checkpoint has it); norm: the
    prefix of the norm whose output both read (None: none, only a QK-norm bounds them);
    centred: that norm is a LayerNorm with a shift "{norm}.bias" (else an RMSNorm); offset:
    gains used as offset + w (Gemma); qk_norm: "head" (each head's q and k), "proj" (the whole
    projection) or None, with its gains "{q_norm}.weight", "{k_norm}.weight"; rotary: RoPE."""

    q: str
    k: str
    heads: int
    kv: int
    dim: int
    norm: str | None
    centred: bool = False
    offset: float = 0.0
    qk_norm: Literal["head", "proj"] | None = None
    q_norm: str = ""
    k_norm: str = ""
    rotary: bool = False
    biases: bool = True

    def __post_init__(self) -> None:
        if self.norm is None and self.qk_norm is None:
            raise ValueError(f"{self.q}: with no norm before attention and no QK-norm the "
                             "scores have no weight-only bound; declare qk=None")

    def names(self) -> tuple[str, ...]:
        """Every target the bound reads (optional biases included)."""
        out = [f"{self.q}.weight", f"{self.k}.weight"]
        if self.biases:
            out += [f"{self.q}.bias", f"{self.k}.bias"]
        if self.norm is not None:
            out += [f"{self.norm}.weight"] + ([f"{self.norm}.bias"] if self.centred else [])
        if self.qk_norm is not None:
            out += [f"{self.q_norm}.weight", f"{self.k_norm}.weight"]
        return tuple(out)


@dataclass(frozen=True)
class Table:
    """Everything a family reads: targets (in the order the forward reads them), the token
    embedding's target, and per layer the weight-only q·k bound (None: the family declares it
    has none); `head`: an optional untied LM head among the targets, which the forward does
    not read (the next-token loss reads it by rows; without it, the embedding's rows)."""

    targets: tuple[Target, ...]
    embedding: str
    qk: tuple[QK, ...] | None
    head: str | None = None

    def sources(self) -> dict[str, Source]:
        """Each stored tensor once, by name, in reading order."""
        return {t.source.name: t.source for t in self.targets}

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise Undeclared(name)

    def gguf(self) -> dict[str, Source]:
        """llama.cpp's name → the source it holds."""
        return {s.gguf: s for s in self.sources().values() if s.gguf is not None}


class Undeclared(LookupError):
    """A forward read a tensor its family's table does not declare (a bug in the family:
    not a KeyError, which means an optional tensor the checkpoint does not have)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name!r} is not in the family's tensor table")


def same(name: str, shape: tuple[int, ...], gguf: str | None = None, required: bool = True,
         **kw: Any) -> Target:
    """A target read as stored, under its own name."""
    return Target(name, Source(name, shape, required, gguf, **kw))


def rename(name: str, source: str, shape: tuple[int, ...], **kw: Any) -> Target:
    """A target read as stored, under another name."""
    return Target(name, Source(source, shape, **kw))


def fused(targets: Sequence[Target], groups: Mapping[str, Sequence[str]]) -> tuple[Target, ...]:
    """The same targets, with each group's parts read as consecutive row blocks of one stored
    tensor, e.g. {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj",
    "self_attn.v_proj")}: wherever the parts occur (each layer; .weight and .bias), the stored
    "….self_attn.qkv_proj.weight" holds q's rows, then k's, then v's. The parts' sizes are
    their declared shapes; a fused tensor has no GGUF name."""
    stored: dict[str, tuple[str, int]] = {}  # target → (the fused tensor, its part's index)
    count: dict[str, int] = {}  # the fused tensor → how many parts it has
    for t in targets:
        stem, _, kind = t.name.rpartition(".")
        for group, parts in groups.items():
            for j, part in enumerate(parts):
                if stem == part or stem.endswith("." + part):
                    name = f"{stem[:len(stem) - len(part)]}{group}.{kind}"
                    stored[t.name], count[name] = (name, j), len(parts)
    members: dict[str, dict[int, Target]] = {}
    for t in targets:
        if t.name in stored:
            name, j = stored[t.name]
            if t.converted:
                raise ValueError(f"{t.name} is already converted")
            members.setdefault(name, {})[j] = t
    out = []
    for t in targets:
        if t.name not in stored:
            out.append(t)
            continue
        name, j = stored[t.name]
        if len(members[name]) != count[name]:
            raise ValueError(f"{name}: {len(members[name])} of its {count[name]} parts declared")
        sizes = [members[name][i].source.shape[0] for i in range(count[name])]
        if min(sizes) < 0:
            raise ValueError(f"{name}: a part of unknown size")
        first = members[name][0].source
        start = sum(sizes[:j])
        out.append(Target(t.name, Source(name, (sum(sizes), *first.shape[1:]), first.required),
                          (start, start + sizes[j])))
    return tuple(out)


class Mapped:
    """The checkpoint as its forward reads it: target name → array, from a reader of stored
    (Hugging Face) names. A fused tensor is read once for all its parts (held until a tensor
    that is no part of one is read). `keep` names targets held once read, until
    `kept` hands them over: the q·k bound reads what the forward already read."""

    def __init__(self, table: Table, raw: Reader, keep: Sequence[str] = ()) -> None:
        self.by_name = {t.name: t for t in table.targets}
        self.raw = raw
        self._fused: dict[str, NDArray[Any]] = {}
        self._want = set(keep)
        self._held: dict[str, NDArray[Any]] = {}

    def __call__(self, name: str) -> NDArray[Any]:
        t = self.by_name.get(name)
        if t is None:
            raise Undeclared(name)
        out = self._convert(t)
        if name in self._want:
            self._held[name] = out
        return out

    def _convert(self, t: Target) -> NDArray[Any]:
        if t.rows is None:
            self._fused.clear()
            w = self.raw(t.source.name)  # KeyError: an optional tensor that is absent
        elif t.source.name in self._fused:
            w = self._fused[t.source.name]
        else:
            w = self._fused[t.source.name] = self.raw(t.source.name)
        if t.transpose:
            w = w.T
        if t.rows is not None:
            w = w[t.rows[0]:t.rows[1]]
        return w

    def kept(self, name: str) -> NDArray[Any]:
        """A target the forward read (then forgotten), or read now."""
        self._want.discard(name)
        if name in self._held:
            return self._held.pop(name)
        return self(name)

    def rows(self, name: str, ids: NDArray[np.integer[Any]]) -> NDArray[Any]:
        """Embedding rows, through the stored reader's own `rows` when it has one."""
        t = self.by_name.get(name)
        if t is None:
            raise Undeclared(name)
        pick = getattr(self.raw, "rows", None)
        out: NDArray[Any] = (self._convert(t)[ids] if t.converted or pick is None
                             else pick(t.source.name, ids))
        return out

    def close(self) -> None:
        self._fused.clear()
        self._held.clear()
        close = getattr(self.raw, "close", None)
        if close is not None:
            close()
