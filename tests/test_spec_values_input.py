"""A spec's values, from its file or its flags: ranges, finite numbers, scaling rules,
documented numbers and initial weights. Each bad one is exit 2, one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from attack import Bad, check, spec

DIGITS = "9" * 5000  # beyond Python's limit on parsing digits
G = "study: gradients\ndims: [4]\ntrials: 4\nseed: 1\n"


def printed(value: str) -> str:
    """A worked example whose one documented number is written as `value`."""
    return ("study: worked-example\ntitle: t\nsource: s\nparts:\n"
            "  - {name: p, kind: variance, values: [1, 2]}\ndocumented:\n"
            f"  - {{where: x, quantity: variance.values, value: {value}}}\n")


CORPUS = [
    # --- ranges -----------------------------------------------------------------------------------
    Bad("dims-not-a-list", ["variance", "s.yaml"], "must be a list",
        spec("study: variance\ndims: many\n"), "s.yaml:2:7: dims:"),
    Bad("dims-empty", ["variance", "s.yaml"], "must not be empty",
        spec("study: variance\ndims: []\n"), "s.yaml:2:7: dims:"),
    Bad("dim-zero", ["variance", "s.yaml"], "must be ≥ 1, got 0",
        spec("study: variance\ndims: [3, 0]\n"), "s.yaml:2:11: dims[1]:"),
    Bad("dim-negative", ["variance", "s.yaml"], "must be ≥ 1, got -100",
        spec("study: variance\ndims: [-100]\n"), "s.yaml:2:8: dims[0]:"),
    Bad("dim-fraction", ["variance", "s.yaml"], "must be a whole number, got 2.5",
        spec("study: variance\ndims: [2.5]\n"), "s.yaml:2:8: dims[0]:"),
    Bad("pairs-below-2", ["variance", "s.yaml"], "must be ≥ 2, got 1",
        spec("study: variance\npairs: 1\n"), "s.yaml:2:8: pairs:"),
    Bad("pairs-bool", ["variance", "s.yaml"], "must be a whole number, got true",
        spec("study: variance\npairs: yes-please\n".replace("yes-please", "true")),
        "s.yaml:2:8: pairs:"),
    Bad("bins-zero", ["variance", "s.yaml"], "must be ≥ 1, got 0",
        spec("study: variance\nbins: 0\n"), "s.yaml:2:7: bins:"),
    Bad("std-zero", ["variance", "s.yaml"], "must be > 0, got 0",
        spec("study: variance\nstd: 0\n"), "s.yaml:2:6: std:"),
    Bad("std-negative", ["variance", "s.yaml"], "must be > 0, got -1.5",
        spec("study: variance\nstd: -1.5\n"), "s.yaml:2:6: std:"),
    Bad("std-infinite", ["variance", "s.yaml"], "must be a finite number, got inf",
        spec("study: variance\nstd: .inf\n"), "s.yaml:2:6: std:"),
    Bad("mean-nan", ["variance", "s.yaml"], "must be a finite number, got nan",
        spec("study: variance\nmean: .nan\n"), "s.yaml:2:7: mean:"),
    Bad("correlation-above-1", ["variance", "s.yaml"], "must be ≤ 1, got 1.5",
        spec("study: variance\ncorrelation: 1.5\n"), "s.yaml:2:14: correlation:"),
    Bad("seed-negative", ["variance", "s.yaml"], "must be ≥ 0, got -1",
        spec("study: variance\nseed: -1\n"), "s.yaml:2:7: seed:"),
    Bad("sphere-with-mean", ["variance", "s.yaml"], "unit vectors (distribution: sphere) have no "
        "mean", spec("study: variance\ndistribution: sphere\nmean: 1\n"),
        "s.yaml:3:7: mean:"),
    Bad("exact-needs-gaussian", ["variance", "s.yaml"], "the exact method exists for normal and "
        "sphere", spec("study: variance\ndistribution: uniform\nmethod: exact\n"),
        "s.yaml:3:9: method:"),
    Bad("heads-not-dividing", ["variance", "s.yaml"], "d_model 512 is not divisible by 7 heads",
        spec("study: variance\nd_model: 512\nheads: 7\n"), "s.yaml:3:8: heads:"),
    Bad("d-model-alone", ["variance", "s.yaml"], "d_model and heads go together",
        spec("study: variance\nd_model: 512\n"), "s.yaml:"),
    # --- numbers float64 cannot hold, or would lose -----------------------------------------------
    Bad("int-beyond-float-pairs", ["variance", "s.yaml"], "pairs",
        spec(f"study: variance\npairs: {'1' + '0' * 400}\n"), "s.yaml:2:8: pairs:"),
    Bad("int-beyond-float-mean", ["variance", "s.yaml"], "mean",
        spec(f"study: variance\nmean: -{'1' + '0' * 400}\n"), "s.yaml:2:7: mean:"),
    Bad("int-5000-digits", ["variance", "s.yaml"], "seed",
        spec(f"study: variance\nseed: {DIGITS}\n"), "s.yaml:2:7: seed:"),
    Bad("int-beyond-float-scores", ["softmax-sweep", "s.yaml"], "scores[1]",
        spec(f"study: softmax-sweep\nscores: [1, {'1' + '0' * 400}]\n"), "s.yaml:2:"),
    Bad("mean-beyond-float64", ["variance", "--mean", "1e200"], "|mean| may be at most 1e+150 "
        "× std", {}, "--mean: mean:"),
    Bad("std-beyond-float64", ["softmax-sweep", "--dims", "16", "--std", "1e200"],
        "must be ≤ 1e+150", {}, "--std: std:"),
    Bad("scores-lose-their-spread", ["softmax-sweep", "--dims", "16", "--mean", "1e100"],
        "|mean| may be at most 1e+06 × std", {}, "--mean: mean:"),
    # --- scaling rules and scales -----------------------------------------------------------------
    Bad("scaling-unknown", ["variance", "s.yaml"], "unknown scaling 'sqroot'",
        spec("study: variance\nscalings: [sqroot]\n"), "s.yaml:2:12: scalings[0]:"),
    Bad("scaling-temperature-zero", ["variance", "s.yaml"], "temperature:T needs a number > 0",
        spec("study: variance\nscalings: ['temperature:0']\n"),
        "s.yaml:2:12: scalings[0]:"),
    Bad("scaling-twice", ["variance", "s.yaml"], "'sqrt' is listed twice",
        spec("study: variance\nscalings: [sqrt, sqrt]\n"),
        "s.yaml:2:18: scalings[1]:"),
    Bad("power-vanishes-gradients", ["gradients", "--dims", "4", "--scalings", "power:1e300"],
        "multiplies the scores by 0", {}, "--scalings: scalings[0]:"),
    Bad("power-overflows-train", ["train", "--dims", "2", "--scalings", "power:-1e300"],
        "multiplies the scores by inf", {}, "--scalings: scalings[0]:"),
    Bad("power-vanishes-softmax", ["softmax-sweep", "--dims", "4", "--scalings", "power:1e300"],
        "multiplies by 0", {}, "--scalings: scalings[0]:"),
    Bad("power-overflows-jacobian-file", ["jacobian", "s.yaml"], "multiplies by inf",
        spec("study: jacobian\ndims: [4]\nscalings: [none, 'power:-1e300']\n"),
        "s.yaml:3:"),
    Bad("logn-overflows-gradients", ["gradients", "--dims", "4", "--scalings", "logn:1e308"],
        "outside [1e-300, 1e+300]", {}, "--scalings: scalings[0]:"),
    Bad("scale-1e308", ["softmax-sweep", "--scores", "1", "0.5", "0", "-0.5", "--scales",
                        "1e308"], "scale 1e+308 is outside [1e-300, 1e+300]", {},
        "--scales: scales[0]:"),
    Bad("scale-subnormal", ["jacobian", "--scores", "1", "0", "--scales", "1", "1e-310"],
        "is outside [1e-300, 1e+300]", {}, "--scales: scales[1]:"),
    Bad("scale-rule-temperature", ["softmax-sweep", "--scores", "1", "0", "--dim", "4",
                                   "--scalings", "temperature:1e-320"],
        "is outside [1e-300, 1e+300]", {}, "--scalings: scalings[0]:"),
    Bad("scale-in-file", ["softmax-sweep", "s.yaml"], "is outside",
        spec("study: softmax-sweep\nscores: [1, 0]\nscales: [1, 5e-324]\n"),
        "s.yaml:3:13: scales[1]:"),
    # --- documented numbers -----------------------------------------------------------------------
    Bad("documented-unknown-quantity", ["variance", "s.yaml"], "no quantity 'varaince'",
        spec("study: variance\ndims: [3]\ndocumented:\n  - {where: x, row: {dim: 3, "
             "scaling: none}, quantity: varaince, value: 3}\n"), "s.yaml: documented[0]:"),
    Bad("documented-no-row", ["variance", "s.yaml"], "no row has dim: 64",
        spec("study: variance\ndims: [3]\ndocumented:\n  - {where: x, row: {dim: 64},"
             " quantity: variance, value: 64}\n"), "s.yaml: documented[0]:"),
    Bad("documented-unreadable", ["variance", "s.yaml"], "cannot read '1.2.3' as a printed "
        "number", spec("study: variance\ndocumented:\n  - {where: x, quantity: mean,"
                       " value: 1.2.3}\n"), "s.yaml:3:39: documented[0].value:"),
    Bad("int-beyond-float-documented", ["variance", "s.yaml"], "documented[0].value",
        spec("study: variance\ndims: [3]\ndocumented:\n  - {where: x, quantity: variance, "
             f"value: {'1' + '0' * 400}}}\n"), "s.yaml:4:"),
    Bad("documented-5000-digits", ["variance", "s.yaml"], "beyond float64's range",
        spec("study: variance\ndims: [3]\ndocumented:\n  - {where: x, quantity: variance, "
             f"value: {DIGITS}}}\n"), "s.yaml:4:"),
    Bad("printed-1e400", ["worked-example", "s.yaml"], "is beyond float64's range",
        spec(printed('"1e400"')), "s.yaml:7:50: documented[0].value:"),
    Bad("printed-times-ten-400", ["worked-example", "s.yaml"], "is beyond float64's range",
        spec(printed('"1 × 10^400"')), "s.yaml:7:50: documented[0].value:"),
    Bad("printed-exponent-5000-digits", ["worked-example", "s.yaml"],
        "an exponent of 5000 digits", spec(printed(f'"1e{DIGITS}"')), "s.yaml:7:50:"),
    Bad("printed-underflow", ["worked-example", "s.yaml"], "it would be read as 0",
        spec(printed('"≈ 0.5e-400"')), "s.yaml:7:50:"),
    Bad("printed-variance-documented", ["variance", "s.yaml"], "is beyond float64's range",
        spec('study: variance\ndims: [3]\ndocumented:\n  - {where: x, quantity: variance, '
             'row: {dim: 3, scaling: none}, value: "2e308"}\n'), "s.yaml:4:"),
    # --- initial weights float64 rounds to zero (variance reports a tiny std as null, with a
    # note: tests/test_extremes.py; gradients turned init_std 1e-300 into zeros that passed)
    Bad("init-std-underflows", ["gradients", "s.yaml"], "give init_std ≥ 1e-35",
        {"s.yaml": G + "init_std: 1e-300\n"}, "s.yaml:5:11: init_std:"),
    Bad("init-std-just-below", ["gradients", "s.yaml"], "below 1e-35",
        {"s.yaml": G + "init_std: 9.9e-36\n"}, "s.yaml:5:11: init_std:"),
    Bad("init-std-1e-36", ["gradients", "s.yaml"], "init_std 1e-36 is below",
        {"s.yaml": G + "init_std: 1e-36\n"}, "s.yaml:5:11: init_std:"),
    Bad("init-std-subnormal", ["gradients", "s.yaml"], "which float64 rounds to 0",
        {"s.yaml": G + "init_std: 5e-324\n"}, "s.yaml:5:11: init_std:"),
    Bad("init-std-capital-e", ["gradients", "s.yaml"], "below 1e-35",
        {"s.yaml": G + "init_std: 1.0E-40\n"}, "s.yaml:5:11: init_std:"),
    Bad("init-std-flag", ["gradients", "--init-std", "1e-50", "--dims", "4"],
        "spread like init_std⁸", where="--init-std: init_std:"),
    Bad("init-std-flag-over-file", ["gradients", "s.yaml", "--init-std", "1e-40"], "below 1e-35",
        {"s.yaml": G + "init_std: 1\n"}, "--init-std: init_std:"),
    Bad("init-std-in-batch", ["run", "s.yaml"], "checks that pass on zeros",
        {"s.yaml": G + "init_std: 1e-100\n"}, "s.yaml:5:11: init_std:"),
    Bad("init-std-in-validate", ["validate", "s.yaml"], "give init_std ≥ 1e-35",
        {"s.yaml": G + "init_std: 1e-100\n"}, "s.yaml:5:11: init_std:"),
    Bad("init-std-causal-aligned", ["gradients", "s.yaml"], "below 1e-35",
        {"s.yaml": G + "init_std: 1e-38\ncausal: true\nalignment: 1\n"}, "s.yaml:5:11: init_std:"),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 50
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=lambda b: b.id)
def test_a_bad_value_is_one_line_naming_its_field(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


@pytest.mark.parametrize("init_std", ["1e-160", "1e-300", "5e-324"])
def test_depth_refuses_a_weight_scale_float64_rounds_to_zero_as_gradients_does(sdpa, workdir,
                                                                              init_std):
    """depth's gradients were exactly 0 from init_std 1e-160, and 1e-300 with a normalising
    rule ended in `internal error: ValueError`."""
    for study in ("depth", "gradients"):
        got = sdpa(study, "--init-std", init_std, "--no-plots", "-q", "--no-write")
        assert got.code == 2, got.err
        assert got.err.startswith("--init-std: init_std: init_std ") and \
            "is below 1e-35" in got.err and "give init_std ≥ 1e-35" in got.err
