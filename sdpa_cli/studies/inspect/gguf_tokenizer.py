"""The tokenizer a GGUF file describes, rebuilt from its metadata with `tokenizers`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sdpa_cli.studies.inspect.boundary import guarded
from sdpa_cli.studies.inspect.gguf_meta import Metadata
from sdpa_cli.studies.inspect.merges import derived_merges

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types
# llama.cpp's pre-tokenizer names → the split its BPE merges were learned on
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLITS = {"llama3": _LLAMA3, "llama-v3": _LLAMA3, "llama-bpe": _LLAMA3, "smaug-bpe": _LLAMA3,
          "qwen2": _QWEN2, "deepseek-r1-qwen": _QWEN2}
# llama.cpp's pre-tokenizers that split every digit off, then apply GPT-2's split (its
# llama-vocab.cpp); transformers' GGUF converter leaves the digit split out
DIGITS_APART = ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable spelling of the 256 bytes (byte-level BPE vocabularies use it)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def build(meta: Mapping[str, Any], path: Path) -> Any:
    """A `tokenizers.Tokenizer` from tokenizer.ggml.* (byte-level BPE or SentencePiece BPE),
    its control tokens kept whole, BOS/EOS added as the file's add_bos/add_eos flags say.
    Every key is checked where it is read; every call into `tokenizers` is guarded."""
    m = Metadata(meta, path)
    kind = m.string("tokenizer.ggml.model", None)
    tokens = m.strings("tokenizer.ggml.tokens")
    if not tokens:
        raise m.refuse("tokenizer.ggml.tokens", "GGUF metadata tokenizer.ggml.tokens is empty")
    types = (m.numbers("tokenizer.ggml.token_type", len(tokens), "types", integers=True)
             if "tokenizer.ggml.token_type" in m else None)
    if kind == "gpt2":
        merges = _merges(m, tokens)
        pre = m.string("tokenizer.ggml.pre", None)
    elif kind == "llama":
        scores = m.numbers("tokenizer.ggml.scores", len(tokens), "scores").astype(np.float64)
        nan = np.flatnonzero(np.isnan(scores))
        if nan.size:
            raise m.refuse("tokenizer.ggml.scores", f"tokenizer.ggml.scores[{nan[0]}] is nan; "
                           "scores rank the merges and must be numbers")
        arch = str(m.string("general.architecture", ""))
        order = -np.arange(len(tokens), dtype=np.float64) if arch.startswith("gemma") else scores
        merges = _merges(m, tokens) if "tokenizer.ggml.merges" in m else \
            derived_merges(tokens, order, m)
        unk = tokens[m.token_id("tokenizer.ggml.unknown_token_id", len(tokens), 0)]
        prefix = bool(m.flag("tokenizer.ggml.add_space_prefix", not arch.startswith("gemma")))
    else:
        raise m.refuse("tokenizer.ggml.model", f"tokenizer.ggml.model {kind!r} is not "
                       "supported (gpt2, llama)")
    specials = _specials(m, len(tokens), kind == "llama")
    kinds = [] if types is None else types.tolist()

    def make() -> Any:
        vocab = {t: i for i, t in enumerate(tokens)}
        if kind == "gpt2":
            tok = _byte_level(vocab, merges, pre)
            keep: set[str] | None = set(_bytes_to_unicode().values())
        else:
            tok = _sentencepiece(vocab, merges, unk, prefix)
            keep = None
        _add_tokens(tok, tokens, kinds, keep)
        tok.post_processor = _template(tokens, specials)
        return tok

    return guarded(path, make)


def highest_id(meta: Mapping[str, Any]) -> int:
    """The highest id of a vocabulary `build` accepted: its tokens are ids 0 … count − 1 (a
    text listed twice keeps its last id, and the last token's is the last)."""
    return len(meta["tokenizer.ggml.tokens"]) - 1


def _byte_level(vocab: dict[str, int], merges: list[tuple[str, str]], pre: str | None) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre not in SPLITS)
    if pre in SPLITS:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(SPLITS[pre]), behavior="isolated"), byte_level])
    elif pre in DIGITS_APART:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    return tok


def _sentencepiece(vocab: dict[str, int], merges: list[tuple[str, str]], unk: str,
                   prefix: bool) -> Any:
    from tokenizers import Tokenizer, decoders, models, normalizers

    tok = Tokenizer(models.BPE(vocab, merges, unk_token=unk, fuse_unk=True,
                               byte_fallback=True))
    steps = [normalizers.Prepend("▁")] if prefix else []
    tok.normalizer = normalizers.Sequence([*steps, normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    return tok


def _add_tokens(tok: Any, tokens: Sequence[str], kinds: Sequence[int],
                keep: set[str] | None) -> None:
    """Control tokens kept whole (byte-level: those spelled in its bytes), user-defined ones
    matched before the model; an empty text matches nothing and is left out."""
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t, k in zip(tokens, kinds, strict=False)
                            if k == CONTROL and t and (keep is None or set(t) <= keep)])
    tok.add_tokens([AddedToken(t, normalized=False, special=False)
                    for t, k in zip(tokens, kinds, strict=False) if k == USER_DEFINED and t])


def _specials(m: Metadata, count: int, sentencepiece: bool) -> list[tuple[str, int]]:
    """("bos", id) and ("eos", id) as the file's flags say (llama.cpp adds BOS to a
    SentencePiece vocabulary that does not say otherwise)."""
    parts = []
    for which, default in (("bos", sentencepiece), ("eos", False)):
        if m.flag(f"tokenizer.ggml.add_{which}_token", default):
            parts.append((which, int(m.token_id(f"tokenizer.ggml.{which}_token_id", count))))
    return parts


def _template(tokens: Sequence[str], parts: list[tuple[str, int]]) -> Any:
    """BOS before and EOS after each sequence. The template names them by placeholders, not
    by their texts: a text such as `$B`, `<s>:1` or one with a space is template syntax."""
    from tokenizers import processors

    if not parts:
        return None
    single = " ".join([*(w for w, _ in parts if w == "bos"), "$A",
                       *(w for w, _ in parts if w == "eos")])
    return processors.TemplateProcessing(
        single=single, special_tokens=[{"id": w, "ids": [i], "tokens": [tokens[i]]}
                                       for w, i in parts])


def _merges(m: Metadata, tokens: Sequence[str]) -> list[tuple[str, str]]:
    """tokenizer.ggml.merges, each 'LEFT RIGHT' with LEFT, RIGHT and LEFTRIGHT tokens (the
    tokenizers library panics on a merge whose result is not one)."""
    key = "tokenizer.ggml.merges"
    merges = m.meta.get(key)
    if merges is None or (isinstance(merges, np.ndarray) and merges.size == 0):
        return []  # a vocabulary with no merges: every token stands alone
    merges = m.strings(key)
    vocab = set(tokens)
    out = []
    for n, pair in enumerate(merges):
        a, sep, b = pair.partition(" ")
        if not sep or not a or not b:
            raise m.refuse(key, f"{key} holds {pair[:40]!r}, not 'LEFT RIGHT'")
        for piece, role in ((a, "names"), (b, "names"), (a + b, "makes")):
            if piece not in vocab:
                raise m.refuse(key, f"{key}[{n}] {pair[:40]!r} {role} {piece[:40]!r}, which "
                               "is not a token")
        out.append((a, b))
    return out
