"""sdpa's own sentences held to the audit's standard, read at 80 columns:
direction words need a significant and material change; heuristics are not checks; expect:
lines follow the distribution; statements at the strength of their evidence."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from sdpa_cli.framework.result import Check, Result, Table
from sdpa_cli.framework.wording import MATERIAL, move
from sdpa_cli.io import topics
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.report import terminal
from sdpa_cli.runner import loader as specs
from sdpa_cli.studies.gradients import run as gradients
from sdpa_cli.studies.gradients.theory import slope_checks, slope_rows
from sdpa_cli.studies.saturation import score_findings
from sdpa_cli.studies.saturation.score_text import theory_lines
from sdpa_cli.studies.train.findings import claim_status
from sdpa_cli.studies.variance import run as variance


def render(result: Result) -> str:
    """The terminal report at 80 columns, lines joined (rich wraps words, not meaning)."""
    buf = io.StringIO()
    terminal.show(result, None, out=Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    return " ".join(text.split())


def result(**kw: object) -> Result:
    return Result(study="x", name="x", title="t", source="", description="", spec={},
                  table=Table("t", "t", (), ()), **kw)  # type: ignore[arg-type]


def test_materiality_bar_is_one_rule() -> None:
    small = move(0.315, 0.321, 0.0005, 0.0005)  # 8 se apart, 1.9% of its size
    assert small.significant and not small.material and small.word == "is nearly level"
    assert move(0.727, 0.966, 0.001, 0.001).word == "rises"
    assert move(1.0, 1.0 + MATERIAL * 1.2).word == "rises"  # exact values: any change counts
    assert move(0.5, 0.5004, 0.001, 0.001).word == "stays level"


def test_found_line_says_nearly_level_with_its_size_and_the_contrast() -> None:
    rows = [{"dim": d, "keys": 10, "scaling": s, "mean_max_prob": v, "mean_max_prob_se": 5e-4}
            for s, pair in (("none", (0.727, 0.966)), ("sqrt", (0.315, 0.321)))
            for d, v in zip((16, 1024), pair, strict=True)]
    found = score_findings.findings("vectors", rows, jacobian=False)
    text = render(result(findings=found))
    assert "sqrt (n = 10): the mean largest weight is nearly level (+2% from d_k = 16 to " \
           "d_k = 1024: 0.315 → 0.321), where none (n = 10) rises 0.727 → 0.966." in text
    assert "none (n = 10): the mean largest weight rises from 0.727" in text
    assert "sqrt (n = 10): the mean largest weight rises" not in text


def test_heuristic_slope_rows_are_counted_apart_from_the_checks() -> None:
    dims = [16, 64, 256, 1024]
    spec = specs.load(None, study="gradients", overrides={"dims": dims,
                                                          "scalings": ["none"], "seed": 1})
    means = [100.0 * (d / 16) ** 0.75 for d in dims]  # slope 0.75 against the heuristic 0.5
    rows = [{"dim": d, "scaling": "none",
             **{f"grad_{g}_mean": m for g in ("wq", "wk", "wv", "x")},
             **{f"grad_{g}_se": 0.01 * m for g in ("wq", "wk", "wv", "x")},
             **{f"grad_{g}_median": m for g in ("wq", "wk", "wv", "x")}}
            for d, m in zip(dims, means, strict=True)]
    apart: list[str] = []
    checks = slope_checks(spec, rows, slope_rows(spec, rows), 4.0, apart)
    assert not any(c.name.startswith("none W_Q") for c in checks)
    line = next(x for x in apart if x.startswith("none W_Q slope"))
    assert "+0.75" in line and "+0.50, a heuristic" in line
    text = render(result(checks=(Check("a", True, ""), Check("b", True, "")),
                         unchecked=tuple(apart)))
    assert f"checks: 2/2 passed; {len(apart)} heuristic rows apart, not checks:" in text
    assert "heuristic, not a check: none W_Q slope +0.75" in text


def test_expect_lines_follow_the_distribution() -> None:
    sphere = specs.load(None, study="variance", overrides={
        "distribution": "sphere", "scalings": ["none", "power:-0.5"], "dims": [4]})
    lines = " ".join(variance._expect(sphere, PairLaw("sphere")))
    assert "one product" not in lines  # the iid story is false for unit vectors
    assert "1/d" in lines and "×√d (power:-0.5) holds it at 1" in lines
    normal = specs.load(None, study="variance", overrides={"dims": [4]})
    assert "one product" in " ".join(variance._expect(normal, PairLaw("normal")))


def test_vanishing_gradient_verdict_compares_like_with_like() -> None:
    """The raw unscaled gradient carries a factor √d_k against ÷√d_k's by
    construction; the sentence divides each rule's factor out (1 and 1/√d_k) and names the
    starved rows, and its verdict follows those two numbers."""
    spec = specs.load(None, study="gradients", overrides={"dims": [16, 1024],
                                                          "scalings": ["none", "sqrt"],
                                                          "seed": 1})
    rows = [{"dim": 16, "scaling": "none", "grad_wq_mean": 120.0, "grad_wq_se": 3.0,
             "grad_wq_median": 110.0, "frozen_share": 0.01},
            {"dim": 16, "scaling": "sqrt", "grad_wq_mean": 30.0, "grad_wq_se": 1.0,
             "grad_wq_median": 29.0, "frozen_share": 0.0},
            {"dim": 1024, "scaling": "none", "grad_wq_mean": 3200.0, "grad_wq_se": 60.0,
             "grad_wq_median": 2460.0, "frozen_share": 0.64, "starved_share": 0.55},
            {"dim": 1024, "scaling": "sqrt", "grad_wq_mean": 250.0, "grad_wq_se": 5.0,
             "grad_wq_median": 245.0, "frozen_share": 0.0}]
    text = gradients.findings(spec, rows, [])[-1]
    # (120/1)/(30·4) = 1 at d_k = 16; (3200/1)/(250·32) = 0.4 at 1024
    assert "the unscaled mean is 1× the ÷√d_k one at d_k = 16 and 0.4× at d_k = 1024" in text
    assert "55% of the query rows get less than 1% of the ÷√d_k median row gradient" in text
    assert text.endswith("it holds for the starved rows, not for the total, which the other "
                         "rows carry.")
    assert "does not hold for the mean" not in text  # the raw-mean verdict is gone
    rows[2] = {**rows[2], "grad_wq_mean": 1e-12, "starved_share": 1.0}
    assert gradients.findings(spec, rows, [])[-1].endswith("it holds: the total vanishes.")
    rows[2] = {**rows[2], "grad_wq_mean": 8000.0, "starved_share": 0.0}
    assert gradients.findings(spec, rows, [])[-1].endswith("it does not hold here.")


def test_statements_at_the_strength_of_their_evidence() -> None:
    spec = specs.load(None, study="jacobian", overrides={"score_stds": [0.5, 4], "keys": [8]})
    jac = " ".join(theory_lines(spec, jacobian=True))
    assert "‖J‖_F → √(n−1)/n" in jac and "vanishing only on the one-hot side" in jac
    pages = ("theory.md", "gradients.md", "train.md", "coverage.md")  # the README's old sections
    readme = " ".join(" ".join(topics.pages()[p.removesuffix(".md")].read_text().split())
                      for p in pages)
    assert "÷d is the rule that keeps attention stable" not in readme
    assert "÷d is stable for aligned queries only" in readme
    assert "the failure is not a vanishing gradient at initialisation" not in readme
    assert "a total can hide frozen query rows" in readme
    assert "rules out a vanishing total, not vanishing rows" in readme
    assert not re.search(r"Jacobian vanishes on both sides", readme)
    assert "not zero at fixed n" in readme
    assert "vanishes on both sides" not in jac


@pytest.mark.parametrize("verdict", ["holds", "partly", "fails", "untested"])
def test_train_claim_rows_carry_one_verdict_word(verdict: str) -> None:
    """One verdict per claim per run: the train claims table, its notes and the
    audit say the same word; a qualified phrase is refused."""
    assert claim_status(verdict) == verdict


@pytest.mark.parametrize("phrase", ["holds for sgd only", "fails somewhere", "not tested",
                                    "holds as 'trains worse' (stalls)"])
def test_train_claim_phrases_are_refused(phrase: str) -> None:
    with pytest.raises(ValueError, match="must be one word"):
        claim_status(phrase)
