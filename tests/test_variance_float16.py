"""The variance study's float16 table: q·k formed in half precision with the rule's factor
applied after it, or split over q and k (001's balanced scaling), against float64."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXPERIMENTS

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.runner import loader
from sdpa_cli.studies.variance import run as variance
from sdpa_cli.studies.variance.half import half_dots
from sdpa_cli.studies.variance.spec import VarianceSpec

F16_MAX = 65504.0  # (2 − 2⁻¹⁰)·2¹⁵, float16's largest finite number


def test_half_dots_round_to_float16_and_overflow_past_its_largest_number() -> None:
    rng = np.random.default_rng(3)
    q = rng.standard_normal((500, 64)) * 8
    k = q + rng.standard_normal((500, 64))
    got = half_dots(q, k).astype(np.float64)
    # each operand and product rounds by ≤ 2⁻¹¹ relative, the float32 sum by far less, the
    # float16 result by ≤ 2⁻¹¹ once more: |error| ≤ (3·2⁻¹¹ + 64·2⁻²⁴)·Σ|q_i k_i|
    q16, k16 = q.astype(np.float16).astype(np.float64), k.astype(np.float16).astype(np.float64)
    bound = (3 * 2.0**-11 + 64 * 2.0**-24) * np.abs(q * k).sum(axis=1)
    assert np.all(np.abs(got - (q16 * k16).sum(axis=1)) <= bound)
    big = half_dots(np.full((1, 256), 16.0), np.full((1, 256), 16.0))  # 65536 > 65504
    small = half_dots(np.full((1, 255), 16.0), np.full((1, 255), 16.0))  # 65280: finite
    assert np.isinf(big[0]) and float(small[0]) == 65280.0 and F16_MAX > 65280.0


@pytest.fixture(scope="module")
def run() -> object:
    spec = loader.load(EXPERIMENTS / "variance" / "balanced-split-float16.yaml",
                       study="variance")
    return variance.run(spec.model_copy(update={"pairs": 200}))


def test_the_balanced_split_survives_where_dividing_after_overflows(run: object) -> None:
    rows = {r["dim"]: r for r in run.tables[0].rows}  # type: ignore[attr-defined]
    # q = k with std 20: q·q ≈ 400·d_k, so 6400 and 25600 stay finite, 102400 does not
    assert rows[16]["overflow_after"] == 0 and rows[64]["overflow_after"] == 0
    assert rows[256]["overflow_after"] == 1.0 and rows[256]["error_after"] is None
    assert all(r["overflow_split"] == 0 for r in rows.values())
    # the split's score is the float64 one to float16's rounding (2⁻¹¹ per rounding, a few)
    assert all(r["error_split"] < 8 * 2.0**-11 for r in rows.values())
    claim = next(a for a in run.audit if a.kind == "claim")  # type: ignore[attr-defined]
    assert "numerical stability" in claim.quantity and claim.status == "holds"
    assert claim.source.endswith("line 406")


def test_float16_needs_vectors_of_iid_components() -> None:
    with pytest.raises(SpecFieldError, match="float16"):
        VarianceSpec.model_validate({"study": "variance", "float16": True, "method": "exact"})
