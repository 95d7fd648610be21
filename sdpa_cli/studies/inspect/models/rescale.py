"""A decoder's final hidden states with its attention scale changed, each change resumed from
the first layer it touches (the layers below it are the unchanged model's, kept)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models.common import Array, LayerOut, Reader, Resume

# family forward: (config, read, ids, dtype, resume) → one LayerOut per layer run
Forward = Callable[..., Iterator[LayerOut]]
Factors = Mapping[int, float]  # layer → multiplier on its scale


def first_layer(factors: Factors) -> int:
    """Where a change starts: its lowest layer with a factor other than 1 (0: none)."""
    touched = [i for i, f in factors.items() if f != 1.0]
    return min(touched, default=0)


def resumes(changes: Sequence[Factors]) -> set[int]:
    """The layers whose input residual stream the changes resume from (layer 0 starts from
    the ids, so it needs none)."""
    return {s for s in map(first_layer, changes) if s > 0}


def final_hidden(forward: Forward, config: Any, read: Reader, ids: NDArray[np.integer[Any]],
                 dtype: type, resume: Resume) -> Array:
    """The last layer's hidden state (after the final norm) of a forward with `resume`."""
    hidden: Array | None = None
    for lo in forward(config, read, ids, dtype, resume=resume):
        hidden = lo.hidden
    if hidden is None:
        raise ValueError("the forward ran no layer")
    return hidden


class Kept:
    """A Reader that keeps the tensors it reads, up to `budget` bytes, then reads through: the
    changed forwards read the upper layers again and again (a dequantised GGUF tensor costs
    more to read than to multiply by). Kept arrays are read-only."""

    def __init__(self, read: Reader, budget: int) -> None:
        self.read, self.budget, self.used = read, budget, 0
        self.kept: dict[str, NDArray[Any]] = {}

    def __call__(self, name: str) -> NDArray[Any]:
        if name in self.kept:
            return self.kept[name]
        w = np.asarray(self.read(name))  # KeyError: absent (an optional bias), never kept
        if self.used + w.nbytes <= self.budget:
            w.flags.writeable = False
            self.kept[name] = w
            self.used += w.nbytes
        return w

    def rows(self, name: str, ids: NDArray[np.integer[Any]]) -> NDArray[Any]:
        pick = getattr(self.read, "rows", None)
        out: NDArray[Any] = pick(name, ids) if pick is not None else self.read(name)[ids]
        return out


def changed(forward: Forward, config: Any, read: Reader, ids: NDArray[np.integer[Any]],
            dtype: type, inputs: Mapping[int, Array], changes: Sequence[Factors],
            budget: int = 0, done: Callable[[], None] | None = None) -> list[Array]:
    """Per change, the final hidden states of `ids` with each layer's scale multiplied by its
    factor. `inputs[i]` is the unchanged model's input residual stream of layer i on the same
    ids (for every layer in resumes(changes)): a change first touching layer i runs layers
    i…L−1 only, so unscaling each of L layers in turn costs L(L+1)/2 layer forwards, not L².
    The changes run from the highest first layer down, so a reader keeping `budget` bytes
    keeps the layers read most often."""
    kept = Kept(read, budget)
    out: dict[int, Array] = {}
    for k in sorted(range(len(changes)), key=lambda k: -first_layer(changes[k])):
        start = first_layer(changes[k])
        residual = inputs[start] if start > 0 else None
        out[k] = final_hidden(forward, config, kept, ids, dtype,
                              Resume(dict(changes[k]), start, residual))
        if done is not None:
            done()
    return [out[k] for k in range(len(changes))]
