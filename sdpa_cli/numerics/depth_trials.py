"""Random trials of the attention stack at initialisation: draws, and per-block values per trial."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sdpa_cli.numerics.attention_grad import FROZEN_BELOW, frobenius
from sdpa_cli.numerics.depth import Block, backward, forward, output, token_cosine
from sdpa_cli.numerics.scaling import Scaling

# Floats one block of trials may hold at once (32 MB: a trial of 12 blocks at d_k 256 holds
# ~1M floats of weights, and blocks of one trial spent most of their time in Python); the block
# size follows from the model's shape alone, never from the number of threads.
BLOCK_FLOATS = 1 << 22
MAX_BLOCK_TRIALS = 64
MLP_WIDTH = 4  # W_1 is d_model × 4·d_model


@dataclass(frozen=True)
class Stack:
    """The depth study's fixed model: sizes, weight scale, MLP, mask. d_k and L are per call."""

    d_model: int
    n: int
    max_dim: int  # the largest d_k: W_Q and W_K are drawn this wide, each d_k takes a prefix
    max_layers: int  # blocks drawn; a stack of L blocks uses the first L
    init_std: float = 1.0
    mlp: bool = False
    causal: bool = False

    def weight_floats(self) -> int:
        """Floats of one trial's weights (W_1, W_2 only with the MLP)."""
        dm = self.d_model
        return self.max_layers * dm * (2 * self.max_dim + dm
                                       + (2 * MLP_WIDTH * dm if self.mlp else 0))

    def floats_per_trial(self) -> int:
        """One trial's weights, plus one forward's caches and one backward's gradients."""
        dm, dk, n = self.d_model, self.max_dim, self.n
        per_block = n * (14 * dm + 8 * dk + 6 * n) + (MLP_WIDTH * n * dm * 3 if self.mlp else 0)
        grads = dm * (2 * dk + dm + (2 * MLP_WIDTH * dm if self.mlp else 0))
        return self.weight_floats() + self.max_layers * (per_block + grads) + 4 * n * dm

    def block_trials(self) -> int:
        return max(1, min(MAX_BLOCK_TRIALS, BLOCK_FLOATS // self.floats_per_trial()))

    def flops(self, d_k: int, layers: Sequence[int]) -> int:
        """Multiply-adds of one trial under one (d_k, rule, norm): a forward through the
        deepest stack (shallower stacks share it) and a backward (about 2×) per L."""
        dm, n = self.d_model, self.n
        block = n * dm * (2 * d_k + dm) + 2 * n * n * (d_k + dm) + 10 * n * dm
        if self.mlp:
            block += 2 * MLP_WIDTH * n * dm * dm
        return block * (max(layers) + 2 * sum(layers))  # an int: exact at any size


@dataclass(frozen=True)
class Draws:
    """One block of trials: X, G (T, n, d_model) and each block's weights (T, d_model, ·)."""

    X: np.ndarray
    G: np.ndarray
    blocks: tuple[Block, ...]  # W_Q, W_K at max_dim columns; W_1, W_2 None without MLP


def draw(rng: np.random.Generator, stack: Stack, trials: int) -> Draws:
    """X, G, then block by block W_Q, W_K, W_V (and W_1, W_2 with the MLP), in that fixed
    order. Every W is N(0, σ_w²/fan_in), fan_in its number of rows. Every (L, d_k, rule,
    norm) reads these same numbers (common random numbers): d_k takes W_Q's and W_K's first
    d_k columns, L the first L blocks. (mlp is not an axis: with and without MLP are two
    specs, and their streams differ after the first block's W_V.)"""
    dm, n, dk, wide = stack.d_model, stack.n, stack.max_dim, MLP_WIDTH * stack.d_model
    s = stack.init_std
    X = rng.standard_normal((trials, n, dm))
    G = rng.standard_normal((trials, n, dm))
    blocks = []
    for _ in range(stack.max_layers):
        wq, wk = ((s / math.sqrt(dm)) * rng.standard_normal((trials, dm, dk)) for _ in "qk")
        wv = (s / math.sqrt(dm)) * rng.standard_normal((trials, dm, dm))
        w1 = w2 = None
        if stack.mlp:
            w1 = (s / math.sqrt(dm)) * rng.standard_normal((trials, dm, wide))
            w2 = (s / math.sqrt(wide)) * rng.standard_normal((trials, wide, dm))
        blocks.append(Block(wq, wk, wv, w1, w2))
    return Draws(X, G, tuple(blocks))


@dataclass(frozen=True)
class BlockValues:
    """Per-trial values of every block of one stack, each (L, trials); block 0 first."""

    wq: np.ndarray  # ‖∂L/∂W_Q‖_F
    wk: np.ndarray
    wv: np.ndarray
    frozen: np.ndarray  # share of the block's score rows with ‖J‖_F < FROZEN_BELOW
    cosine: np.ndarray  # mean off-diagonal cosine between the rows of h after the block

    @staticmethod
    def join(parts: Sequence[BlockValues]) -> BlockValues:
        names = ("wq", "wk", "wv", "frozen", "cosine")
        return BlockValues(**{k: np.concatenate([getattr(p, k) for p in parts], axis=1)
                              for k in names})


def stack_values(d: Draws, stack: Stack, d_k: int, rule: Scaling, norm: str,
                 layers: Sequence[int]) -> dict[int, BlockValues]:
    """L → the per-block values of the first L blocks, for every L in `layers`: one forward
    through the deepest stack (block l's forward does not depend on the blocks above it),
    then one backward from each L's output."""
    blocks = [Block(b.WQ[..., :d_k], b.WK[..., :d_k], b.WV, b.W1, b.W2)
              for b in d.blocks[:max(layers)]]
    caches = forward(d.X, blocks, rule, norm, causal=stack.causal)
    frozen = np.stack([(c.attn.row_jacobian_norms() < FROZEN_BELOW).mean(axis=-1)
                       for c in caches])
    cosine = np.stack([token_cosine(c.out) for c in caches])
    out = {}
    for L in layers:
        _, final = output(caches[:L], norm)
        grads, _ = backward(caches[:L], blocks[:L], d.G, norm, final=final)
        out[L] = BlockValues(
            wq=np.stack([frobenius(g.dWQ, 1) for g in grads]),
            wk=np.stack([frobenius(g.dWK, 1) for g in grads]),
            wv=np.stack([frobenius(g.dWV, 1) for g in grads]),
            frozen=frozen[:L], cosine=cosine[:L])
    return out
