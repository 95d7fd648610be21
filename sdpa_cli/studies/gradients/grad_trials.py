"""Gradient norms of one attention layer at initialisation, one value per random trial."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdpa_cli.numerics.attention_grad import FROZEN_BELOW, backward, forward, frobenius
from sdpa_cli.numerics.scaling import Scaling

# A query row is starved when its part of ∂L/∂W_Q is below this share of the ÷√d_k median.
STARVED_BELOW = 0.01

# Floats one block may hold at once (16 MB; larger blocks measured no faster); the block
# size follows from the layer's shape alone, so it never depends on the number of threads.
BLOCK_FLOATS = 1 << 21
MAX_BLOCK_TRIALS = 256


@dataclass(frozen=True)
class Layer:
    """The study's fixed model (all sizes, the weight scale and the W_K alignment)."""

    d_model: int
    d_k: int
    d_v: int
    n: int  # sequence length: n queries attend over n keys
    init_std: float = 1.0  # σ_w: weights iid N(0, σ_w²/d_model)
    alignment: float = 0.0  # a: W_K = a·W_Q + √(1 − a²)·W'
    causal: bool = False

    def floats_per_trial(self, rules: int = 1) -> int:
        """Floats one trial holds: weights, projections and their gradients, scores."""
        dm, dk, dv, n = self.d_model, self.d_k, self.d_v, self.n
        weights = 2 * dm * (3 * dk + dv)  # W_Q, W', W_K, W_V and the weight gradients
        acts = 6 * n * (2 * dk + dv) + 5 * n * dm  # X, G, Q, K, V, q̃, k̃, dQ, dK, dX …
        return weights + acts + 8 * n * n + 2 * rules

    def block_trials(self) -> int:
        return max(1, min(MAX_BLOCK_TRIALS, BLOCK_FLOATS // self.floats_per_trial()))

    def flops_per_trial(self, rules: int) -> int:
        """Multiply-adds of one trial: the projections once, then each rule's passes."""
        dm, dk, dv, n = self.d_model, self.d_k, self.d_v, self.n
        shared = n * dm * (2 * dk + dv) + dm * (3 * dk + dv)
        per_rule = 2 * n * n * (dk + dv) + 2 * n * dm * (2 * dk + dv) + 6 * n * n
        return shared + rules * per_rule  # an int: exact at any size


@dataclass(frozen=True)
class TrialValues:
    """Per-trial values for one rule, each of shape (trials,)."""

    wq: np.ndarray  # ‖∂L/∂W_Q‖_F
    wk: np.ndarray
    wv: np.ndarray
    x: np.ndarray  # ‖∂L/∂X‖_F
    frozen: np.ndarray  # share of this trial's score rows with ‖J‖_F < FROZEN_BELOW
    score_ms: np.ndarray  # mean of s² over the unmasked scores s (after the rule)
    score_mean: np.ndarray  # mean of s over the unmasked scores
    # share of this trial's query rows whose own part of ∂L/∂W_Q, ‖x_i‖·‖∂L/∂q_i‖, is below
    # STARVED_BELOW × the median row part under ÷√d_k on the same draws
    starved: np.ndarray

    @staticmethod
    def join(parts: Sequence[TrialValues]) -> TrialValues:
        names = ("wq", "wk", "wv", "x", "frozen", "score_ms", "score_mean", "starved")
        return TrialValues(**{k: np.concatenate([getattr(p, k) for p in parts])
                              for k in names})


def draw(rng: np.random.Generator, layer: Layer, trials: int) -> tuple[np.ndarray, ...]:
    """X, W_Q, W_K, W_V and the upstream gradient G of `trials` independent trials, drawn
    in that fixed order (W' before W_V) so a spec change elsewhere never shifts a stream."""
    dm, dk, dv, n = layer.d_model, layer.d_k, layer.d_v, layer.n
    w = layer.init_std / math.sqrt(dm)
    X = rng.standard_normal((trials, n, dm))
    WQ = w * rng.standard_normal((trials, dm, dk))
    Wp = w * rng.standard_normal((trials, dm, dk))
    a = layer.alignment
    WK = a * WQ + math.sqrt(max(0.0, 1.0 - a * a)) * Wp if a else Wp
    WV = w * rng.standard_normal((trials, dm, dv))
    G = rng.standard_normal((trials, n, dv))
    return X, WQ, WK, WV, G


def trial_values(draws: tuple[np.ndarray, ...], layer: Layer,
                 rules: Sequence[Any]) -> list[TrialValues]:
    """Forward and backward of every trial under each rule, on the same draws (so rules are
    compared on identical inputs)."""
    X, WQ, WK, WV, G = draws
    projected = (X @ WQ, X @ WK, X @ WV)
    x_norm = np.linalg.norm(X, axis=-1)

    def row_parts(g: Any) -> np.ndarray:
        """‖x_i‖·‖∂L/∂q_i‖: the Frobenius norm of query row i's outer product in ∂L/∂W_Q."""
        return np.asarray(x_norm * np.linalg.norm(np.asarray(g.dQ), axis=-1))

    def run(rule: Any) -> tuple[Any, Any]:
        _, cache = forward(X, WQ, WK, WV, rule, causal=layer.causal, projected=projected)
        return cache, backward(cache, G)

    # the bar for a starved row: a share of the ÷√d_k rule's median row part, same draws
    sqrt = next((i for i, r in enumerate(rules) if _is_sqrt(r)), None)
    done = {sqrt: run(rules[sqrt])} if sqrt is not None else {}
    ref = row_parts((done[sqrt] if sqrt is not None else run(Scaling.parse("sqrt")))[1])
    bar = STARVED_BELOW * np.median(ref, axis=-1, keepdims=True)
    out = []
    for i, rule in enumerate(rules):
        cache, g = done[i] if i in done else run(rule)
        seen = np.isfinite(cache.S)
        count = seen.sum(axis=(-1, -2))
        s = np.where(seen, cache.S, 0.0)
        frozen = (cache.row_jacobian_norms() < FROZEN_BELOW).mean(axis=-1)
        out.append(TrialValues(
            wq=frobenius(g.dWQ, 1), wk=frobenius(g.dWK, 1), wv=frobenius(g.dWV, 1),
            x=frobenius(np.asarray(g.dX), 1), frozen=frozen,
            score_ms=(s * s).sum(axis=(-1, -2)) / count, score_mean=s.sum(axis=(-1, -2)) / count,
            starved=(row_parts(g) < bar).mean(axis=-1),
        ))
    return out


def _is_sqrt(rule: Any) -> bool:
    """The plain ÷√d_k rule (the reference for starved rows)."""
    return bool(getattr(rule, "label", "") == "sqrt")


def score_moments(layer: Layer, factor: float) -> tuple[float, float]:
    """Exact (E[s], E[s²]) of one unmasked score s = factor·q·k, pooled over the unmasked
    entries, for the model's Gaussian X and weights (no normalisation, no cap).

    Off the diagonal (i ≠ j): E[s] = 0, E[(q·k)²] = σ⁴(d_k + a²d_k(d_k+1)/d_model).
    On it (a token with itself): E[q·k] = a·d_k·σ², E[(q·k)²] = σ⁴(1 + 2/d_model)·d_k·
    (1 + a²(d_k + 1)). Derived by Isserlis' theorem given X, then over X (|x|² ~ χ²_dm,
    (x_i·x_j)² with mean d_model). The diagonal is 1/n of the entries (2/(n+1) causal).
    """
    dm, dk, a, s2 = layer.d_model, layer.d_k, layer.alignment, layer.init_std ** 2
    off2 = s2 * s2 * (dk + a * a * dk * (dk + 1) / dm)
    diag2 = s2 * s2 * (1.0 + 2.0 / dm) * dk * (1.0 + a * a * (dk + 1))
    share = 2.0 / (layer.n + 1) if layer.causal else 1.0 / layer.n
    mean = share * a * dk * s2
    second = (1.0 - share) * off2 + share * diag2
    return factor * mean, factor * factor * second
