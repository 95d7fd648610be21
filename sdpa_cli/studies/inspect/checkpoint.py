"""Finding and opening a checkpoint safely: safetensors and JSON only, validated before loading."""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.io.jsonio import JsonError, load_json
from sdpa_cli.studies.inspect import gguf_file, gguf_model
from sdpa_cli.studies.inspect.boundary import finite, guarded
from sdpa_cli.studies.inspect.gguf_file import FLOAT_TYPES, GGUFHeader
from sdpa_cli.studies.inspect.locate import (
    JSON_FAULTS,
    bad,
    find,
    hub_root,
    kind_of,
    model_json,
)
from sdpa_cli.studies.inspect.models.common import ConfigError
from sdpa_cli.studies.inspect.models.families import FAMILIES, Family
from sdpa_cli.studies.inspect.models.tensormap import Mapped, Table

__all__ = ["Checkpoint", "Tensor", "Weights", "bad", "find", "hub_root", "open_checkpoint"]

PREFIXES = ("bert.", "model.", "transformer.")  # weight names may carry one of these
PICKLES = ("pytorch_model.bin", "*.pt", "*.ckpt", "*.pth", "*.bin")
ITEMSIZE = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8, "I8": 1, "U8": 1, "I16": 2, "I32": 4,
            "I64": 8, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
FLOATS = ("F16", "BF16", "F32", "F64", *FLOAT_TYPES.values())  # what sdpa measures
# sdpa's bound on a safetensors JSON header (the format allows 100 MB; the largest real
# shards' headers are well under 1 MB). A hostile header at the bound, 120,000 tiny tensors,
# parses in a few seconds and about 125 MB (measured: 32 MiB took 490 MB).
MAX_HEADER = 8 * 1024**2
# What to do instead; sdpa never suggests loading the pickle itself (any unpickling runs code).
CONVERT = ("get the model's model.safetensors (most publishers ship one), or have the "
           "library that wrote the file save it again as safetensors, on a machine you trust "
           "(transformers: save_pretrained(folder, safe_serialization=True))")


@dataclass(frozen=True)
class Tensor:
    file: Path
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    nbytes: int
    stored: str = ""  # the name in the file (GGUF: llama.cpp's), when it differs


@dataclass(frozen=True)
class Checkpoint:
    """A validated checkpoint: config, family, every tensor's place (prefix stripped)."""

    folder: Path
    config: Mapping[str, Any]
    family: Family
    tensors: Mapping[str, Tensor]
    files: tuple[Path, ...]
    tokenizer: Path  # tokenizer.json, or the GGUF file whose metadata holds the tokenizer
    table: Table  # what the forward reads, where each tensor is stored, the q·k bound
    extra: dict[str, Any] = field(default_factory=dict)
    gguf: GGUFHeader | None = None  # set for a GGUF checkpoint

    def read_files(self) -> list[Path]:
        """Every file the run reads from the checkpoint, once each."""
        extra = [] if self.gguf is not None else [self.tokenizer, self.folder / "config.json"]
        return [*self.files, *extra]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self.family.shape(self.config)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every stored tensor the family reads, by name (what an init reader draws)."""
        sources = self.table.sources()
        return {name: t.shape for name, t in self.tensors.items() if name in sources}


def open_checkpoint(folder: Path) -> Checkpoint:
    """Validate everything that can be checked without loading a weight; InputError else.
    `folder` is a model folder or a GGUF file (a folder holding one GGUF file and no
    config.json reads that file)."""
    gguf = _gguf_in(folder)
    if gguf is not None:
        return _open_gguf(gguf)
    files = _weight_files(folder)  # first: a pickle-only folder is refused before all else
    config = _config(folder)
    family = _family(config, folder)
    tensors: dict[str, Tensor] = {}
    for f in files:
        for name, t in read_header(f).items():
            tensors[strip(name)] = t
    tokenizer = folder / "tokenizer.json"
    if os.path.lexists(tokenizer) and not tokenizer.is_file():
        raise bad("tokenizer.json is not a regular file", tokenizer)
    if not tokenizer.is_file():
        raise bad("no tokenizer.json: sdpa tokenises with the checkpoint's own tokenizer file",
                  folder)
    table = check_tensors(family, config, tensors, folder / "config.json", files[0])
    return Checkpoint(folder, config, family, tensors, tuple(files), tokenizer, table)


def _gguf_in(path: Path) -> Path | None:
    if path.is_file():
        return path
    if (path / "config.json").is_file():
        return None
    found = sorted(p for p in path.glob("*.gguf") if p.is_file())
    if len(found) > 1:
        raise bad(f"holds {len(found)} GGUF files ({', '.join(p.name for p in found[:4])}"
                  f"{', …' if len(found) > 4 else ''}): name one", path)
    return found[0] if found else None


def _open_gguf(path: Path) -> Checkpoint:
    header = gguf_file.read_header(path)
    config = gguf_model.config(header)
    family = _family(config, path)
    names = {g: s.name for g, s in _table(family, config, -1, path).gguf().items()}
    tensors = {names[name]: Tensor(path, t.dtype, t.shape, t.start, t.nbytes, name)
               for name, t in header.tensors.items() if name in names}
    table = check_tensors(family, config, tensors, path, path)
    return Checkpoint(path, config, family, tensors, (path,), path, table, gguf=header)


def check_tensors(family: Family, config: Mapping[str, Any], tensors: Mapping[str, Tensor],
                  config_file: Path, weights_file: Path) -> Table:
    """Every tensor the family's table names is there (optional ones aside), a float, and of
    the shape the config implies; every config field the forward uses is valid. One line
    naming what is wrong. The table, for the forward's reader."""
    emb = tensors.get(family.embedding)
    if emb is None:
        raise bad(f"no tensor {family.embedding!r} (the {family.name} token embedding)",
                  weights_file)
    if len(emb.shape) != 2:
        raise bad(f"tensor {_named(family.embedding, emb)} has shape {list(emb.shape)}, "
                  "expected [vocabulary, width]", emb.file)
    table = _table(family, config, emb.shape[0], config_file)
    sources = table.sources()
    layers = len(_layers(sources))
    for name, source in sources.items():
        t = tensors.get(name)
        if t is None:
            if not source.required:
                continue
            m = LAYER.search(name)
            where = f" (layer {m[1]} of the config's {layers})" if m else ""
            raise bad(f"no tensor {name!r}{where}: the {family.name} architecture reads it",
                      weights_file)
        _check_one(name, t, source.shape)
    return table


def _table(family: Family, config: Mapping[str, Any], vocab: int, config_file: Path) -> Table:
    try:
        return family.table(config, vocab)
    except ConfigError as e:
        raise bad(f"{family.name} config: {e}", config_file, e.field) from None


LAYER = re.compile(r"(?:^|\.)(?:layers|layer|h)\.(\d+)\.")


def _layers(names: Mapping[str, Any]) -> set[str]:
    return {m[1] for n in names if (m := LAYER.search(n))}


def _named(name: str, t: Tensor) -> str:
    return f"{name!r}" + (f" ({t.stored})" if t.stored else "")


def _check_one(name: str, t: Tensor, want: tuple[int, ...]) -> None:
    if t.dtype not in FLOATS:
        raise bad(f"tensor {_named(name, t)} is {t.dtype}; only float weights are measured "
                  "(F16, BF16, F32, F64, and GGUF's Q4_0…Q8_0 and K-quants)", t.file)
    if len(t.shape) != len(want) or any(w not in (-1, g) for g, w in zip(t.shape, want,
                                                                        strict=False)):
        shown = ", ".join("any" if w == -1 else str(w) for w in want)
        raise bad(f"tensor {_named(name, t)} has shape {list(t.shape)}; the config implies "
                  f"[{shown}]", t.file)


def strip(name: str) -> str:
    for p in PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return name


# A model's config.json or shard index: a few kB in practice; anything this large is not one.
MAX_CONFIG = 16 * 1024**2


def _config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if os.path.lexists(path) and not path.is_file():
        raise bad(f"config.json is {kind_of(path)}, not a regular file", path)
    if not path.is_file():
        raise bad("no config.json: a Hugging Face model folder holds config.json, "
                  "model.safetensors and tokenizer.json", folder)
    config = model_json(path, "config.json", MAX_CONFIG)
    if not isinstance(config, dict):
        raise bad("not a JSON object", path)
    return config


def _family(config: Mapping[str, Any], folder: Path) -> Family:
    kind = config.get("model_type")
    path = folder if folder.is_file() else folder / "config.json"
    if kind not in FAMILIES:
        raise bad(f"model_type {kind!r} is not supported; supported: {', '.join(FAMILIES)}",
                  path, "model_type")
    family = FAMILIES[str(kind)]
    try:
        family.shape(config)
    except ConfigError as e:
        raise bad(f"{family.name} config: {e}", path, e.field) from None
    return family


def _weight_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        doc = model_json(index, "shard index", MAX_CONFIG)
        try:
            names = sorted(set(doc["weight_map"].values()))
        except (KeyError, TypeError, AttributeError) as e:
            raise bad(f"not a shard index (JSON with a weight_map): {e}", index) from None
        if not names:
            raise bad("its weight_map names no shard", index, "weight_map")
        for name in names:
            if not isinstance(name, str) or Path(name).name != name or \
                    not (folder / name).is_file():
                what = kind_of(folder / name) if isinstance(name, str) and \
                    Path(name).name == name and os.path.lexists(folder / name) else ""
                raise bad(f"names shard {name!r}, which is " + (
                    f"{what}, not a regular file" if what else f"not in {folder}"), index,
                    "weight_map")
        return [folder / n for n in names]
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    if os.path.lexists(single):
        raise bad(f"model.safetensors is {kind_of(single)}, not a regular file", single)
    pickles = sorted({p.name for pat in PICKLES for p in folder.glob(pat)})
    if pickles:
        raise bad(f"only pickled weights ({', '.join(pickles)}); sdpa never unpickles: "
                  + CONVERT, folder)
    raise bad("no model.safetensors (or model.safetensors.index.json with its shards)", folder)


def read_header(path: Path) -> dict[str, Tensor]:
    """A safetensors header parsed and checked against the file's size, nothing loaded."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise bad(f"corrupt safetensors header: the file has {size} bytes", path)
        (length,) = struct.unpack("<Q", head)
        if length > min(MAX_HEADER, size - 8):
            raise bad(f"corrupt safetensors header: it claims {length} bytes, the file has "
                      f"{size}", path)
        raw = f.read(length)
    try:
        doc = load_json(raw, what="safetensors header", max_bytes=MAX_HEADER, file=str(path))
    except JsonError as e:
        raise bad(f"corrupt safetensors header: it {JSON_FAULTS.get(e.reason, 'is not JSON')}",
                  path) from None
    if not isinstance(doc, dict):
        raise bad("corrupt safetensors header: not a JSON object", path)
    data = size - 8 - length
    out: dict[str, Tensor] = {}
    for name, entry in doc.items():
        if name == "__metadata__":  # str → str, as the format says
            if not isinstance(entry, dict) or not all(isinstance(v, str)
                                                       for v in entry.values()):
                raise bad("corrupt safetensors header: __metadata__ is not an object of "
                          "strings", path)
            continue
        try:
            dtype, shape, (a, b) = entry["dtype"], entry["shape"], entry["data_offsets"]
            ok = (dtype in ITEMSIZE and all(isinstance(x, int) and x >= 0 for x in shape)
                  and isinstance(a, int) and isinstance(b, int) and 0 <= a <= b <= data
                  and b - a == math.prod(shape) * ITEMSIZE[dtype])
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise bad(f"corrupt safetensors header: tensor {name!r} has a bad dtype, shape or "
                      "offsets for this file", path)
        out[name] = Tensor(path, dtype, tuple(shape), 8 + length + a, b - a)
    return out


class Stored:
    """The checkpoint as a Reader of its stored (Hugging Face) names: one tensor at a time,
    via safetensors or the GGUF reader.

    BF16 has no NumPy dtype: those tensors are read from the validated offsets as uint16
    and widened to float32 (bf16 is the top half of a float32)."""

    def __init__(self, ckpt: Checkpoint) -> None:
        self.ckpt = ckpt
        self._open: dict[Path, Any] = {}
        self._gguf = None if ckpt.gguf is None else gguf_model.GGUFWeights(ckpt.gguf, ckpt.table)
        self._full = {} if ckpt.gguf is not None else \
            {strip(n): n for f in ckpt.files for n in read_header(f)}

    def __call__(self, name: str) -> NDArray[Any]:
        if self._gguf is not None:
            return self._gguf(name)
        t = self.ckpt.tensors[name]  # KeyError: absent tensor (optional biases)
        if t.dtype == "BF16":
            raw = np.fromfile(t.file, dtype="<u2", count=t.nbytes // 2, offset=t.start)
            wide = (raw.astype(np.uint32) << 16).view(np.float32).reshape(t.shape)
            return finite(wide, t.file, name)
        if t.file not in self._open:
            from safetensors import safe_open

            self._open[t.file] = guarded(t.file, lambda: safe_open(str(t.file),
                                                                   framework="numpy"),
                                         "the safetensors library")
        out: NDArray[Any] = guarded(t.file, lambda: self._open[t.file].get_tensor(
            self._full[name]), "the safetensors library")
        return finite(out, t.file, name)

    def rows(self, name: str, ids: NDArray[Any]) -> NDArray[Any]:
        """Embedding rows `ids` → ids.shape + (width,), read from their bytes only."""
        if self._gguf is not None:
            return self._gguf.rows(name, ids)
        t = self.ckpt.tensors[name]
        kind = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2"}[t.dtype]
        mapped = np.memmap(t.file, dtype=kind, mode="r", offset=t.start, shape=t.shape)
        picked = np.array(mapped[np.asarray(ids)])
        del mapped
        if t.dtype == "BF16":
            picked = (picked.astype(np.uint32) << 16).view(np.float32)
        return finite(picked.reshape(-1, t.shape[1]), t.file, name,
                      np.asarray(ids)).reshape(picked.shape)

    def close(self) -> None:
        self._open.clear()


class Weights(Mapped):
    """The checkpoint as its family's forward reads it (target names, converted as the
    family's table says); `keep`: targets held once read, for the q·k bound."""

    def __init__(self, ckpt: Checkpoint, keep: Sequence[str] = ()) -> None:
        super().__init__(ckpt.table, Stored(ckpt), keep)


def sizes(ckpt: Checkpoint) -> Iterator[tuple[str, int]]:
    for name, t in ckpt.tensors.items():
        yield name, math.prod(t.shape)
