"""Per-row gradients on W_Q (the starved share: query rows whose gradient is below 1% of the
÷√d_k median): ∂L/∂Q against central differences, its rows summing to ∂L/∂W_Q, and the
starved share recomputed by hand from those rows."""

from __future__ import annotations

import numpy as np

from sdpa_cli.numerics.attention_grad import backward, forward
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.gradients.grad_trials import STARVED_BELOW, Layer, draw, trial_values


def test_query_gradient_matches_central_differences_and_sums_to_dwq() -> None:
    rng = np.random.default_rng(5)
    n, dm, dk, dv = 4, 6, 3, 2
    X = rng.standard_normal((n, dm))
    WQ, WK, WV = (rng.standard_normal((dm, d)) / np.sqrt(dm) for d in (dk, dk, dv))
    G = rng.standard_normal((n, dv))
    rule = Scaling.parse("none")
    Q, K, V = X @ WQ, X @ WK, X @ WV

    def loss(q: np.ndarray) -> float:
        o, _ = forward(X, WQ, WK, WV, rule, projected=(q, K, V))
        return float(np.sum(G * o))

    _, cache = forward(X, WQ, WK, WV, rule, projected=(Q, K, V))
    g = backward(cache, G)
    assert g.dQ is not None
    h = 1e-6
    fd = np.zeros_like(Q)
    for i in range(n):
        for j in range(dk):
            up, down = Q.copy(), Q.copy()
            up[i, j] += h
            down[i, j] -= h
            fd[i, j] = (loss(up) - loss(down)) / (2 * h)
    assert np.max(np.abs(g.dQ - fd)) <= 1e-7 * max(1.0, np.max(np.abs(fd)))
    rows = sum(np.outer(X[i], g.dQ[i]) for i in range(n))  # each query row's part
    assert np.allclose(rows, g.dWQ, rtol=1e-12, atol=1e-12)


def test_starved_share_against_the_sqrt_median_by_hand() -> None:
    layer = Layer(d_model=8, d_k=64, d_v=64, n=6)
    draws = draw(np.random.default_rng(11), layer, 5)
    none, sqrt = Scaling.parse("none"), Scaling.parse("sqrt")
    got = trial_values(draws, layer, [none, sqrt])
    X, WQ, WK, WV, G = draws

    def parts(rule: Scaling) -> np.ndarray:
        _, cache = forward(X, WQ, WK, WV, rule)
        dq = np.asarray(backward(cache, G).dQ)
        return np.array([[np.linalg.norm(np.outer(X[t, i], dq[t, i])) for i in range(6)]
                         for t in range(5)])

    bar = STARVED_BELOW * np.median(parts(sqrt), axis=1, keepdims=True)
    assert np.array_equal(got[0].starved, (parts(none) < bar).mean(axis=1))
    assert np.array_equal(got[1].starved, (parts(sqrt) < bar).mean(axis=1))
    # without ÷√d_k among the rules the bar is still the ÷√d_k median (computed apart)
    alone = trial_values(draws, layer, [none])
    assert np.array_equal(alone[0].starved, got[0].starved)
