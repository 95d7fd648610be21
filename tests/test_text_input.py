"""Attacks on the texts inspect tokenises; long lines read and tokenised only as needed."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

import gguf_build as gb
import inspect_fixtures as fx
from attack import Bad, check, peak_run

from sdpa_cli.studies.inspect.text import text_tokens


def _with(text: Callable[[Path], None]) -> Callable[[Path], None]:
    def make(w: Path) -> None:
        gb.gguf(w / "m.gguf")
        text(w / "t.txt")
    return make


def _bytes(data: bytes) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(data)


def _socket(p: Path) -> None:
    # bound by its name from its folder: a socket's whole path must fit in 108 bytes, and
    # pytest's folders (a test run inside a test, as the recipe's copy does) may not
    here = os.getcwd()
    os.chdir(p.parent)
    try:
        s = socket.socket(socket.AF_UNIX)
        s.bind(p.name)
        s.close()
    finally:
        os.chdir(here)


def text(id: str, says: str, make: Callable[[Path], None], where: str = "t.txt: text: ",
         argv: tuple[str, ...] = ("--text", "t.txt")) -> Bad:
    return Bad(id, ["inspect", "m.gguf", *argv, "--seq-len", "8", "--sequences", "2",
                    "--out", "o"], says, make=_with(make), where=where)


CORPUS = [
    text("proc-self-mem", "cannot read the text: Input/output error", lambda p: None,
         "/proc/self/mem: text: ", ("--text", "/proc/self/mem")),
    text("utf16", "not UTF-8: byte 0xff at offset 0", _bytes("w1 w2 ".encode("utf-16"))),
    text("latin1-early", "not UTF-8: byte 0xe9 at offset 100",
         _bytes(b"w1 " * 33 + b"x\xe9" + b" w2" * 4000)),
    text("empty", "too little text: 0 tokens", _bytes(b""), "t.txt: text: "),
    text("too-short", "too little text: 2 tokens", _bytes(b"w1")),
    text("link-to-fifo", "the text is not a regular file",
         lambda p: (os.mkfifo(p.parent / "f"), os.symlink("f", p))),
    text("dangling-link", "cannot read the text: No such file or directory",
         lambda p: os.symlink("gone.txt", p)),
    text("socket", "cannot read the text: No such device or address", _socket),
    text("second-text-a-device", "the text is not a regular file",
         lambda p: (p.write_text("w1 w2", encoding="utf-8"),
                    os.symlink("/dev/zero", p.parent / "z.txt")),
         "z.txt: text: ", ("--text", "t.txt", "--text", "z.txt")),
    text("lone-surrogate-bytes", "not UTF-8: byte 0xed at offset 3",
         _bytes(b"w1 \xed\xa0\x80 w2" * 100)),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 10
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=lambda b: b.id)
def test_hostile_text_is_one_line(sdpa, workdir: Path, case: Bad):
    check(sdpa, workdir, case)


def _counted(tok):
    """The tokenizer, and the lengths of the texts it is asked to tokenise."""
    seen: list[int] = []
    body = tok.body
    object.__setattr__(tok, "body", lambda t: seen.append(len(t)) or body(t))
    return seen, body


def _gguf_tokenizer(folder: Path, kind: str):
    """The tokenizer of a tiny GGUF: byte-level BPE, or SentencePiece (no pre-tokenizer: a
    text is one word to its BPE, the case where a long text cost the most)."""
    from sdpa_cli.studies.inspect.gguf_file import read_header
    from sdpa_cli.studies.inspect.gguf_tokenizer import build
    from sdpa_cli.studies.inspect.text import wrap

    path = gb.gguf(folder / "m.gguf", tokenizer=gb.spm() if kind == "spm" else gb.bpe())
    return wrap(build(read_header(path).metadata, path), path, decoded=True)


@pytest.mark.parametrize("kind", ["bpe", "spm"])
@pytest.mark.parametrize("shape", ["one-line", "a-word-then-one-line", "one-char-repeated"])
def test_a_text_without_whitespace_is_tokenised_only_as_far_as_needed(tmp_path: Path, shape,
                                                                      kind):
    """3 MB with no whitespace (or none after its first word): a window of a few tens of kB is
    tokenised, not the 3 MB (about 200 bytes of memory per character of one word), and its
    tokens are the text's."""
    tok = _gguf_tokenizer(tmp_path, kind)
    run = {"one-line": "w1w2w3w17w5" * 300_000, "a-word-then-one-line": "w3 " + "w12w4" *
           600_000, "one-char-repeated": "w" * 3_000_000}[shape]
    path = tmp_path / "t.txt"
    path.write_text(run, encoding="utf-8")
    seen, body = _counted(tok)
    got = text_tokens(tok, [path], 300)
    assert len(run) >= 3_000_000 and sum(seen) < 200_000, seen
    assert got == body(run[:100_000])[:300]


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_a_long_line_after_short_ones_is_cut_where_windows_agree(tmp_path: Path, kind):
    """Lines of words, then a line of 2 MB: the tokens run on into the long line exactly."""
    tok = _gguf_tokenizer(tmp_path, kind)
    run = fx.text(30) + "\n" + "w7w8" * 500_000
    path = tmp_path / "t.txt"
    path.write_text(run, encoding="utf-8")
    seen, body = _counted(tok)
    got = text_tokens(tok, [path], 2000)
    assert sum(seen) < 300_000, seen
    assert got == body(run[:200_000])[:2000]


@pytest.mark.slow
def test_a_70_mb_line_is_read_in_a_window_in_bounded_memory(tmp_path: Path):
    """A 70 MB line (whole, it overflows what tokenizers can hold): a run reads a window of
    it and stays well under 1 GB."""
    gb.gguf(tmp_path / "m.gguf")
    with (tmp_path / "t.txt").open("w", encoding="utf-8") as f:
        for _ in range(70):
            f.write("w9w1" * 250_000)
    done, peak = peak_run(["inspect", "m.gguf", "--text", "t.txt", "--seq-len", "64",
                           "--sequences", "4", "--out", "o", "--no-plots", "-q"], tmp_path, 300)
    assert done.returncode == 0, done.stderr
    assert peak < 1024 * 1024  # kB
