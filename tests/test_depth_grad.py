"""The attention stack's hand-written backward against central finite differences (float64)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sdpa_cli.numerics.depth import (
    Block,
    backward,
    forward,
    layer_norm,
    layer_norm_back,
    output,
    token_cosine,
)
from sdpa_cli.numerics.scaling import Scaling

RULES = [Scaling.parse(r) for r in (
    "none", "sqrt", "linear", "sqrt-half", "temperature:3", "power:0.75", "cosine",
    "cosine:0.2", "qknorm", "qknorm:rms", "softcap:2", "logn:0.5", "linear:4", "mup")]
N, DM, DK = 3, 4, 3  # d_k 3: qknorm centres q, and a centred 2-vector has one direction
H = 1e-5
NAMES = ("WQ", "WK", "WV", "W1", "W2")


def _blocks(rng: np.random.Generator, layers: int, mlp: bool, scale: float = 1.0
            ) -> list[Block]:
    out = []
    for _ in range(layers):
        w = [scale * rng.standard_normal(s) / math.sqrt(s[0])
             for s in ((DM, DK), (DM, DK), (DM, DM), (DM, 4 * DM), (4 * DM, DM))]
        out.append(Block(*w[:3], *(w[3:] if mlp else (None, None))))
    return out


def _loss(x: np.ndarray, blocks: list[Block], G: np.ndarray, rule: Scaling, norm: str,
          causal: bool) -> np.ndarray:
    """Σ G∘output for every item of a batch (leading axis) of inputs and weights."""
    out, _ = output(forward(x, blocks, rule, norm, causal=causal), norm)
    return np.asarray((out * G).sum(axis=(-1, -2)))


def _params(x: np.ndarray, blocks: list[Block]) -> list[tuple[int, str]]:
    """(block, name) of every parameter array; (-1, 'X') for the input."""
    out = [(-1, "X")]
    for i, b in enumerate(blocks):
        out += [(i, n) for n in NAMES if getattr(b, n) is not None]
    return out


def _directional(x: np.ndarray, blocks: list[Block], G: np.ndarray, rule: Scaling,
                 norm: str, causal: bool, dirs: list[np.ndarray],
                 which: list[tuple[int, str]]) -> np.ndarray:
    """(L(θ + H·v) − L(θ − H·v))/2H for each (parameter, direction v): one batched forward,
    every perturbed copy of the model an item of the batch."""
    m = len(dirs)
    signs = np.concatenate([np.ones(m), -np.ones(m)])
    pert = dirs + dirs

    def stacked(i: int, name: str, base: np.ndarray) -> np.ndarray:
        arr = np.broadcast_to(base, (2 * m, *base.shape)).copy()
        for k, (wi, wn) in enumerate(which + which):
            if (wi, wn) == (i, name):
                arr[k] += signs[k] * H * pert[k]
        return arr

    xs = stacked(-1, "X", x)
    bs = [Block(*(None if getattr(b, n) is None else stacked(i, n, getattr(b, n))
                  for n in NAMES)) for i, b in enumerate(blocks)]
    losses = _loss(xs, bs, G, rule, norm, causal)
    return np.asarray((losses[:m] - losses[m:]) / (2 * H))


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.label)
@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("layers", [1, 2, 3])
def test_backward_matches_central_differences(rule: Scaling, norm: str, layers: int) -> None:
    """Every parameter array, two random directions each, with and without MLP and causal."""
    for mlp in (False, True):
        for causal in (False, True):
            rng = np.random.default_rng([22, layers, int(mlp), int(causal), len(rule.label)])
            x = rng.standard_normal((N, DM))
            blocks = _blocks(rng, layers, mlp)
            G = rng.standard_normal((N, DM))
            caches = forward(x, blocks, rule, norm, causal=causal)
            _, final = output(caches, norm)
            grads, dx = backward(caches, blocks, G, norm, final=final, input_grad=True)
            which = [p for p in _params(x, blocks) for _ in range(2)]
            dirs = [rng.standard_normal(x.shape if i < 0 else getattr(blocks[i], n).shape)
                    for i, n in which]
            fd = _directional(x, blocks, G, rule, norm, causal, dirs, which)
            for (i, name), v, want in zip(which, dirs, fd, strict=True):
                assert dx is not None
                g = dx if i < 0 else getattr(grads[i], "d" + name)
                got = float(np.sum(g * v))
                # the scale of a directional derivative: |g|·|v|/√size (a random v's share)
                scale = float(np.linalg.norm(g) * np.linalg.norm(v) / math.sqrt(v.size))
                assert abs(got - want) <= 1e-6 * max(scale, abs(want)) + 1e-9, \
                    (mlp, causal, i, name, got, want)


def test_every_entry_of_a_two_block_pre_ln_stack_with_mlp() -> None:
    """Entry by entry (not only directions) for one configuration of each norm."""
    for norm in ("post", "pre"):
        rng = np.random.default_rng(5)
        x = rng.standard_normal((N, DM))
        blocks = _blocks(rng, 2, True)
        G = rng.standard_normal((N, DM))
        rule = Scaling.parse("sqrt")
        caches = forward(x, blocks, rule, norm, causal=True)
        _, final = output(caches, norm)
        grads, _ = backward(caches, blocks, G, norm, final=final)
        for i in range(2):
            for name in NAMES:
                base = getattr(blocks[i], name)
                dirs = list(np.eye(base.size).reshape(base.size, *base.shape))
                fd = _directional(x, blocks, G, rule, norm, True, dirs,
                                  [(i, name)] * base.size).reshape(base.shape)
                got = getattr(grads[i], "d" + name)
                assert np.linalg.norm(got - fd) <= 1e-7 * np.linalg.norm(fd), (norm, i, name)


def test_layer_norm_and_its_backward() -> None:
    rng = np.random.default_rng(3)
    x = 3.0 + 2.0 * rng.standard_normal((5, 7))
    y, inv = layer_norm(x)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-14, atol=1e-14)
    dy = rng.standard_normal(x.shape)
    got = layer_norm_back(dy, y, inv)
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = H
        fd[idx] = (np.sum(dy * layer_norm(x + e)[0]) - np.sum(dy * layer_norm(x - e)[0])) / (2 * H)
    np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.label)
def test_identical_tokens_give_wq_and_wk_zero_gradient(rule: Scaling) -> None:
    """Rows of h all equal: every score row is constant, dS's rows and its total sum are 0,
    so ∂L/∂W_Q = ∂L/∂W_K = 0 in every block (to rounding), while ∂L/∂W_V is not."""
    rng = np.random.default_rng(11)
    x = np.tile(rng.standard_normal((1, DM)), (5, 1))
    for norm in ("post", "pre"):
        for causal in (False, True):
            blocks = _blocks(rng, 3, True)
            G = rng.standard_normal((5, DM))
            caches = forward(x, blocks, rule, norm, causal=causal)
            _, final = output(caches, norm)
            grads, _ = backward(caches, blocks, G, norm, final=final)
            for g in grads:
                size = float(np.linalg.norm(g.dWV))
                assert size > 1e-3
                assert np.linalg.norm(g.dWQ) <= 1e-13 * size
                assert np.linalg.norm(g.dWK) <= 1e-13 * size
            for c in caches:
                np.testing.assert_allclose(token_cosine(c.out), 1.0, rtol=1e-13)


def test_token_cosine_against_the_n_by_n_matrix() -> None:
    rng = np.random.default_rng(4)
    h = rng.standard_normal((3, 6, 5)) + 0.5
    unit = h / np.linalg.norm(h, axis=-1, keepdims=True)
    c = unit @ np.swapaxes(unit, -1, -2)
    want = (c.sum(axis=(-1, -2)) - np.trace(c, axis1=-2, axis2=-1)) / 30
    np.testing.assert_allclose(token_cosine(h), want, rtol=1e-13)


def test_batched_trials_equal_a_loop() -> None:
    """Per-trial weights (T, …) give, trial by trial, the unbatched gradients."""
    rng = np.random.default_rng(9)
    T = 3
    xs = rng.standard_normal((T, N, DM))
    per = [_blocks(rng, 2, True) for _ in range(T)]
    blocks = [Block(*(np.stack([getattr(p[i], n) for p in per]) for n in NAMES))
              for i in range(2)]
    G = rng.standard_normal((T, N, DM))
    rule = Scaling.parse("none")
    for norm in ("post", "pre"):
        caches = forward(xs, blocks, rule, norm)
        _, final = output(caches, norm)
        grads, _ = backward(caches, blocks, G, norm, final=final)
        for t in range(T):
            c1 = forward(xs[t], per[t], rule, norm)
            _, f1 = output(c1, norm)
            g1, _ = backward(c1, per[t], G[t], norm, final=f1)
            for a, b in zip(grads, g1, strict=True):
                np.testing.assert_allclose(a.dWQ[t], b.dWQ, rtol=1e-11, atol=1e-14)
                np.testing.assert_allclose(a.dW1[t], b.dW1, rtol=1e-11, atol=1e-14)
