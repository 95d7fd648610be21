"""The train study's claims, as sdpa words them: the robustness line counts what the nudge
flipped apart from what a fair bar flips; the collapse claim's median rests on many
initialisations with a bootstrap interval; the learning-rate claim is judged by a sweep
(smaller best rate and training at it), and a run with one rate only points there; a claim two
documents make is a claim of each; the deep-network claim keeps its last clause."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
from conftest import EXPERIMENTS

from sdpa_cli.numerics.bootstrap import median_interval
from sdpa_cli.runner import loader
from sdpa_cli.studies.train import findings, robustness
from sdpa_cli.studies.train.rows import ClaimRow, RobustnessRow, SensitivityRow, TrainRow

LN9 = math.log(9)  # 8 pairs and the query: n = 9 keys


def _claim(claim: str, verdict: str, robust: str) -> ClaimRow:
    return ClaimRow(source="001.txt, x", claim=claim, verdict=verdict, evidence="e",
                    robustness=robust)


def test_the_robustness_line_counts_nudge_flips_apart_from_bar_fragility() -> None:
    table = [RobustnessRow(256, "none", "adam", 0.003, 1.0, 1.01, 0.01, None, None)]
    claims = [_claim("a", "holds", "fragile: a bar in 0.05…0.2 of ln n flips it"),
              *(_claim(str(i), "holds", "robust") for i in range(5))]
    line = robustness.sentence(table, claims)
    assert "no claim verdict flips under it (6 the same)" in line
    assert "1 other is fragile to its own bar" in line
    flipped = [_claim("b", "holds", f"fragile: {robustness.NUDGE_FLIP}, fails"), *claims[1:]]
    assert "1 of 6 claim verdicts flip under it" in robustness.sentence(table, flipped)


def _row(**given: object) -> TrainRow:
    base: dict[str, object] = {f.name: None for f in fields(TrainRow)}
    base.update(dim=256, scaling="none", optimiser="adam", lr=0.003, seeds=3, reached=0)
    return TrainRow(**{**base, **given})  # type: ignore[arg-type]


def test_the_collapse_median_is_many_initialisations_with_an_interval() -> None:
    rng = np.random.default_rng(7)
    # 0.0418·ln n from one-hot with a narrow spread: no bar in 0.05…0.2 reaches it
    low = LN9 * (0.0418 + 0.002 * rng.standard_normal(200))
    c = findings._collapse_claim([], 256, 9, low, 1)
    assert c.verdict == "holds" and c.robustness == "not measured"
    assert "the same for any bar in 0.05…0.2" in c.evidence and "200 initialisations" in c.evidence
    # the same median, seeds spread so that its interval reaches 0.05: fragile, and said so
    wide = LN9 * (0.0418 + 0.05 * rng.standard_normal(30))
    f = findings._collapse_claim([], 256, 9, wide, 1)
    assert f.robustness.startswith("fragile")
    median, lo, hi = median_interval(wide, 1)
    assert lo <= median <= hi and hi / LN9 >= 0.05
    # a median inside the range: a bar between 0.05 and it would flip the verdict
    inside = LN9 * np.full(50, 0.0523)
    assert "below 0.0523 would flip it" in findings._collapse_claim([], 256, 9, inside, 1).evidence


def _sens(rule: str, best: float, opt: str = "adam") -> SensitivityRow:
    return SensitivityRow(dim=256, scaling=rule, optimiser=opt, rates=3, best_lr=best,
                          best_final_loss=0.1, lr_sensitivity=0.5, best_at_edge=False,
                          final_loss_by_lr=[], lrs=[])


def test_a_smaller_best_rate_that_still_does_not_train_is_partly() -> None:
    spec = loader.load(EXPERIMENTS / "train" / "slow" / "lr-sweep.yaml", study="train")
    spec = spec.model_copy(update={"learning_rates": {"adam": [0.0003, 0.001, 0.003]}})
    rows = [_row(scaling="none", lr=0.001, reached=0), _row(scaling="sqrt", lr=0.003, reached=3)]
    sens = [_sens("none", 0.001), _sens("sqrt", 0.003)]
    c = findings._lr_claim(spec, rows, sens, "sqrt", 256)
    assert c.verdict == "partly"
    assert "smaller; at it the unscaled head reaches the target in 0/3 seeds" in c.evidence
    trained = [_row(scaling="none", lr=0.001, reached=3), rows[1]]
    assert findings._lr_claim(spec, trained, sens, "sqrt", 256).verdict == "holds"
    same = [_sens("none", 0.003), _sens("sqrt", 0.003)]
    assert findings._lr_claim(spec, [_row(scaling="none", lr=0.003), rows[1]], same, "sqrt",
                              256).verdict == "fails"


def test_a_run_with_one_rate_points_to_the_sweep_and_decides_nothing() -> None:
    spec = loader.load(EXPERIMENTS / "train" / "train-scaled-vs-unscaled.yaml", study="train")
    c = findings._lr_claim(spec, [], [], "sqrt", 256)
    [entry] = findings.claim_entries([c], "train-scaled-vs-unscaled")
    assert entry.status == "untested" and not entry.decides
    assert findings.LR_SWEEP in (entry.reason or "")
    swept = ClaimRow(source=findings.LR_SRC, claim=findings.LR_CLAIM, verdict="partly",
                     evidence="d_k = 256: …", robustness="robust")
    [decided] = findings.claim_entries([swept], "lr-sweep", beyond="a sweep at d_k 256 only")
    assert decided.decides and "beyond" not in (decided.measurement or "")


def test_the_instability_claim_is_a_claim_of_each_document_that_makes_it() -> None:
    worse = {"sgd": 1, "adam": 1}
    one = findings._instability_claim(worse, 256, "sqrt", blew_up=False)
    zero = findings._instability_claim(worse, 256, "sqrt", blew_up=False,
                                       document=findings.D0)
    assert one.source.startswith(findings.D1) and ";" not in one.source
    assert zero.source.startswith(findings.D0) and zero.source.endswith("line 842")
    assert one.verdict == zero.verdict == "partly"


def test_the_deep_network_claim_keeps_its_last_clause_and_train_depth_decides_it() -> None:
    words = ("saturated attention in early layers creates severe gradient bottlenecks "
             "that prevent effective training")
    for path, study in (("depth/post-vs-pre.yaml", "depth"),
                        ("train/train-depth-post-ln.yaml", "train"),
                        ("train/train-depth-pre-ln.yaml", "train")):
        spec = loader.load(EXPERIMENTS / path, study=study)
        [c] = [c for c in spec.claims if "early layers" in c.claim]
        assert c.claim == words and c.lines == [710] and c.beyond is None
    depth_pre = loader.load(EXPERIMENTS / "train" / "train-depth-pre-ln.yaml", study="train")
    assert depth_pre.beyond  # the study's own claims stay beyond; the listed one decides
    assert {t.quantity for t in depth_pre.claims[0].tests} == {"reached",
                                                               "final_accuracy_median"}
