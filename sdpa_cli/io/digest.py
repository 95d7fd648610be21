"""SHA-256 of bytes and of files (read a MiB at a time): how sdpa recognises what it wrote."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# (path, size, mtime) → sha256 of a file sdpa reads (a model, a text): hashed once per process
# however many times it is asked (a batch's unchanged check, then the run that records it).
_READ: dict[tuple[str, int, int], str] = {}


def input_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _READ:
        _READ[key] = sha256_file(path)
    return _READ[key]
