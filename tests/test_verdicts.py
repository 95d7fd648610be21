"""The shipped specs' claims say exactly what they measure: every threshold states
its fair range, every untested claim's reason is current and its pointer real, and a claim
judged by several runs has one verdict."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import EXPERIMENTS

from sdpa_cli.framework.claims import claim_key, verdicts
from sdpa_cli.framework.result import audit_from_json
from sdpa_cli.runner import loader
from sdpa_cli.spec.common import Claim

SPECS = sorted(EXPERIMENTS.rglob("*.yaml"))
NAMES = {p.stem for p in SPECS}


def _claims() -> list[tuple[Path, Claim]]:
    out = []
    for path in SPECS:
        spec = loader.load(path)
        out += [(path, c) for c in spec.claims]
    return out


CLAIMS = _claims()


def _key(path: Path, claim: Claim) -> tuple[str, str]:
    spec = loader.load(path)
    document = claim.document or spec.document
    words = " ".join(claim.claim.split()).strip('"').rstrip(".").lower()
    return document, words


def test_the_shipped_specs_judge_claims() -> None:
    assert len(CLAIMS) > 40
    assert sum(bool(c.premise) for _, c in CLAIMS) >= 4


@pytest.mark.parametrize("path,claim", [pytest.param(p, c, id=f"{p.stem}:{c.claim[:30]}")
                                        for p, c in CLAIMS if c.tests])
def test_every_threshold_states_its_fair_range(path: Path, claim: Claim) -> None:
    """A verdict that rests on a threshold (< or > a number, or a multiple of another
    quantity) says over which thresholds it was checked, so a flip inside reads fragile."""
    for test in claim.tests:
        threshold = test.op != "≈" and (test.value is not None or (
            test.than is not None and test.than.times != 1.0))
        if threshold:
            assert test.range is not None, f"{path.name}: {claim.claim}: {test.quantity}"


STALE = re.compile(r"merged|while this audit was written|no claim test is written|not yet",
                   re.IGNORECASE)


@pytest.mark.parametrize("path,claim", [pytest.param(p, c, id=f"{p.stem}:{c.claim[:30]}")
                                        for p, c in CLAIMS if c.untested])
def test_untested_reasons_are_current_and_their_pointers_real(path: Path,
                                                              claim: Claim) -> None:
    """No reason describes the code base as it was while it was written; a reason that names
    the shipped spec that judges the claim points to a spec that tests the same claim (the
    same document and words), so the batch counts it there."""
    reason = claim.untested or ""
    assert not STALE.search(reason), reason
    named = [n for n in NAMES if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", reason)]
    for name in named:
        twins = [c for p, c in CLAIMS if p.stem == name and c.tests
                 and _key(p, c) == _key(path, claim)]
        assert twins, f"{path.name}: '{claim.claim}' points to {name}, which does not test it"


def test_a_claim_judged_twice_has_a_decider_or_one_word() -> None:
    """Where several shipped specs test the same claim, either exactly the ones within its
    setting decide (the others say `beyond:`), or they are meant to agree; the batch test
    below checks that they do."""
    groups: dict[tuple[str, str], list[tuple[Path, Claim]]] = {}
    for path, claim in CLAIMS:
        if claim.tests:
            groups.setdefault(_key(path, claim), []).append((path, claim))
    shared = {k: v for k, v in groups.items() if len(v) > 1}
    assert shared, "rules-field-vs-dim and rules-field-aligned judge the same three claims"
    for key, entries in shared.items():
        deciding = [p for p, c in entries if not c.beyond and not loader.load(p).beyond]
        assert deciding, f"{key}: every run is beyond the claim's setting"


def _batch() -> Path | None:
    folder = os.environ.get("SDPA_CHECK_BATCH")
    return Path(folder) if folder and Path(folder).is_dir() else None


@pytest.mark.slow
@pytest.mark.skipif(_batch() is None, reason="SDPA_CHECK_BATCH names no batch folder "
                    "(.ci/run sets it)")
def test_the_batch_gives_each_claim_one_verdict() -> None:
    """In the default batch no claim's deciding runs disagree, and the verdicts this issue
    changed read as their measurements say."""
    root = _batch()
    assert root is not None
    audit = [audit_from_json(a) for f in sorted(root.glob("*/results.json"))
             for a in json.loads(f.read_text()).get("audit", []) if a.get("kind") == "claim"]
    found = {(v.document, v.claim): v for v in verdicts(audit)}
    assert not [v for v in found.values() if "disagree" in v.why]
    keys = {claim_key(v.entries[0]): v for v in found.values()}

    def verdict(document: str, words: str) -> str:
        return keys[(document, words)].status

    d1, d2, d4 = ("001_409455fed8d25d77.txt", "002_085cb841918d11c0.txt",
                  "004_460f19dac2f37f7f.txt")
    assert verdict(d1, "saturated attention in early layers creates severe gradient "
                   "bottlenecks in deep transformers") == "fails"
    assert verdict(d1, "saturated attention blocks gradient flow through the layers of a "
                   "transformer") == "fails"
    assert verdict(d1, "cosine scores are bounded and make attention independent of the "
                   "dimension") == "fails"
    assert verdict(d1, "training becomes unstable for large d_k") == "partly"
    assert verdict(d2, "scaling prevents softmax saturation and keeps gradients healthy") \
        == "holds"
    assert verdict(d4, "with the gain knob (÷√d_k) the engineer (softmax) attends to all "
                   "sounds equally") == "fails"


def _head(raw: float, low: float, mid: float, high: float, pooled: float | None = None) -> dict:
    return {"score_std_within_raw": raw, "score_std_raw": raw if pooled is None else pooled,
            "frozen_share_low": low, "frozen_share": mid, "frozen_share_high": high,
            "layer": 0, "head": 0}


def test_inspect_judges_8_to_11_at_the_models_own_d_k() -> None:
    """The documents' 8–11 is √64…√128: a d_k = 32 model is set beside √32, never judged
    against 8–11 (MiniLM's median 9.3 used to 'hold' it); a d_k = 64 model judges it."""
    from sdpa_cli.studies.inspect.findings import _documented_std

    heads = [_head(9.3, 0, 0, 0), _head(9.0, 0, 0, 0), _head(12.0, 0, 0, 0)]
    at32 = _documented_std(heads, 128, 32)
    assert "not judged here" in at32 and "√32 = 5.66" in at32 and "1.64×" in at32
    assert "holds" not in at32
    at64 = _documented_std(heads, 128, 64)
    assert "the documents' 8–11 (for d_k 64–128, as here) holds for the median head" in at64
    assert "2 of 3 heads fall in it" in at64
    # judged within rows, where the softmax looks: row offsets inflate the pooled spread
    offset = [_head(9.3, 0, 0, 0, 20.0), _head(9.0, 0, 0, 0, 25.0), _head(12.0, 0, 0, 0, 30.0)]
    both = _documented_std(offset, 128, 64)
    assert "holds for the median head within rows (pooled: does not)" in both
    assert "2 of 3 heads fall in it within rows (layer 0 head 0, layer 0 head 0), 0 pooled" \
        in both


def test_inspect_saturation_states_its_bar_range_and_fragility() -> None:
    """The median head freezes 38% at ‖J‖_F < 1e-3 but 51% at 1e-2: whether it counts as
    saturated flips inside the fair range, and the sentence says so."""
    from sdpa_cli.studies.inspect.findings import _fragile, _median_frozen, _saturated

    none = [_head(9, 0.24, 0.38, 0.51), _head(9, 0.30, 0.40, 0.55), _head(9, 0.1, 0.2, 0.3)]
    assert _saturated(none) == "0 (0–2)"
    assert _median_frozen(none) == "38% (24%–51%)"
    assert "fragile" in _fragile([], none) and "no scaling" in _fragile([], none)
    steady = [_head(9, 0.9, 0.95, 0.99)] * 3
    assert _saturated(steady) == "3" and _fragile(steady, steady) == ""
