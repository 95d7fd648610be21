"""Claims as audit entries (issue 28): holds / partly / fails / untested, with the measurement,
its uncertainty and the spec, and the coverage line; a spec's claims: are validated."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from sdpa_cli.framework.causes import claim_coverage
from sdpa_cli.framework.claims import judge
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
    entries = [judge(claim(below(16)), lookup, "d.txt", "spec-a"),
               judge(claim(below(16), below(1024)), lookup, "d.txt", "spec-a"),
               judge(claim(untested="why"), lookup, "d.txt", "spec-a")]
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
