"""The weight-gradient columns the gradient studies share: one row group, and how it is filled."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sdpa_cli.framework.common import finite

Spread = tuple[float | None, float | None, float | None]


def spread(v: np.ndarray) -> Spread:
    """Mean, its standard error and the median of per-trial values (None where not finite)."""
    return (finite(v.mean()), finite(v.std(ddof=1) / math.sqrt(v.size)), finite(np.median(v)))


@dataclass(frozen=True)
class WeightGrads:
    """‖∂L/∂W_Q‖, ‖∂L/∂W_K‖, ‖∂L/∂W_V‖ (Frobenius, one per trial), each summarised as mean, se
    and median: a row group, `grads: WeightGrads = field(metadata=PART)`."""

    grad_wq_mean: float | None
    grad_wq_se: float | None
    grad_wq_median: float | None
    grad_wk_mean: float | None
    grad_wk_se: float | None
    grad_wk_median: float | None
    grad_wv_mean: float | None
    grad_wv_se: float | None
    grad_wv_median: float | None

    @classmethod
    def of(cls, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray) -> WeightGrads:
        """The group from the per-trial norms of the three weight gradients."""
        return cls(*spread(wq), *spread(wk), *spread(wv))
