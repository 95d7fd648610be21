"""The documents' claims about the scaling rules, judged as the documents wrote them: the
cosine bound (001) is a bound, and a variance is called stable only where it is measured to be
(004's premise on aligned queries). Runs are the shipped specs with fewer trials."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EXPERIMENTS

from sdpa_cli.framework.result import AuditEntry, Result
from sdpa_cli.runner import loader
from sdpa_cli.studies.softmax_sweep import run as sweep


def _run(name: str, **changes: Any) -> Result:
    spec = loader.load(EXPERIMENTS / "softmax-sweep" / f"{name}.yaml", study="softmax-sweep")
    return sweep.run(spec.model_copy(update=changes))


def _claim(result: Result, words: str) -> AuditEntry:
    return next(a for a in result.audit if a.kind == "claim" and words in a.quantity)


@pytest.fixture(scope="module")
def independent() -> Result:
    return _run("rules-independent", trials=100, dims=[16, 4096])


def test_the_cosine_claim_is_the_bound_the_document_states(independent: Result) -> None:
    a = _claim(independent, "unit vectors bounds the scores")
    assert "[−1, 1] regardless of dimension" in a.quantity and a.source.endswith("471, 477")
    assert a.status == "holds"
    rows = {r["dim"]: r for r in independent.rows if r.get("scaling") == "cosine:0.1"}
    for r in rows.values():  # |cos/τ| ≤ 1/τ = 10 on every score of every trial
        assert 0 < r["max_abs_score"] < 10
    # shown beside, not counted: the largest weight is not independent of the dimension
    assert rows[4096]["mean_max_prob"] < 0.5 * rows[16]["mean_max_prob"]
    assert "what the claim does not imply: mean_max_prob" in (a.measurement or "")


def test_004s_stable_variance_is_not_stable_for_aligned_queries() -> None:
    r = _run("rules-field-aligned", trials=100, dims=[16, 1024],
             scalings=[s for s in loader.load(EXPERIMENTS / "softmax-sweep" /
                                                "rules-field-aligned.yaml",
                                                study="softmax-sweep").scalings
                       if s.label in ("none", "sqrt")])
    sqrt = {x["dim"]: x for x in r.rows if x.get("scaling") == "sqrt"}
    # the own key's score has mean ρ√d_k = 16 at d_k = 1024, so a row of 16 scores spreads
    # to about 1 + (15/256)·16² ≈ 16; at d_k = 16, 1 + (15/256)·2² ≈ 1.2: no stable variance
    assert sqrt[1024]["row_score_var"] > 8 * sqrt[16]["row_score_var"]
    a = _claim(r, "stable variance under ÷√d_k")
    assert a.status == "untested" and "premise does not hold" in (a.reason or "")


def test_the_sigma_fourth_claims_are_judged_where_sigma_squared_would_differ() -> None:
    from sdpa_cli.studies.variance import run as variance

    spec = loader.load(EXPERIMENTS / "variance" / "sigma-fourth.yaml", study="variance")
    assert spec.std != 1  # at σ = 1, σ⁴ = σ² and no run tells them apart
    for claim in spec.claims:
        for t in claim.tests:  # each bar is d·σ⁴ (or σ⁴), never d·σ²
            d = int(t.row["dim"]) if t.row.get("scaling") == "none" else 1
            assert t.value == pytest.approx(d * spec.std**4)
            assert abs(t.value - d * spec.std**2) > 2 * t.value / 3
    r = variance.run(spec.model_copy(update={"pairs": 2000}))
    verdicts = [a.status for a in r.audit if a.kind == "claim"]
    assert verdicts == ["holds", "holds"]
    multi = loader.load(EXPERIMENTS / "variance" / "multi-head.yaml", study="variance")
    assert not any("σ⁴" in c.claim for c in multi.claims)  # not judged at σ = 1
