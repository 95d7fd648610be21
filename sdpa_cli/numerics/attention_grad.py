"""One attention layer O = softmax(rule(XW_Q, XW_K))·XW_V: forward and hand-written backward."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.numerics.softmax import jacobian_norms, softmax

# A score row's softmax Jacobian below this Frobenius norm passes almost no gradient.
FROZEN_BELOW = 1e-3


@dataclass(frozen=True)
class RuleParams:
    """A scaling rule reduced to what the layer needs: S = cap(factor·(q̃·k̃))."""

    factor: float  # multiplier on q̃·k̃ (before any cap)
    norm: str | None  # None, "cosine" (unit length), "layer" (qknorm) or "rms" (qknorm:rms)
    cap: float | None  # softcap C: S = C·tanh(s/C)


def rule_params(scaling: Scaling, d_k: int, n_keys: int) -> RuleParams:
    """What the layer needs of a scaling rule at this d_k and number of keys."""
    factor = float(scaling.factor(d_k, n=n_keys))
    norm = "cosine" if scaling.cosine else scaling.norm
    if norm not in (None, "cosine", "layer", "rms"):
        raise ValueError(f"unknown q/k normalisation {norm!r}")
    return RuleParams(factor=factor, norm=norm,
                      cap=None if scaling.cap is None else float(scaling.cap))


@dataclass(frozen=True)
class AttentionGrads:
    """∂L/∂X, ∂L/∂W_Q, ∂L/∂W_K, ∂L/∂W_V, each the shape of its input (dX None when the
    caller did not ask for it)."""

    dX: np.ndarray | None
    dWQ: np.ndarray
    dWK: np.ndarray
    dWV: np.ndarray


@dataclass(frozen=True)
class Cache:
    """The forward pass's intermediates that its backward pass reads."""

    X: np.ndarray  # (..., n, d_model)
    WQ: np.ndarray
    WK: np.ndarray
    WV: np.ndarray
    Qn: np.ndarray  # normalised queries q̃ (q itself when the rule has no normalisation)
    Kn: np.ndarray
    q_scale: np.ndarray | None  # the divisor of each query row (|q|, rms or std); None = 1
    k_scale: np.ndarray | None
    V: np.ndarray
    S: np.ndarray  # scores after the rule (masked entries −inf)
    P: np.ndarray  # softmax weights by row
    tanh: np.ndarray | None  # tanh(s/C) for softcap, else None
    params: RuleParams

    def row_jacobian_norms(self) -> np.ndarray:
        """‖diag(p) − ppᵀ‖_F of every score row, shape (..., n)."""
        return np.asarray(jacobian_norms(self.P)["frobenius"])

    def frozen_share(self, below: float = FROZEN_BELOW) -> float:
        """Share of score rows whose softmax Jacobian has Frobenius norm below `below`."""
        return float(np.mean(self.row_jacobian_norms() < below))


def _normalise(x: np.ndarray, norm: str | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(x̃, divisor) per row of the last axis; divisor None when nothing is normalised."""
    if norm is None:
        return x, None
    d = x.shape[-1]
    if norm == "layer":
        x = x - x.mean(axis=-1, keepdims=True)
    if norm == "cosine":
        scale = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
    else:  # layer and rms: divide by sqrt(mean(x²)) so that |x̃|² = d
        scale = np.sqrt(np.sum(x * x, axis=-1, keepdims=True) / d)
    if (scale == 0).any():
        raise ValueError("a query or key of length 0 cannot be normalised")
    return x / scale, scale


def _normalise_back(
    grad: np.ndarray, xn: np.ndarray, scale: np.ndarray | None, norm: str | None
) -> np.ndarray:
    """∂L/∂x from ∂L/∂x̃ for x̃ = _normalise(x): project out the radial part, undo the scale."""
    if norm is None or scale is None:
        return grad
    # x̃ = c/r(c) with |x̃|² = m (m = 1 for cosine, d otherwise): ∂x̃/∂c = (I − x̃x̃ᵀ/m)/r.
    m = 1.0 if norm == "cosine" else float(xn.shape[-1])
    dc: np.ndarray = (grad - xn * (np.sum(xn * grad, axis=-1, keepdims=True) / m)) / scale
    if norm == "layer":  # c = x − mean(x): the centring projection is symmetric
        dc = dc - dc.mean(axis=-1, keepdims=True)
    return dc


def causal_mask(n: int) -> np.ndarray:
    """True where query i may see key j (j ≤ i)."""
    return np.tril(np.ones((n, n), dtype=bool))


def forward(
    X: np.ndarray,
    WQ: np.ndarray,
    WK: np.ndarray,
    WV: np.ndarray,
    scaling: Scaling,
    *,
    causal: bool = False,
    projected: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, Cache]:
    """O = softmax(S)·V for S = rule(XW_Q, XW_K), batched over X's leading axes.

    X is (..., n, d_model); each W is (d_model, d) or batched (..., d_model, d), broadcast
    against X's leading axes. `scaling` is a numerics.scaling.Scaling; logn's n is the
    number of keys (the sequence length, also under the causal mask). `projected` may hand
    in (XW_Q, XW_K, XW_V) already computed, so several rules can share one projection.
    """
    X = np.asarray(X, dtype=float)
    WQ, WK, WV = (np.asarray(w, dtype=float) for w in (WQ, WK, WV))
    if WQ.shape[-1] != WK.shape[-1]:
        raise ValueError(f"W_Q and W_K need the same d_k, got {WQ.shape[-1]} and {WK.shape[-1]}")
    n = X.shape[-2]
    params = rule_params(scaling, WQ.shape[-1], n)
    Q, K, V = projected if projected is not None else (X @ WQ, X @ WK, X @ WV)
    Qn, q_scale = _normalise(Q, params.norm)
    Kn, k_scale = _normalise(K, params.norm)
    S = Qn @ np.swapaxes(Kn, -1, -2)
    S *= params.factor  # in place: one 8·B·n² byte temporary fewer
    th = None
    if params.cap is not None:
        th = np.tanh(S / params.cap)
        S = params.cap * th
    if causal:
        S = np.where(causal_mask(n), S, -np.inf)
    P = softmax(S)
    cache = Cache(X=X, WQ=WQ, WK=WK, WV=WV, Qn=Qn, Kn=Kn, q_scale=q_scale, k_scale=k_scale,
                  V=V, S=S, P=P, tanh=th, params=params)
    return P @ V, cache


def _sum_to(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a broadcast gradient back to the parameter's own shape."""
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def _t(a: np.ndarray) -> np.ndarray:
    """Transpose of the last two axes."""
    return np.swapaxes(a, -1, -2)


def _weight_grad(X: np.ndarray, dY: np.ndarray, w_shape: tuple[int, ...]) -> np.ndarray:
    """∂L/∂W for Y = X·W. A weight shared by every sequence of a batch gets Σ_b X_bᵀ dY_b,
    done as one product over the stacked rows (a per-sequence product and a sum cost 2–6×
    more in a training step)."""
    if len(w_shape) == 2 and X.shape[:-1] == dY.shape[:-1]:
        out: np.ndarray = X.reshape(-1, X.shape[-1]).T @ dY.reshape(-1, dY.shape[-1])
        return out
    return _sum_to(_t(X) @ dY, w_shape)


weight_grad = _weight_grad  # public: numerics.depth's MLP weights use the same product


def backward(cache: Cache, dO: np.ndarray, *, input_grad: bool = True) -> AttentionGrads:
    """Hand-written gradients of L for ∂L/∂O = dO (same shape as O). W_Q and W_K are
    separate parameters here even when the caller built W_K from W_Q (alignment).
    input_grad=False skips ∂L/∂X (dX is None): three products a caller with fixed inputs
    (the train study's fixed embeddings) does not need."""
    c = cache
    dO = np.asarray(dO, dtype=float)
    dV = _t(c.P) @ dO
    # Softmax rows: dS = P∘(dP − ⟨dP, P⟩); masked weights are exactly 0, so they get 0.
    # Done in place on dP (the same operations in the same order as the formula).
    dS = dO @ _t(c.V)  # dP
    dS -= np.sum(dS * c.P, axis=-1, keepdims=True)
    dS *= c.P
    if c.tanh is not None:
        dS *= 1.0 - c.tanh * c.tanh
    dS *= c.params.factor  # ∂L/∂(q̃·k̃)
    dQn = dS @ c.Kn
    dKn = _t(dS) @ c.Qn
    dQ = _normalise_back(dQn, c.Qn, c.q_scale, c.params.norm)
    dK = _normalise_back(dKn, c.Kn, c.k_scale, c.params.norm)
    dWQ = _weight_grad(c.X, dQ, c.WQ.shape)
    dWK = _weight_grad(c.X, dK, c.WK.shape)
    dWV = _weight_grad(c.X, dV, c.WV.shape)
    dX = None
    if input_grad:
        dX = _sum_to(dQ @ _t(c.WQ) + dK @ _t(c.WK) + dV @ _t(c.WV), c.X.shape)
    return AttentionGrads(dX=dX, dWQ=dWQ, dWK=dWK, dWV=dWV)


def frobenius(a: np.ndarray, batch_dims: int) -> np.ndarray:
    """Frobenius norm over all axes after the first `batch_dims` (one value per trial)."""
    axes = tuple(range(batch_dims, a.ndim))
    return np.asarray(np.sqrt(np.sum(a * a, axis=axes)) if axes else np.abs(a))

