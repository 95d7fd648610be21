"""Root causes of the audit: each printed step against the exact chain and against
the document's own printed inputs; own / carried (from) / rounding / inconsistent; material.

Expected causes are derived by hand from the document's printed numbers (exp(0.08) = 1.0833,
0.06 + 0.17 + 0.30 = 0.53, 6.89 / 3 = 2.297), never copied from the program's output.
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import EXPERIMENTS

from sdpa_cli import registry
from sdpa_cli.framework.audit import compare
from sdpa_cli.framework.causes import classify, grouped, tally
from sdpa_cli.framework.result import Result, audit_from_json
from sdpa_cli.numerics.formula import evaluate
from sdpa_cli.report.writers import with_counts
from sdpa_cli.runner import loader as spec
from sdpa_cli.spec.common import Documented, Printed
from sdpa_cli.studies.worked_example import replay as worked_example


def run(name: str) -> Result:
    path = EXPERIMENTS / "worked-example" / f"{name}.yaml"
    s = spec.load(path, study="worked-example")
    registry.check_documented(s, str(path))
    return worked_example.run(s)


@pytest.fixture(scope="module")
def happy() -> Result:
    return run("i-am-happy")


def _find(result: Result, quantity: str, where: str) -> list:
    return [a for a in result.audit if a.quantity == quantity and where in a.source]


def test_exp_of_rounded_scores_is_rounding_not_an_error(happy: Result) -> None:
    # exp(0.08) = 1.08329 rounds to the printed 1.083; the exact chain's 0.0808 gives 1.0842
    a = _find(happy, "exp_scaled_scores[0][0]", "Step 5")[0]
    assert a.status == "mismatch" and a.cause == "rounding"
    assert a.replayed == pytest.approx(math.exp(0.08), rel=1e-12)
    s = _find(happy, "exp_scaled_sums[0]", "Sum")[0]  # 1.083 + 1.197 + 1.336 = 3.616
    assert s.cause == "rounding" and s.replayed == pytest.approx(1.083 + 1.197 + 1.336)


def test_rounded_weight_times_value_is_rounding(happy: Result) -> None:
    a = _find(happy, "output_terms[0][2][1]", "Step 6")[0]  # 0.37 × 0.8 = 0.296 → 0.30
    assert a.cause == "rounding" and a.replayed == pytest.approx(0.37 * 0.8)
    b = _find(happy, "output[0][1]", "Context(I) =")[0]  # 0.06 + 0.17 + 0.30 = 0.53
    assert b.cause == "rounding" and b.replayed == pytest.approx(0.53)


def test_wrong_weight_rows_are_own_errors_and_row_2_is_material(happy: Result) -> None:
    # softmax of the printed scaled row 2 (0.18, 0.44, 0.70): e^x / Σ e^x, by hand
    ex = [math.exp(x) for x in (0.18, 0.44, 0.70)]
    expect = [x / sum(ex) for x in ex]
    row2 = [_find(happy, f"weights[1][{j}]", "All three rows: row 2")[0] for j in range(3)]
    assert all(a.cause == "own" for a in row2)
    assert [a.replayed for a in row2] == pytest.approx(expect, abs=1e-12)
    # printed (0.26, 0.37, 0.37) ties 'am' and 'happy'; exactly, 'happy' wins alone
    assert all(a.material and "happy" in a.material for a in row2)
    row3 = [_find(happy, f"weights[2][{j}]", "All three rows: row 3")[0] for j in range(3)]
    assert all(a.cause == "own" and a.material is None for a in row3)  # same winner


def test_values_built_on_a_wrong_weight_are_carried_from_it(happy: Result) -> None:
    pct = _find(happy, "weights[1][0]", "Interpretation")[0]  # 26% restates 0.26
    assert pct.cause == "carried" and pct.from_ and "row 2" in pct.from_
    term = _find(happy, "output_terms[1][0][0]", "Context(am)")[0]  # 0.26 × 0.1 = 0.026
    assert term.cause == "carried" and term.replayed == pytest.approx(0.026)
    assert term.root and term.root.startswith("weights[1][0]")
    # every carried value names a root, and the roots group them: 2 printed rows of own errors
    groups = grouped(happy.audit)
    assert len(groups) == 2
    heirs = sum(len(h) for _, h in groups)
    assert heirs == sum(a.cause == "carried" for a in happy.audit)
    # each wrong row reaches: 3 percentages, 9 Step-6 terms, 3 + 3 context entries (Step 6
    # and the Output Context Matrix) = 18 values, counted from the document's layout
    assert [len(h) for _, h in groups] == [18, 18]


def test_headline_counts_root_errors_first(happy: Result) -> None:
    t = tally(happy.audit)
    assert (t.own, t.inconsistent, t.material) == (2, 0, 1)
    assert t.headline().startswith("2 errors of its own, 0 inconsistencies; 1 of the 2 root "
                                   "errors is material (flips a conclusion); "
                                   "36 values inherit them")


def test_money_bank_inconsistency_and_carried_variance() -> None:
    r = run("money-bank-grows")
    table = [a for a in r.audit if "Original Matrix" in a.source and a.status == "mismatch"]
    assert table and all(a.cause == "inconsistent" for a in table)
    # Step 3's row (8, 5, 8): softmax splits between two keys, by hand
    e = [math.exp(8), math.exp(5), math.exp(8)]
    assert e[0] / sum(e) == pytest.approx(0.48786, abs=1e-5)
    assert any(a.material and "0.488" in a.material for a in table)
    var = next(a for a in r.audit if "Variance ≈ 2.30" in a.source)
    assert var.cause == "carried" and var.replayed == pytest.approx(6.89 / 3)
    assert var.from_ and "6.89" in var.from_


def test_formula_reads_arithmetic_and_the_reach_of_its_rounding() -> None:
    value, spread = evaluate("6.89 / 3")
    assert value == pytest.approx(6.89 / 3) and spread == pytest.approx(0.005 / 3)
    value, spread = evaluate("(0.577)**2 * 52.33")  # exponent 2 is exact, not ±0.5
    d = 2 * 0.577 * 52.33 * 0.0005 + 0.577**2 * 0.005  # first-order reach, by hand
    assert value == pytest.approx(0.577**2 * 52.33) and spread == pytest.approx(d, rel=1e-3)
    with pytest.raises(ValueError):
        evaluate("__import__('os')")


def _entry(quantity: str, value: str, **kw: object) -> tuple[Documented, Printed]:
    doc = Documented.model_validate({"where": f"at {quantity}", "quantity": quantity,
                                     "value": value, **kw})
    assert isinstance(doc.value, Printed)
    return doc, doc.value


def test_restating_a_value_differently_is_an_inconsistency() -> None:
    first, p1 = _entry("x", "2.00")
    again, p2 = _entry("x", "2.50")
    a1 = compare(first, p1, "x", 2.0, None, 4, "d.txt")
    a2 = compare(again, p2, "x", 2.0, None, 4, "d.txt")
    out = classify([("", first, a1), ("", again, a2)])
    assert out[0].cause is None and out[1].cause == "inconsistent"
    assert out[1].from_ == out[0].label


def test_replay_that_does_not_reproduce_the_print_is_own() -> None:
    doc, p = _entry("y", "17.44", replay="(0.577)**2 * 52.00")  # 17.31, reach ± 0.03
    a = compare(doc, p, "y", 17.42, None, 4, "d.txt")
    assert a.status == "mismatch"
    out = classify([("", doc, a)])
    assert out[0].cause == "own" and out[0].replayed == pytest.approx(0.577**2 * 52.00)


def test_results_json_carries_kind_cause_from(happy: Result) -> None:
    doc = json.loads(json.dumps(happy.to_json()))
    numbers = [a for a in doc["audit"] if a["kind"] == "number"]
    assert {a["cause"] for a in numbers if a["status"] == "mismatch"} == \
        {"own", "carried", "rounding"}
    assert all(a["cause"] is None for a in numbers if a["status"] == "match")
    roots = [a for a in numbers if a["cause"] == "own"]
    assert all("material" in a for a in roots)
    assert any(a["material"] and a["conclusion"] for a in roots)
    carried = [a for a in numbers if a["cause"] == "carried"]
    assert all(a["from"] for a in carried)
    back = [audit_from_json(a) for a in doc["audit"]]  # read back: the same causes
    assert [a.cause for a in back] == [a.cause for a in happy.audit]


def test_results_json_counts_root_errors_before_the_audit(happy: Result) -> None:
    doc = with_counts(happy)
    keys = list(doc)
    assert keys.index("audit_counts") == keys.index("audit") - 1
    c = doc["audit_counts"]
    assert (c["own"], c["inconsistent"], c["material"]) == (2, 0, 1)
    assert c["numbers"] == sum(a.kind == "number" for a in happy.audit)
    assert c["claims_fails"] + c["claims_holds"] + c["claims_partly"] + \
        c["claims_untested"] == sum(a.kind == "claim" for a in happy.audit)


def test_the_same_quantity_at_another_row_is_not_a_restatement() -> None:
    at1, p1 = _entry("max_prob", "0.40", row={"scale": 1})
    at5, p5 = _entry("max_prob", "0.90", row={"scale": 5})
    a1 = compare(at1, p1, "max_prob", 0.455, None, 4, "d.txt")
    a5 = compare(at5, p5, "max_prob", 0.918, None, 4, "d.txt")
    out = classify([("", at1, a1), ("", at5, a5)])
    assert [a.cause for a in out] == ["own", "own"]


def test_two_specs_auditing_one_printed_line_count_it_once() -> None:
    doc, p = _entry("probs[0]", "0.30")
    a = classify([("", doc, compare(doc, p, "probs[0]", 0.25, None, 4, "d.txt"))])[0]
    other = type(a)(**{**vars(a), "source": "d.txt, the same line as another spec words it"})
    assert a.cause == "own" and tally([a, other]).own == 1
    moved = type(a)(**{**vars(a), "printed": "0.31", "documented": 0.31,
                       "source": "d.txt, a third place"})
    assert tally([a, moved]).own == 2  # a different printed number is another error
