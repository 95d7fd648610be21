"""Text → token chunks: the tokenizer file's own padding and truncation off, specials wrapped."""

from __future__ import annotations

import codecs
import os
import re
import stat
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.errors import InputError, Problem
from sdpa_cli.io import topics
from sdpa_cli.studies.inspect.boundary import guarded
from sdpa_cli.studies.inspect.locate import read_bounded

PROBE = "attention"  # a word every vocabulary spells somehow: finds where the specials go


@dataclass(frozen=True)
class Tokenizer:
    """A `tokenizers` tokenizer with the special tokens one sequence gets around its body.
    Every call into the library is guarded: a failure or a panic names the file."""

    tok: Any
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    decoded: bool = False  # label tokens by their text (byte-level vocabularies spell bytes)
    path: Path = Path("tokenizer.json")  # the file it was read from, for messages
    top: int = 0  # the highest token id it can give (ids need not be dense)

    @property
    def specials(self) -> int:
        return len(self.prefix) + len(self.suffix)

    @property
    def vocab(self) -> int:
        return int(guarded(self.path, lambda: self.tok.get_vocab_size(with_added_tokens=True)))

    def body(self, text: str) -> list[int]:
        return list(guarded(self.path, lambda: self.tok.encode(text,
                                                               add_special_tokens=False).ids))

    def special_ids(self) -> set[int]:
        """The ids of its special added tokens (BOS, EOS, padding, control tokens)."""
        return guarded(self.path, lambda: {int(i) for i, t in
                                           self.tok.get_added_tokens_decoder().items()
                                           if t.special})

    def label(self, i: int) -> str:
        if self.decoded:
            text = str(guarded(self.path, lambda: self.tok.decode([int(i)],
                                                                  skip_special_tokens=False)))
            if text and "\ufffd" not in text:  # a whole character: show it, blanks visible
                return text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")
        return str(guarded(self.path, lambda: self.tok.id_to_token(int(i))) or f"#{i}")


MAX_TOKENIZER = 64 * 1024**2  # tokenizer.json: the largest vocabularies take ~30 MB


def load_tokenizer(path: Path) -> Tokenizer:
    from tokenizers import Tokenizer as HFTokenizer

    raw = read_bounded(path, "tokenizer.json", MAX_TOKENIZER)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(Problem(f"not a tokenizers file: not UTF-8 (byte {e.start})",
                                 file=str(path))) from None
    tok = guarded(path, lambda: HFTokenizer.from_str(text), "the tokenizers library (reading "
                  "tokenizer.json)")
    return wrap(tok, path)


def wrap(tok: Any, path: Path, decoded: bool = False, top: int | None = None) -> Tokenizer:
    """A `tokenizers` tokenizer with its specials found (where the post-processor puts them);
    `top`, its highest token id when the caller knows it (else read from its vocabulary: a
    dict of every token, 0.4 s for Gemma 3's 262,144)."""
    return guarded(path, lambda: _wrap(tok, path, decoded, top))


def _wrap(tok: Any, path: Path, decoded: bool, top: int | None) -> Tokenizer:
    tok.no_padding()  # MiniLM's file pads every sequence to 128
    tok.no_truncation()
    plain = tok.encode(PROBE, add_special_tokens=False).ids
    full = tok.encode(PROBE, add_special_tokens=True).ids
    s = int(tok.num_special_tokens_to_add(False))
    if top is None:
        top = max(tok.get_vocab(with_added_tokens=True).values(), default=0)
    top = max([top, *full])
    for i in range(len(full) - len(plain) + 1):
        if full[i:i + len(plain)] == plain and len(full) - len(plain) == s:
            return Tokenizer(tok, tuple(full[:i]), tuple(full[i + len(plain):]), decoded, path,
                             int(top))
    raise InputError(Problem("cannot tell where its post-processor puts the special tokens",
                             file=str(path)))


def default_paths() -> list[Path]:
    """sdpa's own documentation: its README (package data in a wheel, the checkout's file in
    a development install), then its topic pages in name order (`sdpa help` lists them)."""
    path = Path(str(resources.files("sdpa_cli").joinpath("_data/README.md")))
    readme = path if path.is_file() else Path(__file__).resolve().parents[3] / "README.md"
    return [readme, *topics.pages().values()]


def default_text() -> tuple[str, str]:
    """sdpa's own documentation as one text (README, then the topic pages), and the name to
    show for it. The README alone is a short front door: a few thousand tokens."""
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in default_paths())
    return text, "sdpa's README and topic pages (no --text given)"


MAX_TEXT = 64 * 1024**2  # bytes read from one text file at most (the first 64 MiB)
TEXT_BLOCK = 1 << 14  # the first window of a text, in bytes (doubled as needed)


def _open_text(path: Path) -> int:
    """A file descriptor of a regular file (links followed); devices, FIFOs and folders are
    refused before a byte is read, so /dev/zero cannot fill memory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(Problem(f"cannot read the text: {e.strerror or e}", file=str(path),
                                 field="text")) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(Problem("the text is not a regular file (a device, FIFO or folder)",
                                 file=str(path), field="text"))
    return fd


def _read(fd: int, count: int, path: Path) -> bytes:
    """os.read, its failure (EIO from /proc/self/mem) said as the text's."""
    try:
        return os.read(fd, count)
    except OSError as e:
        raise InputError(Problem(f"cannot read the text: {e.strerror or e}", file=str(path),
                                 field="text")) from None


def read_text(path: Path, limit: int = MAX_TEXT) -> str:
    """A regular file's first `limit` bytes as UTF-8 (a character cut at the bound dropped)."""
    fd = _open_text(path)
    try:
        data = _read(fd, limit, path)
    finally:
        os.close(fd)
    return _decode(data, path, final=len(data) < limit)


def _decode(data: bytes, path: Path, final: bool, offset: int = 0) -> str:
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError as e:
        raise InputError(Problem(f"not UTF-8: byte 0x{data[e.start]:02x} at offset "
                                 f"{offset + e.start}", file=str(path), field="text")) from None


SLACK = 16  # tokens kept clear of a cut: only the last pre-token before it can change


def text_tokens(tok: Tokenizer, paths: list[Path], need: int) -> list[int]:
    """The first `need` body tokens of the files, each tokenised on its own, in order (fewer
    when they run out). Only as much text is read and tokenised as that takes: a window of
    each file's start, doubled until it holds `need` tokens SLACK clear of the window's cut,
    at most MAX_TEXT bytes per file. The tokens are those of the whole text: a cut made
    before a run of whitespace changes at most the pre-token it falls in; a window that is
    mostly one run without whitespace (a line of 8 MiB) is cut anywhere, and only the tokens
    two windows agree on, SLACK short of where they part, are kept."""
    out: list[int] = []
    for path in paths:
        if len(out) >= need:
            break
        out.extend(_file_tokens(tok, path, need - len(out)))
    return out[:need]


def _file_tokens(tok: Tokenizer, path: Path, need: int) -> list[int]:
    fd = _open_text(path)
    try:
        data, size = b"", TEXT_BLOCK
        before: list[int] | None = None  # the last window's tokens, where it had no good cut
        while True:
            want = min(size, MAX_TEXT)
            while len(data) < want:
                block = _read(fd, want - len(data), path)
                if not block:
                    break
                data += block
            whole = len(data) < want or want == MAX_TEXT
            text = _decode(data, path, final=len(data) < want)
            if whole:
                return tok.body(text)[:need]
            cut = _last_space(text)
            if cut > len(text) // 2:
                ids = tok.body(text[:cut])
                if len(ids) >= need + SLACK:
                    return ids[:need]
            else:
                ids = tok.body(text)
                if before is not None and _agree(before, ids) >= need + SLACK:
                    return ids[:need]
                before = ids
            size *= 2
    finally:
        os.close(fd)


def _agree(a: list[int], b: list[int]) -> int:
    """How many tokens two lists share from their start."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0])


_SPACE = re.compile(r"\s")


def _last_space(text: str) -> int:
    """Before the last run of whitespace that has text before it (0: none); searched from
    the end in C, so a window of 64 MiB without whitespace costs no Python loop."""
    found = _SPACE.search(text[::-1])
    if found is None:
        return 0
    return len(text[:len(text) - found.start()].rstrip())


def _what_fits(have: int, tok: Tokenizer, seq_len: int, count: int) -> str:
    """The flags to change, with values this text holds: fewer sequences of this length, or
    this many sequences of a shorter length (or more text)."""
    ways = []
    if have // (seq_len - tok.specials) >= 1:
        ways.append(f"--sequences {have // (seq_len - tok.specials)}")
    if have // count >= 1:
        ways.append(f"--seq-len {have // count + tok.specials}")
    return f"; give {' or '.join(ways)} (spec: sequences, seq_len), or more text" if ways \
        else "; give more text"


def chunks(tok: Tokenizer, ids: list[int], seq_len: int, count: int, where: str
           ) -> NDArray[np.int64]:
    """`count` consecutive chunks of seq_len − s body tokens, each wrapped with the specials:
    (count, seq_len). InputError naming how many tokens there are and how many are needed."""
    body = seq_len - tok.specials
    if body < 1:
        raise InputError(Problem(f"{seq_len} leaves no room beside the {tok.specials} special "
                                 "tokens", field="seq_len"))
    need = body * count
    if len(ids) < need:
        fits = _what_fits(len(ids), tok, seq_len, count)
        raise InputError(Problem(f"too little text: {len(ids)} tokens, and {count} sequences "
                                 f"of {seq_len} need {need} ({body} each beside "
                                 f"{tok.specials} special tokens){fits}", file=where,
                                 field="text"))
    rows = [list(tok.prefix) + ids[i * body:(i + 1) * body] + list(tok.suffix)
            for i in range(count)]
    return np.array(rows, dtype=np.int64)
