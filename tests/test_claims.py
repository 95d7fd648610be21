"""Claims as audit entries: holds / partly / fails / untested, with the measurement,
its uncertainty and the spec, and the coverage line; a spec's claims: are validated."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from sdpa_cli.framework.causes import claim_coverage
from sdpa_cli.framework.claims import judge, verdicts
from sdpa_cli.framework.result import audit_extra
from sdpa_cli.spec.common import Claim, Documented

# A fake run: two measured values with standard errors (the lookup a study hands the audit).
MEASURED = {(("dim", 16),): (0.30, 0.01), (("dim", 1024),): (0.99, 0.001)}


def lookup(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
    return MEASURED.get(tuple(sorted(entry.row.items())), (None, None))


def claim(*tests: dict, **kw: object) -> Claim:
    return Claim.model_validate({"where": "Summary", "claim": "stays below one half",
                                 "tests": list(tests), **kw})


def below(dim: int, bar: float = 0.5) -> dict:
    return {"quantity": "max_prob", "row": {"dim": dim}, "op": "<", "value": bar}


def test_all_tests_pass_holds_some_partly_none_fails() -> None:
    assert judge(claim(below(16)), lookup, "d.txt", "s").status == "holds"
    mixed = judge(claim(below(16), below(1024)), lookup, "d.txt", "s")
    assert mixed.status == "partly"
    assert "0.3 ± 0.01 < 0.5: yes" in (mixed.measurement or "")
    assert "0.99 ± 0.001 < 0.5: no" in (mixed.measurement or "")
    assert mixed.uncertainty == pytest.approx(0.01)
    assert judge(claim(below(1024)), lookup, "d.txt", "s").status == "fails"


def test_approximately_equal_allows_k_standard_errors() -> None:
    near = {"quantity": "max_prob", "row": {"dim": 16}, "op": "≈", "value": 0.33}
    assert judge(claim(near), lookup, "d.txt", "s", k=4).status == "holds"  # 3 se away
    assert judge(claim(near), lookup, "d.txt", "s", k=2).status == "fails"


def test_than_compares_two_measurements_with_their_combined_se() -> None:
    t = {"quantity": "max_prob", "row": {"dim": 16}, "op": "<",
         "than": {"quantity": "max_prob", "row": {"dim": 1024}}}
    a = judge(claim(t), lookup, "d.txt", "s")
    assert a.status == "holds" and a.uncertainty == pytest.approx(math.hypot(0.01, 0.001))


def test_untested_claims_say_why_and_a_missing_measurement_is_untested() -> None:
    u = judge(claim(untested="needs real checkpoints"), lookup, "d.txt", "s")
    assert (u.status, u.reason) == ("untested", "needs real checkpoints")
    gone = judge(claim(below(64)), lookup, "d.txt", "s")
    assert gone.status == "untested" and "dim 64" in (gone.reason or "")


def test_claim_entries_in_json_and_the_coverage_line() -> None:
    entries = [judge(claim(below(16), claim="one"), lookup, "d.txt", "spec-a"),
               judge(claim(below(16), below(1024), claim="two"), lookup, "d.txt", "spec-a"),
               judge(claim(untested="why", claim="three"), lookup, "d.txt", "spec-a")]
    doc = audit_extra(entries[1])
    assert doc["kind"] == "claim" and doc["spec"] == "spec-a"
    assert doc["measurement"] and doc["uncertainty"] == pytest.approx(0.01)
    assert claim_coverage(entries) == "1 holds, 1 partly, 0 fails, 1 untested"
    assert entries[0].source == "d.txt, Summary"
    other = judge(claim(below(16), document="004_460f19dac2f37f7f.txt"), lookup, "d.txt", "s")
    assert other.source.startswith("004_460f19dac2f37f7f.txt")


def test_a_claim_needs_tests_or_a_reason_and_one_side_per_test() -> None:
    with pytest.raises(ValidationError, match="tests: or untested:"):
        Claim.model_validate({"where": "x", "claim": "y"})
    with pytest.raises(ValidationError, match="not both"):
        claim(below(16), untested="why")
    with pytest.raises(ValidationError, match="exactly one of value"):
        claim({"quantity": "max_prob", "op": "<"})


# --- a premise is not half a claim; thresholds move verdicts; one verdict a claim ----------


def test_a_premise_is_reported_beside_the_verdict_not_in_it() -> None:
    """Saturation happens (premise) but the decisive test fails: the claim fails (it used to
    count the premise as half the claim: partly)."""
    premise = {"quantity": "max_prob", "row": {"dim": 1024}, "op": ">", "value": 0.9}
    a = judge(claim(below(1024), premise=[premise]), lookup, "d.txt", "s")
    assert a.status == "fails"
    assert a.premise is not None and a.premise.startswith("holds: max_prob (dim 1024)")
    assert a.measurement == "max_prob (dim 1024) = 0.99 ± 0.001 < 0.5: no"  # decisive only
    # a premise that does not hold leaves the claim untested, and says why
    unmet = {"quantity": "max_prob", "row": {"dim": 16}, "op": ">", "value": 0.9}
    u = judge(claim(below(16), premise=[unmet]), lookup, "d.txt", "s")
    assert u.status == "untested" and "premise does not hold" in (u.reason or "")
    assert (u.premise or "").startswith("does not hold")


def test_a_threshold_inside_its_range_makes_the_verdict_fragile() -> None:
    """max_prob = 0.30 < 0.5 holds; a fair bar anywhere in 0.2…0.6 could flip it (0.30 lies
    inside): fragile, and it says where. A range that 0.30 lies outside is robust."""
    t = {**below(16), "range": [0.2, 0.6]}
    a = judge(claim(t), lookup, "d.txt", "s")
    assert a.status == "holds" and a.fragile
    assert "flips at a threshold of 0.3, inside the range 0.2…0.6" in (a.robustness or "")
    r = judge(claim({**below(16), "range": [0.4, 0.6]}), lookup, "d.txt", "s")
    assert r.status == "holds" and not r.fragile
    assert (r.robustness or "").startswith("robust")
    assert audit_extra(a)["fragile"] is True and audit_extra(r)["fragile"] is False
    with pytest.raises(ValidationError, match="must hold the threshold"):
        claim({**below(16), "range": [0.6, 0.9]})
    with pytest.raises(ValidationError, match="belongs to a threshold"):
        claim({"quantity": "max_prob", "row": {"dim": 16}, "op": "≈", "value": 0.3,
               "range": [0.2, 0.4]})


def test_one_claim_one_verdict_across_runs() -> None:
    """The same claim of one document judged by three runs is one claim in the count: the
    runs within its setting decide; a run beyond it is shown beside, never deciding."""
    inside = judge(claim(below(16)), lookup, "d.txt", "iid")
    beyond = judge(claim(below(1024), beyond="aligned q and k"), lookup, "d.txt", "aligned")
    none = judge(claim(untested="no such run"), lookup, "d.txt", "elsewhere")
    assert not beyond.decides and inside.decides
    found = verdicts([beyond, none, inside])
    assert len(found) == 1
    v = found[0]
    assert v.status == "holds" and v.specs[0] == "iid"
    assert "decided by iid (holds)" in v.why and "aligned (fails, beyond its setting)" in v.why
    assert claim_coverage([beyond, none, inside]) == "1 holds, 0 partly, 0 fails, 0 untested"
    # two deciding runs that disagree: partly, and the reason says so
    other = judge(claim(below(1024)), lookup, "d.txt", "big")
    split = verdicts([inside, other])[0]
    assert split.status == "partly" and "disagree" in split.why
    # another document's claim in the same words is another claim
    elsewhere = judge(claim(below(16), document="004_460f19dac2f37f7f.txt"), lookup, "d.txt",
                      "x")
    assert len(verdicts([inside, elsewhere])) == 2


def test_a_claim_that_points_to_its_judge_is_untested_here_and_never_decides() -> None:
    pointer = Claim.model_validate({"where": "Summary", "claim": "stays below one half",
                                    "untested": "this example trains nothing",
                                    "judged_by": "train-scaled-vs-unscaled"})
    a = judge(pointer, lookup, "d.txt", "cost-arithmetic")
    assert a.status == "untested" and not a.decides
    assert a.reason == "this example trains nothing; judged by train-scaled-vs-unscaled"
    measured = judge(claim(below(16)), lookup, "d.txt", "train-scaled-vs-unscaled")
    [v] = verdicts([a, measured])
    assert v.status == "holds" and v.entries[0].spec_name == "train-scaled-vs-unscaled"


def test_what_a_claim_does_not_imply_is_shown_beside_it_and_not_counted() -> None:
    c = claim(below(16), beside=[below(1024)])  # the aside fails; the verdict is the tests'
    a = judge(c, lookup, "d.txt", "s")
    assert a.status == "holds"
    assert "[what the claim does not imply: max_prob (dim 1024) = 0.99 ± 0.001 < 0.5: no]" \
        in (a.measurement or "")
    with pytest.raises(ValidationError, match="beside: needs tests:"):
        Claim.model_validate({"where": "x", "claim": "y", "untested": "why",
                              "beside": [below(16)]})


def test_a_claim_cites_the_lines_of_its_document() -> None:
    a = judge(claim(below(16), lines=[477]), lookup, "001.txt", "s")
    assert a.source == "001.txt, Summary, line 477"
    b = judge(claim(below(16), lines=[710, 711]), lookup, "001.txt", "s")
    assert b.source.endswith(", lines 710, 711")
