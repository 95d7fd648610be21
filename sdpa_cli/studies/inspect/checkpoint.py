"""Finding and opening a checkpoint safely: safetensors and JSON only, validated before loading."""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.errors import InputError, Problem
from sdpa_cli.jsonio import MAX_DEPTH as MAX_JSON_DEPTH
from sdpa_cli.jsonio import JsonError, load_json
from sdpa_cli.numerics.models.common import ConfigError
from sdpa_cli.numerics.models.families import FAMILIES, Family

PREFIXES = ("bert.", "model.", "transformer.")  # weight names may carry one of these
PICKLES = ("pytorch_model.bin", "*.pt", "*.ckpt", "*.pth", "*.bin")
ITEMSIZE = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8, "I8": 1, "U8": 1, "I16": 2, "I32": 4,
            "I64": 8, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
MAX_HEADER = 100 * 1024**2  # the safetensors format's own bound on the JSON header
# What to do instead; sdpa never suggests loading the pickle itself (any unpickling runs code).
CONVERT = ("get the model's model.safetensors (most publishers ship one), or have the "
           "library that wrote the file save it again as safetensors, on a machine you trust "
           "(transformers: save_pretrained(folder, safe_serialization=True))")


def bad(message: str, file: Path | str | None = None, field: str | None = None) -> InputError:
    return InputError(Problem(message, file=str(file) if file is not None else None,
                              field=field))


def hub_root() -> Path:
    """The Hugging Face cache's hub folder: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/…/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME")
    return Path(home) / "hub" if home else Path.home() / ".cache" / "huggingface" / "hub"


def find(model: str, base: Path | None = None) -> tuple[Path | None, str]:
    """The folder MODEL names (a path, relative to `base` for a spec, or a cache name such as
    ORG/NAME), and where we looked; None when it is not on this machine. Never the network."""
    path = Path(model).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if path.is_dir():
        return path, str(path)
    hub = hub_root()
    where = f"{path} or {hub}"
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+|[A-Za-z0-9][\w.-]*", model):
        return None, where
    repo = hub / ("models--" + model.replace("/", "--"))
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        chosen = snapshots / ref.read_text(encoding="utf-8").strip()
        if chosen.is_dir():
            return chosen, str(chosen)
    found = sorted(p for p in snapshots.glob("*") if p.is_dir()) if snapshots.is_dir() else []
    return (found[0], str(found[0])) if found else (None, where)


@dataclass(frozen=True)
class Tensor:
    file: Path
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    nbytes: int


@dataclass(frozen=True)
class Checkpoint:
    """A validated checkpoint: config, family, every tensor's place (prefix stripped)."""

    folder: Path
    config: Mapping[str, Any]
    family: Family
    tensors: Mapping[str, Tensor]
    files: tuple[Path, ...]
    tokenizer: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self.family.shape(self.config)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: t.shape for name, t in self.tensors.items()}


def open_checkpoint(folder: Path) -> Checkpoint:
    """Validate everything that can be checked without loading a weight; InputError else."""
    files = _weight_files(folder)  # first: a pickle-only folder is refused before all else
    config = _config(folder)
    family = _family(config, folder)
    tensors: dict[str, Tensor] = {}
    for f in files:
        for name, t in read_header(f).items():
            tensors[strip(name)] = t
    tokenizer = folder / "tokenizer.json"
    if not tokenizer.is_file():
        raise bad("no tokenizer.json: sdpa tokenises with the checkpoint's own tokenizer file",
                  folder)
    emb = tensors.get(family.embedding)
    if emb is None:
        raise bad(f"no tensor {family.embedding!r} (the {family.name} token embedding)",
                  files[0])
    return Checkpoint(folder, config, family, tensors, tuple(files), tokenizer)


def strip(name: str) -> str:
    for p in PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return name


# A model's config.json or shard index: a few kB in practice; anything this large is not one.
MAX_CONFIG = 16 * 1024**2
_JSON_FAULTS = {"read": "cannot be read", "size": "is too large", "utf8": "is not UTF-8 text",
                "syntax": "is not valid JSON",
                "depth": f"nests more than {MAX_JSON_DEPTH} levels (a model's files never do)"}


def _json(source: Path | bytes, what: str, path: Path, max_bytes: int) -> Any:
    """A model file's JSON, through sdpa's one bounded reader (size and depth checked before
    parsing), its faults said as faults of the model's file."""
    try:
        return load_json(source, what=what, max_bytes=max_bytes, file=str(path))
    except JsonError as e:
        raise bad(f"corrupt {what}: it {_JSON_FAULTS.get(e.reason, 'cannot be read')}",
                  path) from None


def _config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise bad("no config.json: a Hugging Face model folder holds config.json, "
                  "model.safetensors and tokenizer.json", folder)
    config = _json(path, "config.json", path, MAX_CONFIG)
    if not isinstance(config, dict):
        raise bad("not a JSON object", path)
    return config


def _family(config: Mapping[str, Any], folder: Path) -> Family:
    kind = config.get("model_type")
    path = folder / "config.json"
    if kind not in FAMILIES:
        raise bad(f"model_type {kind!r} is not supported; supported: {', '.join(FAMILIES)}",
                  path, "model_type")
    family = FAMILIES[str(kind)]
    try:
        family.shape(config)
    except (ConfigError, TypeError, ValueError) as e:
        raise bad(f"{family.name} config: {e}", path) from None
    return family


def _weight_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        doc = _json(index, "shard index", index, MAX_CONFIG)
        try:
            names = sorted(set(doc["weight_map"].values()))
        except (KeyError, TypeError, AttributeError) as e:
            raise bad(f"not a shard index (JSON with a weight_map): {e}", index) from None
        for name in names:
            if not isinstance(name, str) or Path(name).name != name or \
                    not (folder / name).is_file():
                raise bad(f"names shard {name!r}, which is not in {folder}", index, "weight_map")
        return [folder / n for n in names]
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
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
    doc = _json(raw, "safetensors header", path, MAX_HEADER)
    if not isinstance(doc, dict):
        raise bad("corrupt safetensors header: not a JSON object", path)
    data = size - 8 - length
    out: dict[str, Tensor] = {}
    for name, entry in doc.items():
        if name == "__metadata__":
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


class Weights:
    """The checkpoint as a Reader: name → array, one tensor at a time, via safetensors.

    BF16 has no NumPy dtype: those tensors are read from the validated offsets as uint16
    and widened to float32 (bf16 is the top half of a float32)."""

    def __init__(self, ckpt: Checkpoint) -> None:
        self.ckpt = ckpt
        self._open: dict[Path, Any] = {}
        self._full = {strip(n): n for f in ckpt.files for n in read_header(f)}

    def __call__(self, name: str) -> NDArray[Any]:
        t = self.ckpt.tensors[name]  # KeyError: absent tensor (optional biases)
        if t.dtype == "BF16":
            raw = np.fromfile(t.file, dtype="<u2", count=t.nbytes // 2, offset=t.start)
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(t.shape)
        if t.file not in self._open:
            from safetensors import safe_open

            self._open[t.file] = safe_open(str(t.file), framework="numpy")
        out: NDArray[Any] = self._open[t.file].get_tensor(self._full[name])
        return out

    def close(self) -> None:
        self._open.clear()


def sizes(ckpt: Checkpoint) -> Iterator[tuple[str, int]]:
    for name, t in ckpt.tensors.items():
        yield name, math.prod(t.shape)
