"""The audit's counting rule and its identities between printed numbers: a printed row, matrix
or range is one error; a cited paper's errors are not the documents' own; a number that does
not follow from the printed numbers it follows from by an identity is `inconsistent`, even
when it sits within Monte Carlo reach of the truth on its own.

Expected values are worked by hand from the documents' printed numbers (513.68 / 512 =
1.003281, 2 × 22.6 = 45.2), never copied from the program's output.
"""

from __future__ import annotations

import pytest
from conftest import EXPERIMENTS

from sdpa_cli import registry
from sdpa_cli.framework.audit import compare
from sdpa_cli.framework.causes import classify, tally
from sdpa_cli.framework.result import AuditEntry, Result
from sdpa_cli.runner import loader
from sdpa_cli.spec.common import Documented, Printed
from sdpa_cli.studies.variance import run as variance


def _entry(quantity: str, value: str, **kw: object) -> tuple[Documented, Printed]:
    doc = Documented.model_validate({"where": kw.pop("where", f"at {quantity}"),
                                     "quantity": quantity, "value": value, **kw})
    assert isinstance(doc.value, Printed)
    return doc, doc.value


def _classified(*entries: tuple[Documented, Printed, float, float | None]
                ) -> tuple[AuditEntry, ...]:
    pairs = [("", doc, compare(doc, p, doc.quantity, computed, se, 4, "d.txt"))
             for doc, p, computed, se in entries]
    return classify(pairs)


def test_a_printed_range_line_counts_once() -> None:
    # "Histogram: Range -10 to +10": both ends wrong, one printed line, one error
    lo = _entry("min", "-10", where="100D experiment, histogram range", row={"dim": 100})
    hi = _entry("max", "10", where="100D experiment, histogram range", row={"dim": 100})
    out = _classified((*lo, -33.3, None), (*hi, 31.1, None))
    assert [a.cause for a in out] == ["own", "own"]
    assert tally(out).own == 1


def test_two_rows_of_one_printed_column_are_two_errors() -> None:
    # one `where:` (a column) at two rows: two printed lines, two errors
    a = _entry("variance", "20.00", where="table, Unscaled Var", row={"dim": 16})
    b = _entry("variance", "80.00", where="table, Unscaled Var", row={"dim": 64})
    out = _classified((*a, 16.0, None), (*b, 64.0, None))
    assert [x.cause for x in out] == ["own", "own"]
    assert tally(out).own == 2


def test_a_cited_papers_errors_are_not_the_documents_own() -> None:
    doc, p = _entry("max_prob", "1", cites="Some paper 2025", tolerance=0.05)
    mine, q = _entry("probs[0]", "0.30")
    out = _classified((doc, p, 0.816, None), (mine, q, 0.25, None))
    t = tally(out)
    assert (t.own, t.cited) == (1, 1)
    assert "1 error in a cited paper" in t.headline("their")


def test_a_quotient_that_breaks_its_identity_is_inconsistent() -> None:
    # 1.0034 sits 0.24 se from 1 (se 0.014 of a 10000-draw variance), so it matches the truth;
    # but it is the same samples' 513.68 ÷ 512 = 1.003281, which prints as 1.0033
    doc, p = _entry("variance", "1.0034", replay="513.68 / 512")
    a = _classified((doc, p, 1.0, 0.014))[0]
    assert a.status == "mismatch" and a.cause == "inconsistent"
    assert a.replayed == pytest.approx(513.68 / 512, rel=1e-12)
    ok, q = _entry("variance", "1.0033", replay="513.68 / 512")
    b = _classified((ok, q, 1.0, 0.014))[0]
    assert b.status == "match" and b.cause is None


def test_a_restated_draw_printed_otherwise_is_inconsistent() -> None:
    # the same Monte Carlo number printed twice, both within reach of the truth, apart
    first, p1 = _entry("variance", "1.0055")
    again, p2 = _entry("variance", "1.0061")
    out = _classified((first, p1, 1.0, 0.014), (again, p2, 1.0, 0.014))
    assert out[0].status == "match" and out[1].cause == "inconsistent"


def test_a_right_number_beside_a_wrong_input_is_that_inputs_error() -> None:
    # p printed 0.9999 where the truth is 0.9999546 (own); p(1 − p) printed right (4.5e-5)
    # though 0.9999 × 0.0001 = 1e-4: the disagreement is the input's error, counted once
    p_doc, p_print = _entry("p", "0.9999")
    j_doc, j_print = _entry("j", "0.000045", replay="0.9999 * (1 - 0.9999)", **{"from": "p"})
    out = _classified((p_doc, p_print, 0.9999546, None), (j_doc, j_print, 4.54e-5, None))
    assert out[0].cause == "own"
    assert out[1].status == "match"


def _run(path: str) -> Result:
    file = EXPERIMENTS / path
    s = loader.load(file, study="variance")
    registry.check_documented(s, str(file))
    return variance.run(s)


def test_empirical_verification_rows_that_break_scaled_eq_unscaled_over_d() -> None:
    # by hand: 16.05/16 = 1.003125 (printed 1.0032), 63.81/64 = 0.997031 (0.9970),
    # 257.42/256 = 1.005547 (1.0055): within the digits of both prints; 513.68/512 =
    # 1.003281 (1.0034) and 1026.39/1024 = 1.002334 (1.0024) are not
    r = _run("variance/empirical-verification.yaml")
    scaled = {a.line: a for a in r.audit if "Scaled Var" in a.source}
    causes = {int(line.split("dim=")[1].split(",")[0]): a.cause for line, a in scaled.items()
              if line is not None}
    assert causes == {16: None, 64: None, 256: None, 512: "inconsistent",
                      1024: "inconsistent"}
    assert all(a.accepted for a in scaled.values() if a.cause == "inconsistent")
    assert tally(r.audit).inconsistent == 2


def test_the_score_range_tables_two_sigma_column_is_audited_from_its_sigma() -> None:
    r = _run("variance/score-range.yaml")
    ranges = [a for a in r.audit if "(±2σ)" in a.source]
    assert sorted(a.documented for a in ranges) == [8, 16, 22.6, 45.2]
    # 2√512 = 45.255 is not 45.2, but twice the printed 22.6 is: rounding, not an error
    top = next(a for a in ranges if a.documented == 45.2)
    assert top.cause == "rounding" and top.replayed == pytest.approx(45.2)
    assert all(a.status == "match" for a in ranges if a is not top)
