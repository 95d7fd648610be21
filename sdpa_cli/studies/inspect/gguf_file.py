"""A GGUF file's header parsed within stated bounds, and its tensors dequantised one at a time.

The header (metadata and tensor table) is parsed here, not by gguf.GGUFReader, so that every
count and length is checked against the bytes that remain before anything is allocated: a
hostile header costs time and memory in proportion to its size, and its size is bounded
(MAX_HEADER). Tensor data are dequantised with llama.cpp's own `gguf` package.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.errors import InputError, Problem
from sdpa_cli.studies.inspect.boundary import finite, guarded

MAGIC = b"GGUF"
MAX_HEADER = 256 * 1024**2  # metadata + tensor table; the largest vocabularies need ~20 MB
# strings in all arrays together (Gemma 3's vocabulary: 262,144 tokens; Llama 3's 128,256
# tokens and 280,147 merges); a hostile header of 2,000,000 short strings parses in a few
# seconds and about 170 MB (measured)
MAX_STRINGS = 2_000_000
MAX_TENSORS = 100_000  # real files hold a few thousand; each costs a few hundred bytes
MAX_NAME = 1024  # bytes of a key or tensor name
MAX_DIMS = 4
# ggml type → name, for the types whose values are floats sdpa measures (dequantised by gguf)
FLOAT_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
               10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 28: "F64",
               30: "BF16"}
OTHER_TYPES = {9: "Q8_1", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
               20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16",
               26: "I32", 27: "I64", 29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"}
# (elements per block, bytes per block) of the float types (ggml's own table)
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
          8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
          14: (256, 210), 28: (1, 8), 30: (1, 2)}
# metadata value types: number → (struct format, size); 8 string, 9 array
SCALARS = {0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
           6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8)}
_U64 = struct.Struct("<Q")
NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
         10: "<u8", 11: "<i8", 12: "<f8"}


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    kind: int  # ggml type number
    shape: tuple[int, ...]  # NumPy order (ggml's ne reversed): rows first
    start: int  # absolute byte offset
    nbytes: int

    @property
    def dtype(self) -> str:
        return FLOAT_TYPES.get(self.kind) or OTHER_TYPES.get(self.kind) or f"type {self.kind}"


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    version: int
    metadata: dict[str, Any]  # arrays of numbers as NumPy arrays, of strings as lists
    tensors: dict[str, GGUFTensor]


def bad(path: Path, message: str, field: str | None = None) -> InputError:
    return InputError(Problem(message, file=str(path), field=field))


class _Cursor:
    """Reads little-endian values from a buffer, never past `end` (the bound or the file)."""

    def __init__(self, buf: Any, end: int, path: Path, limit_hit: Callable[[], str]) -> None:
        self.buf, self.end, self.pos, self.path = buf, end, 0, path
        self.strings = 0
        self._limit = limit_hit

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.end:
            raise bad(self.path, f"corrupt GGUF header: {what} at byte {self.pos} runs past "
                      f"{self._limit()}")

    def scalar(self, kind: int, what: str) -> Any:
        fmt, size = SCALARS[kind]
        self.need(size, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def string(self, what: str) -> str:
        length = self.scalar(10, what)
        self.need(length, what)
        raw = bytes(self.buf[self.pos:self.pos + length])
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise bad(self.path, f"corrupt GGUF header: {what} is not UTF-8") from None

    def value(self, kind: int, what: str, nested: bool = False) -> Any:
        if kind in SCALARS:
            return self.scalar(kind, what)
        if kind == 8:
            return self.string(what)
        if kind != 9 or nested:
            raise bad(self.path, f"corrupt GGUF header: {what} has value type {kind}"
                      + (" (arrays of arrays are not read)" if kind == 9 else ""))
        item = self.scalar(4, what)
        count = self.scalar(10, what)
        if item in SCALARS:  # numbers: one NumPy read, checked against what remains
            size = SCALARS[item][1]
            self.need(count * size, what)
            out = np.frombuffer(self.buf, dtype=NUMPY[item], count=count, offset=self.pos).copy()
            self.pos += count * size
            return out.astype(bool) if item == 7 else out
        if item != 8:
            return self.value(item, what, nested=True)
        self.need(count * 8, what)  # every string costs at least its 8-byte length
        self.strings += count
        if self.strings > MAX_STRINGS:
            raise bad(self.path, f"GGUF header holds more than {MAX_STRINGS:,} strings "
                      f"({what}); sdpa reads no more")
        return self._strings(count, what)

    def _strings(self, count: int, what: str) -> list[str]:
        """`count` strings in a tight loop (a vocabulary is ~10⁵ of them)."""
        buf, pos, end = self.buf, self.pos, self.end
        length = _U64.unpack_from
        out: list[str] = []
        try:
            for _ in range(count):
                if pos + 8 > end:
                    raise IndexError
                (n,) = length(buf, pos)
                pos += 8
                if pos + n > end:
                    raise IndexError
                out.append(buf[pos:pos + n].decode("utf-8"))
                pos += n
        except IndexError:
            self.pos = pos
            self.need(end - pos + 1, what)  # raises: runs past the end
        except UnicodeDecodeError:
            raise bad(self.path, f"corrupt GGUF header: {what} is not UTF-8") from None
        self.pos = pos
        return out


def read_header(path: Path) -> GGUFHeader:
    """Parse and check the header (InputError naming the file and what is wrong)."""
    try:
        size = path.stat().st_size
        f = path.open("rb")
    except OSError as e:
        raise bad(path, f"cannot read: {e.strerror or e}") from None
    with f:
        if size < 24:
            raise bad(path, f"not a GGUF file: {size} bytes")
        if f.read(4) != MAGIC:
            raise bad(path, "not a GGUF file (no GGUF magic)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            end = min(size, MAX_HEADER)

            def limit() -> str:
                return (f"the end of the file ({size} bytes)" if end == size else
                        f"sdpa's bound on a GGUF header ({MAX_HEADER // 1024**2} MiB)")

            cur = _Cursor(buf, end, path, limit)
            cur.pos = 4
            try:
                return _parse(cur, path, size)
            finally:
                del cur  # no view of the map may outlive it


def _parse(cur: _Cursor, path: Path, size: int) -> GGUFHeader:
    version = cur.scalar(4, "version")
    if version not in (2, 3):
        raise bad(path, f"GGUF version {version} is not read (2 and 3 are; a big-endian file "
                  "shows as a huge version)")
    count = cur.scalar(10, "tensor count")
    keys = cur.scalar(10, "metadata count")
    # each key-value pair takes at least 8 + 4 + 1 bytes, each tensor 8 + 4 + 8 + 4 + 8
    cur.need(keys * 13, f"{keys} metadata entries")
    cur.need(count * 32, f"{count} tensors")
    if count > MAX_TENSORS:
        raise bad(path, f"GGUF header lists {count} tensors; sdpa reads at most {MAX_TENSORS:,}")
    meta: dict[str, Any] = {}
    for _ in range(keys):
        key = cur.string("a metadata key")
        if len(key) > MAX_NAME or key in meta:
            raise bad(path, f"corrupt GGUF header: metadata key {key[:80]!r} is "
                      + ("listed twice" if key in meta else "too long"))
        meta[key] = cur.value(cur.scalar(4, key), key)
    align = meta.get("general.alignment", 32)
    if not isinstance(align, int) or isinstance(align, bool) or align <= 0 or align & (align - 1):
        raise bad(path, f"general.alignment {align!r} is not a power of two",
                  "general.alignment")
    infos = []
    for _ in range(count):
        name = cur.string("a tensor name")
        if len(name) > MAX_NAME:
            raise bad(path, f"corrupt GGUF header: tensor name {name[:80]!r}… is too long")
        dims = cur.scalar(4, name)
        if not 1 <= dims <= MAX_DIMS:
            raise bad(path, f"tensor {name!r} has {dims} dimensions (1 to {MAX_DIMS})")
        ne = [cur.scalar(10, name) for _ in range(dims)]
        infos.append((name, ne, cur.scalar(4, name), cur.scalar(10, name)))
    data = -(-cur.pos // align) * align
    tensors: dict[str, GGUFTensor] = {}
    for name, ne, kind, offset in infos:
        if name in tensors:
            raise bad(path, f"corrupt GGUF header: tensor {name!r} is listed twice")
        tensors[name] = _tensor(path, name, ne, kind, offset, data, size, align)
    return GGUFHeader(path, version, meta, tensors)


def _tensor(path: Path, name: str, ne: list[int], kind: int, offset: int, data: int, size: int,
            align: int) -> GGUFTensor:
    if any(n <= 0 or n > 1 << 40 for n in ne):
        raise bad(path, f"tensor {name!r} has a bad shape {ne}")
    elements = math.prod(ne)
    nbytes = 0
    if kind in BLOCKS:
        block, nb = BLOCKS[kind]
        if ne[0] % block:
            raise bad(path, f"tensor {name!r}: rows of {ne[0]} are not whole {FLOAT_TYPES[kind]} "
                      f"blocks of {block}")
        nbytes = elements // block * nb
    elif kind not in OTHER_TYPES:
        raise bad(path, f"tensor {name!r} has an unknown ggml type {kind}")
    if offset % align or (kind in BLOCKS and data + offset + nbytes > size):
        raise bad(path, f"corrupt GGUF header: tensor {name!r} lies outside the file's data "
                  f"(offset {offset}, {nbytes} bytes, file {size} bytes)")
    return GGUFTensor(name, kind, tuple(reversed(ne)), data + offset, nbytes)


def dequantize_rows(t: GGUFTensor, path: Path, rows: NDArray[np.integer[Any]]
                    ) -> NDArray[np.float32]:
    """Rows `rows` (sorted, unique) of a 2-D tensor, dequantised: only their bytes are read
    (a 262,144-token embedding is 0.7 GB as float32; a batch of text needs a few rows)."""
    count, width = t.shape
    row_bytes = t.nbytes // count
    mapped = np.memmap(path, dtype=np.uint8, mode="r", offset=t.start, shape=(count, row_bytes))
    raw = np.array(mapped[rows])
    del mapped
    part = GGUFTensor(t.name, t.kind, (len(rows), width), 0, raw.size)
    return finite(_values(part, raw, path), path, t.name, rows)


def dequantize(t: GGUFTensor, path: Path) -> NDArray[np.float32]:
    """One tensor as float32 (float64 stays float64), read from its validated bytes; NaN or
    ±inf (a value, or a quantised block's scale) refused naming the tensor."""
    if t.kind == 0:
        out: NDArray[Any] = np.fromfile(path, dtype="<f4", count=t.nbytes // 4, offset=t.start)
        out = out.reshape(t.shape)
    elif t.kind == 28:
        out = np.fromfile(path, dtype="<f8", count=t.nbytes // 8, offset=t.start)
        out = out.reshape(t.shape)
    elif t.kind == 1:
        out = np.fromfile(path, dtype="<f2", count=t.nbytes // 2, offset=t.start)
        out = out.astype(np.float32).reshape(t.shape)
    else:
        out = _values(t, np.fromfile(path, dtype=np.uint8, count=t.nbytes, offset=t.start),
                      path)
    return finite(out, path, t.name)


def _values(t: GGUFTensor, raw: NDArray[np.uint8], path: Path) -> NDArray[np.float32]:
    """A tensor's bytes as float32 (F64 as float64), its shape restored."""
    if t.kind in (0, 1, 28):
        kind = {0: "<f4", 1: "<f2", 28: "<f8"}[t.kind]
        out = raw.reshape(-1).view(kind)
        out = out if t.kind == 28 else out.astype(np.float32, copy=False)
        return out.reshape(t.shape)
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    rows = math.prod(t.shape[:-1])
    with np.errstate(all="ignore"):  # a NaN or infinite block scale: refused by the caller
        values = guarded(path, lambda: gguf_dequantize(raw.reshape(rows, t.nbytes // rows),
                                                       GGMLQuantizationType(t.kind)),
                         f"the gguf library (dequantising tensor {t.name!r})")
    result: NDArray[np.float32] = np.asarray(values, dtype=np.float32).reshape(t.shape)
    return result
