"""The issue-15 rules in the saturation studies: explicit scores, leading keys, vectors, peaks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sdpa_cli import registry
from sdpa_cli import spec as spec_mod
from sdpa_cli.errors import InputError
from sdpa_cli.numerics.keys import leading_key
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.context import RunContext


def _run(study: str, **overrides):
    spec = spec_mod.load(None, study=study, overrides=overrides)
    return registry.get(study).run(spec, RunContext(workers=1))


def test_explicit_scores_take_logn_with_n_the_length() -> None:
    z = [3.0, -2.0, -2.0, -2.0, -2.0]
    result = _run("softmax-sweep", scores=z, scalings=["none", "logn:0.43", "softcap:1"], dim=4)
    by = {r["scaling"]: r for r in result.rows}
    c = 0.43 * math.log(5)
    e = [math.exp(c * x) for x in z]
    assert by["logn:0.43"]["probs"] == pytest.approx([x / sum(e) for x in e], rel=1e-13)
    capped = [math.tanh(x / 2) for x in z]  # softcap:1 of q·k/√4
    e = [math.exp(x) for x in capped]
    assert by["softcap:1"]["probs"] == pytest.approx([x / sum(e) for x in e], rel=1e-13)


def test_explicit_scores_refuse_rules_that_need_vectors() -> None:
    with pytest.raises(InputError, match="normalises q and k"):
        spec_mod.load(None, study="softmax-sweep",
                      overrides={"scores": [1, 2], "scalings": ["qknorm"], "dim": 4})


def test_leading_key_rows_are_the_exact_family() -> None:
    result = _run("jacobian", margin=2.0, keys=[2, 64, 4096], scalings=["none", "logn:1"])
    for rule in ("none", "logn:1"):
        rows = [r for r in result.rows if r["scaling"] == rule]
        lk = leading_key([2, 64, 4096], 2.0, Scaling.parse(rule))
        assert [r["max_prob"] for r in rows] == pytest.approx(lk.max_prob.tolist(), rel=1e-15)
        assert [r["frobenius"] for r in rows] == pytest.approx(lk.frobenius.tolist(), rel=1e-15)
    assert result.figures[0].kind == "rules.leading_keys"


def test_vector_rows_for_the_new_rules_and_additive() -> None:
    result = _run("softmax-sweep", dims=[8, 32, 128], keys=[6], trials=300, seed=3,
                  scalings=["sqrt", "qknorm", "qknorm:rms", "softcap:2", "logn:0.5", "mup"],
                  additive=8)
    labels = {r["scaling"] for r in result.rows}
    assert labels == {"sqrt", "qknorm", "qknorm:rms", "softcap:2", "logn:0.5", "mup",
                      "additive:8"}
    assert all(c.passed for c in result.checks), [c for c in result.checks if not c.passed]
    row = next(r for r in result.rows if r["scaling"] == "qknorm" and r["dim"] == 8)
    assert row["theory_score_var"] == pytest.approx(8 / 7, rel=1e-15)
    row = next(r for r in result.rows if r["scaling"] == "logn:0.5" and r["dim"] == 8)
    assert row["factor"] == pytest.approx(0.5 * math.log(6), rel=1e-15)
    slopes = next(t for t in result.tables if t.name == "slopes")
    std = {r["scaling"]: r for r in slopes.rows if r["quantity"] == "score_std"}
    assert std["mup"]["theory_slope"] == -0.5 and std["additive:8"]["theory_slope"] == 0.0


def test_jacobian_peak_is_refined_with_an_se() -> None:
    stds = [0.5, 0.7071, 1, 1.414, 2, 2.828, 4]
    result = _run("jacobian", score_stds=stds, keys=[16], trials=400, seed=5)
    peak = next(t for t in result.tables if t.name == "peaks").rows[0]
    assert peak["s_star_se"] is not None and 0 < peak["s_star_se"] < 0.5
    assert 1.0 < peak["s_star"] < 2.828 and not peak["at_edge"]


def test_gaussian_rows_carry_the_rem_prediction() -> None:
    result = _run("softmax-sweep", score_stds=[1.0, 8.0], keys=[64], trials=200, seed=1)
    low, high = result.rows
    assert low["rem_participation"] == 0.0
    assert high["rem_participation"] == pytest.approx(1 - math.sqrt(2 * math.log(64)) / 8)
    assert high["rem_gap"] == pytest.approx(high["mean_participation"] - high["rem_participation"])
    assert np.isfinite(high["mean_participation_se"])


@pytest.mark.parametrize(("rule", "message"), [
    ("softcap:5", "softcap:5 caps the scores .*not a multiple of q·k"),
    ("qknorm", "qknorm normalises q and k .*not a multiple of q·k"),
    ("qknorm:rms", "qknorm:rms normalises q and k"),
    # logn IS a multiple of q·k; what the variance study lacks is the number of keys n
    ("logn:0.43", r"logn:0.43 multiplies q·k by 0.43·ln n, n the number of keys.*no n\)"),
])
def test_variance_refuses_rules_it_cannot_measure_and_says_why(rule: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        spec_mod.load(None, study="variance", overrides={"dims": [4], "scalings": [rule]})
    if rule.startswith("logn"):
        assert "not a multiple" not in str(err.value)
