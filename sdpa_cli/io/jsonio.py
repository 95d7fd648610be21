"""The one JSON reader: bounded in bytes and in nesting depth, never blocking, one-line errors."""

from __future__ import annotations

import json
import os
import re
import stat
from itertools import accumulate
from pathlib import Path
from typing import Any

from sdpa_cli.errors import InputError, Problem, whole

# results.json, manifests and the batch's own records are bounded by the output budget
# (spec.limits.MAX_OUTPUT, 100 MB); anything larger was not written by sdpa.
MAX_BYTES = 128 * 1024**2
# sdpa writes at most a handful of levels (a result's rows hold lists of lists); Python's
# json recurses once per level and dies of RecursionError near 1000, so far below that.
MAX_DEPTH = 64

# A string (brackets inside it are text). An unterminated one runs to the end, so no quote
# is tried twice and the scan stays linear.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class JsonError(InputError, ValueError):
    """A JSON file that cannot be what sdpa wrote. An InputError (one line, exit 2) for a
    caller that lets it through, and a ValueError for one that treats any unreadable file
    as "not sdpa's", as it treated bad JSON before. `reason` says which limit or rule:
    "read", "size", "depth", "utf8" or "syntax"."""

    def __init__(self, problem: Problem, reason: str) -> None:
        super().__init__(problem)
        self.reason = reason


def read_upto(fd: int, limit: int, chunk: int) -> bytes:
    """At most limit + 1 bytes of an open file, read `chunk` bytes at a time: one more than
    the limit says the file is larger than it was when it was measured."""
    chunks, size = [], 0
    while size <= limit:
        part = os.read(fd, min(chunk, limit + 1 - size))
        if not part:
            break
        chunks.append(part)
        size += len(part)
    return b"".join(chunks)


def _where(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a byte offset."""
    line = raw.count(b"\n", 0, offset) + 1
    return line, offset - (raw.rfind(b"\n", 0, offset) + 1) + 1


def depth_problem(raw: bytes, max_depth: int) -> tuple[int, int] | None:
    """Where raw first nests deeper than max_depth, or None. Iterative, so safe at any depth;
    a document with no more brackets than the limit cannot be too deep and is not scanned."""
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return None
    # The running depth over the brackets outside strings, in C-level loops (6 MB of rows
    # in ~0.1 s); only a file found too deep is walked again to locate the bracket.
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) <= max_depth:
        return None
    depth, pos = 0, 0
    while True:
        m = _STRING.match(raw, pos)
        if m:
            pos = m.end()
            continue
        step = _STEP.get(raw[pos], 0)
        depth += step
        if depth > max_depth:
            return _where(raw, pos)
        pos += 1


def _fail(reason: str, message: str, file: str, line: int | None = None,
          col: int | None = None) -> JsonError:
    return JsonError(Problem(message, file=file, line=line, col=col), reason)


def _read(path: Path, what: str, max_bytes: int) -> bytes:
    """At most max_bytes of a regular file, refusing symbolic links, FIFOs and devices before
    a byte is read, so a planted file can neither block nor fill memory."""
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise _fail("read", f"cannot read {what}: {e.strerror or e}", name) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _fail("read", f"{what} is not a regular file", name)
        if info.st_size > max_bytes:
            raise _fail("size", f"{what} is {info.st_size} bytes, more than sdpa writes (at "
                        f"most {max_bytes}); remove or replace it", name)
        data = read_upto(fd, max_bytes, 1 << 20)
    except OSError as e:
        raise _fail("read", f"cannot read {what}: {e.strerror or e}", name) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew after the fstat
        raise _fail("size", f"{what} is more than {max_bytes} bytes, more than sdpa writes; "
                    "remove or replace it", name)
    return data


def load_json(source: Path | str | bytes, *, what: str, max_depth: int = MAX_DEPTH,
              max_bytes: int = MAX_BYTES, file: str | None = None) -> Any:
    """Parse JSON from a file (a Path) or from text/bytes already in hand. `what` names the
    document in messages ("results.json", "the last-failed record"); `file` names where text
    came from. Every failure is a JsonError naming the file, the line where there is one,
    the limit broken and the way out."""
    if isinstance(source, Path):
        name = str(source)
        raw = _read(source, what, max_bytes)
    else:
        name = file or "<json>"
        raw = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else source
        if len(raw) > max_bytes:
            raise _fail("size", f"{what} is {len(raw)} bytes, more than sdpa writes (at most "
                        f"{max_bytes}); remove or replace it", name)
    deep = depth_problem(raw, max_depth)
    if deep is not None:
        raise _fail("depth", f"{what} nests more than {max_depth} levels deep, deeper than "
                    "sdpa writes: not sdpa's; remove or replace it", name, *deep)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _fail("utf8", f"{what} is not UTF-8 text; not sdpa's: remove or replace it",
                    name, *_where(raw, e.start)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _fail("syntax", f"{what} is not valid JSON ({e.msg}); not sdpa's: remove or "
                    "replace it", name, e.lineno, e.colno) from None
    except (ValueError, RecursionError) as e:  # e.g. a number of more than 4300 digits
        why = ("it holds a whole number of more than 4300 digits" if "4300" in str(e)
               else "it nests too deep" if isinstance(e, RecursionError) else whole(str(e)))
        raise _fail("syntax", f"{what} cannot be read as JSON ({why}); not sdpa's: "
                    "remove or replace it", name) from None
