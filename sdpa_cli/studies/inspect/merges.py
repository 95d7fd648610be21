"""A SentencePiece vocabulary's BPE merges, derived from its tokens in bounded time and memory."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any

import numpy as np
from numpy.typing import NDArray

# Deriving the merges slices each token at every cut its lengths allow and hands every merge to
# `tokenizers` as two strings: both cost the token's length per cut. Real vocabularies need
# a few such steps per character of the vocabulary (Gemma 3's: 6.3); one whose tokens nest as
# prefixes of one another ('x', 'xx', 'xxx', …) needs the cube of its size, and is refused
# before any is taken.
STEPS_PER_CHAR = 64
STEPS_FLOOR = 1 << 24
SHORT = 64  # tokens up to this long are hashed in NumPy blocks; longer ones sliced one by one
BLOCK = 1 << 20  # characters per block of hashed tokens (a few MB of arrays at a time)
_BASE = 0x9E3779B97F4A7C15  # odd: invertible modulo 2⁶⁴
_INV = pow(_BASE, -1, 1 << 64)
_PRIME = (1 << 31) - 1
_PBASE = 1_000_003
_PINV = pow(_PBASE, -1, _PRIME)
_MIX = (np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0xA24BAED4963EE407))  # prime part, length


def derived_merges(tokens: Sequence[str], order: NDArray[np.float64], m: Any
                   ) -> list[tuple[str, str]]:
    """SentencePiece BPE stores scores, not merges: every split of a token into two tokens of
    the vocabulary is a merge, ranked by the merged token's `order` (best first), then by the
    pieces' ids. A split is only tried at a cut where a token as long as each piece exists
    (one token of 300,000 characters has no cut to try), and the whole costs at most
    STEPS_PER_CHAR per character of the vocabulary, or it is refused (`m.refuse`).

    Short tokens are split by hashing: every prefix's and suffix's key (two polynomials over
    the code points, modulo 2⁶⁴ and modulo the prime 2³¹ − 1, and the length) is looked up
    among the tokens' keys by binary search. Two texts of one key in the vocabulary send it
    all to slicing; a piece that is not a token matches one by chance with odds of about
    2⁻⁶⁴ per lookup (the merges equal those of slicing every token, checked on Gemma 3's
    262,144 tokens)."""
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    by_length, cuts = _cuts(lengths)
    chars = int(lengths.sum())
    steps = sum(int(by_length[n].size) * int(c.size) * n for n, c in cuts.items())
    if steps > STEPS_PER_CHAR * chars + STEPS_FLOOR:
        raise m.refuse("tokenizer.ggml.tokens", f"its {len(tokens):,} tokens nest as prefixes "
                       f"of one another: deriving their merges would take {steps:.2g} steps, "
                       f"over {STEPS_PER_CHAR} per character of the vocabulary ({chars:,}); "
                       "sdpa reads no such vocabulary")
    if not cuts:
        return []
    index = _Index(tokens, lengths, by_length)
    found = [index.splits(n, rows, cuts[n]) for n, rows in by_length.items() if n in cuts]
    merged, lft, rgt = (np.concatenate([f[k] for f in found]) for k in range(3))
    if len(set(tokens)) < len(tokens):  # a text listed twice merges as its last id only
        last = {t: i for i, t in enumerate(tokens)}
        keep = np.fromiter((last[tokens[i]] == i for i in merged.tolist()), dtype=bool,
                           count=merged.size)
        merged, lft, rgt = merged[keep], lft[keep], rgt[keep]
    rank = _rank(order, merged, lft, rgt, len(tokens))
    get = tokens.__getitem__
    return list(zip(map(get, lft[rank].tolist()), map(get, rgt[rank].tolist()), strict=True))


def _rank(order: NDArray[np.float64], merged: NDArray[np.int64], lft: NDArray[np.int64],
          rgt: NDArray[np.int64], count: int) -> NDArray[np.intp]:
    """The merges' order: the merged token's `order` (best first, ties tied), then the left
    and right ids; as one 63-bit key when the ids fit 21 bits each (every vocabulary sdpa
    reads: at most 2,000,000 strings), which sorts 4× faster than three keys."""
    dense = np.unique(-order, return_inverse=True)[1].reshape(-1).astype(np.int64)
    if count < 1 << 21:
        return np.argsort((dense[merged] << 42) | (lft << 21) | rgt, kind="stable")
    return np.lexsort((rgt, lft, dense[merged]))


def _cuts(lengths: NDArray[np.int64]
          ) -> tuple[dict[int, NDArray[np.int64]], dict[int, NDArray[np.int64]]]:
    """Token indices by length, and per length n the cuts c (0 < c < n) where tokens of both
    lengths c and n − c exist (the only cuts whose two pieces can both be tokens)."""
    if lengths.size == 0:
        return {}, {}
    present = np.zeros(int(lengths.max()) + 1, dtype=bool)
    present[lengths] = True
    order = np.argsort(lengths, kind="stable")
    sizes, starts = np.unique(lengths[order], return_index=True)
    groups = np.split(order, starts[1:])
    by_length = {int(n): g for n, g in zip(sizes.tolist(), groups, strict=True)}
    cuts = {}
    for n in by_length:
        c = np.arange(1, n, dtype=np.int64)
        c = c[present[c] & present[n - c]]
        if c.size:
            cuts[n] = c
    return by_length, cuts


class _Block:
    """Tokens of one length n: every prefix's two polynomial hashes, from which the key of
    any prefix or suffix is a subtraction and a multiplication (powers of the inverse
    base shift a suffix to start at power 0)."""

    def __init__(self, tokens: Sequence[str], ids: NDArray[np.int64], n: int) -> None:
        self.ids, self.n = ids, n
        text = "".join(map(tokens.__getitem__, ids.tolist())).encode("utf-32-le")
        points = np.frombuffer(text, dtype=np.uint32).astype(np.uint64).reshape(ids.size, n)
        self.wide = np.zeros((ids.size, n + 1), dtype=np.uint64)  # modulo 2⁶⁴ (wrapping)
        np.cumsum(points * _powers(n, _BASE, 1 << 64), axis=1, out=self.wide[:, 1:])
        # modulo the prime: terms below 2⁵², so sums of up to SHORT of them stay exact
        self.prime = np.zeros((ids.size, n + 1), dtype=np.uint64)
        np.cumsum(points * _powers(n, _PBASE, _PRIME), axis=1, out=self.prime[:, 1:])

    def prefix(self, cuts: Any) -> NDArray[np.uint64]:
        return _key(self.wide[:, cuts], self.prime[:, cuts] % _PRIME, cuts)

    def suffix(self, cuts: NDArray[np.int64]) -> NDArray[np.uint64]:
        n = self.n
        wide = (self.wide[:, [n]] - self.wide[:, cuts]) * _powers(n + 1, _INV, 1 << 64)[cuts]
        prime = (self.prime[:, [n]] - self.prime[:, cuts]) % _PRIME
        prime = prime * _powers(n + 1, _PINV, _PRIME)[cuts] % _PRIME
        return _key(wide, prime, n - cuts)


def _blocks(tokens: Sequence[str], rows: NDArray[np.int64], n: int) -> Iterator[_Block]:
    """The tokens of length n in blocks of about BLOCK characters."""
    step = max(1, BLOCK // max(n, 1))
    for s in range(0, rows.size, step):
        yield _Block(tokens, rows[s:s + step], n)


def _powers(n: int, base: int, modulus: int) -> NDArray[np.uint64]:
    out, x = [], 1
    for _ in range(n):
        out.append(x)
        x = x * base % modulus
    return np.array(out, dtype=np.uint64)


class _Index:
    """The short tokens by the key (hash, length) of their text; a text listed twice is the
    token of its last id, as in a dict. Long tokens, and a vocabulary with two texts of one
    key, are split by slicing and a dict instead."""

    def __init__(self, tokens: Sequence[str], lengths: NDArray[np.int64],
                 by_length: dict[int, NDArray[np.int64]]) -> None:
        self.tokens, self.lengths = tokens, lengths
        keys, ids = [], []
        for n, rows in by_length.items():
            if n <= SHORT:
                for block in _blocks(tokens, rows, n):
                    keys.append(block.prefix([n])[:, 0])
                    ids.append(block.ids)
        key = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
        idx = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        order = np.lexsort((idx, key))  # by key, then id: the last of equal keys wins
        self.keys, self.ids = key[order], idx[order]
        last = np.append(self.keys[1:] != self.keys[:-1], True)
        same = np.flatnonzero(~last)
        self.exact = not any(tokens[self.ids[k]] != tokens[self.ids[k + 1]]
                             for k in same.tolist())
        self.keys, self.ids = self.keys[last], self.ids[last]
        self._dict: dict[str, int] | None = None

    def find(self, keys: NDArray[np.uint64]) -> NDArray[np.int64]:
        at = np.minimum(np.searchsorted(self.keys, keys), max(self.keys.size - 1, 0))
        if self.keys.size == 0:
            return np.full(keys.size, -1, dtype=np.int64)
        return np.where(self.keys[at] == keys, self.ids[at], -1)

    def splits(self, n: int, rows: NDArray[np.int64], cuts: NDArray[np.int64]
               ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """(merged, left, right) ids of every split of the tokens of length n at `cuts`."""
        if n > SHORT or not self.exact:
            return self._sliced(rows, cuts)
        out = []
        for block in _blocks(self.tokens, rows, n):
            left = self.find(block.prefix(cuts))
            row, col = np.nonzero(left >= 0)  # suffixes are looked up where prefixes matched
            right = self.find(block.suffix(cuts)[row, col])
            hit = right >= 0
            out.append((block.ids[row[hit]], left[row, col][hit], right[hit]))
        return tuple(np.concatenate([o[k] for o in out]) for k in range(3))  # type: ignore

    def _sliced(self, rows: NDArray[np.int64], cuts: NDArray[np.int64]
                ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        if self._dict is None:
            self._dict = {t: i for i, t in enumerate(self.tokens)}
        get, tokens = self._dict.get, self.tokens
        which = np.repeat(rows, cuts.size)
        where = np.tile(cuts, rows.size)
        pairs = list(zip(which.tolist(), where.tolist(), strict=True))
        left = np.fromiter(map(get, (tokens[i][:c] for i, c in pairs), repeat(-1)),
                           dtype=np.int64, count=len(pairs))
        right = np.fromiter(map(get, (tokens[i][c:] for i, c in pairs), repeat(-1)),
                            dtype=np.int64, count=len(pairs))
        hit = (left >= 0) & (right >= 0)
        return which[hit], left[hit], right[hit]


def _key(wide: NDArray[np.uint64], prime: NDArray[np.uint64], length: Any
         ) -> NDArray[np.uint64]:
    """One 64-bit key of a piece: both hashes and its length, mixed (wrapping)."""
    out: NDArray[np.uint64] = wide + prime * _MIX[0] + \
        np.asarray(length, dtype=np.uint64) * _MIX[1]
    return out
