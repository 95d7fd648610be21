"""A worked example's input: matrices that do not fit, arithmetic that would overflow or
vanish, and sizes too large to write. Each is refused before it runs, in one located line."""

from __future__ import annotations

from pathlib import Path

import pytest
from attack import Bad, check, spec

import sdpa_cli as api
from sdpa_cli import registry


def worked(part: str) -> dict[str, str | bytes]:
    return spec("study: worked-example\ntitle: t\nsource: s\nparts:\n  - name: p\n" + part)


CORPUS = [
    # --- matrices that do not fit -----------------------------------------------------------------
    Bad("matrix-widths-differ", ["worked-example", "s.yaml"], "gives keys of width 3 but "
        "queries have width 2", spec("study: worked-example\nparts:\n  - name: a\n"
                                     "    kind: attention\n    q: [[1, 2], [3, 4]]\n"
                                     "    k: [[1, 2, 3], [4, 5, 6]]\n"),
        "s.yaml:6:8: parts[0].k:"),
    Bad("matrix-ragged", ["worked-example", "s.yaml"], "every row of a matrix needs the same "
        "length", spec("study: worked-example\nparts:\n  - name: a\n"
                       "    kind: attention\n    scores: [[1, 2], [3]]\n"),
        "s.yaml:5:22: parts[0].scores[1]:"),
    Bad("weights-do-not-fit", ["worked-example", "s.yaml"], "embeddings · w_q needs them equal",
        spec("study: worked-example\nparts:\n  - name: a\n    kind: attention\n"
             "    embeddings: [[1, 2], [3, 4]]\n    w_q: [[1, 2, 3]]\n"
             "    w_k: [[1, 0], [0, 1]]\n"), "s.yaml:6:10: parts[0].w_q:"),
    Bad("no-parts", ["worked-example", "s.yaml"], "must not be empty",
        spec("study: worked-example\nparts: []\n"), "s.yaml:2:8: parts:"),
    # --- arithmetic that overflows: refused, located ----------------------------------------------
    Bad("worked-negative-huge", ["worked-example", "./s.yaml"], "values reach beyond",
        worked("    kind: variance\n    values: [-1e200, 1]\n"), "s.yaml:7:13:"),
    Bad("worked-values-1e308", ["worked-example", "./s.yaml"], "values reach beyond",
        worked("    kind: variance\n    values: [1e308, -1e308, 1e308]\n"),
        "s.yaml:7:13: parts[0].values:"),
    Bad("worked-divisor-tiny", ["worked-example", "./s.yaml"], "values ÷ divisor",
        worked("    kind: variance\n    values: [1, 2, 3]\n    divisor: 5e-324\n"),
        "s.yaml:8:14: parts[0].divisor:"),
    Bad("worked-q-1e308", ["worked-example", "./s.yaml"], "products of q and k",
        worked("    kind: attention\n    tokens: [a]\n    q: [[1e308, 1e308]]\n"
               "    k: [[1, 1]]\n"), "s.yaml:9:8: parts[0].k:"),
    Bad("worked-scale-tiny", ["worked-example", "./s.yaml"], "scores ÷",
        worked("    kind: attention\n    tokens: [a, b]\n    scores: [[1, 2], [3, 4]]\n"
               "    d_k: 2\n    scale: 5e-324\n"), "s.yaml:10:12: parts[0].scale:"),
    Bad("worked-scores-huge", ["worked-example", "./s.yaml"], "scores reach",
        worked("    kind: attention\n    tokens: [a, b]\n    scores: [[1e308, -1e308], [3, 4]]\n"
               "    d_k: 2\n"), "s.yaml:8:13: parts[0].scores:"),
    Bad("worked-embeddings", ["worked-example", "./s.yaml"], "products of embeddings and w_q",
        worked("    kind: attention\n    tokens: [a]\n    embeddings: [[1e100, 1]]\n"
               "    w_q: [[1e100], [1]]\n    w_k: [[1], [1]]\n"),
        "s.yaml:9:10: parts[0].w_q:"),
    Bad("worked-variances", ["worked-example", "./s.yaml"], "variances reach",
        worked("    kind: scaling-arithmetic\n    dims: [1]\n    variances: [1e300]\n"),
        "s.yaml:8:16: parts[0].variances:"),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 10
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=lambda b: b.id)
def test_a_bad_worked_example_is_one_located_line(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


@pytest.mark.parametrize("factors, says", [
    ("[1, 5e-324, 0.577]", "a factor of 4.94e-324 is below 1e-150"),
    ("[1, 1e150, 0.577]", "(factor)² × variance can reach 5.2e+301"),
    ("[1e150, 1, 1]", "(factor)² × variance can reach 5.2e+301"),
    ("[1, 1e100, 0.577]", "(factor)² × variance can reach 5.2e+201"),
])
def test_scaling_arithmetic_factors_that_overflow_or_vanish_are_refused(sdpa, workdir,
                                                                        factors, says):
    (workdir / "w.yaml").write_text(
        "study: worked-example\nparts:\n  - name: s\n    kind: scaling-arithmetic\n"
        f"    dims: [1, 2, 3]\n    variances: [16.33, 17.33, 52.33]\n    factors: {factors}\n",
        encoding="utf-8")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it ran, with RuntimeWarning: overflow
        got = sdpa("worked-example", "w.yaml", "--no-plots", "-q")
    assert got.code == 2 and got.err.startswith("w.yaml:7:14: parts[0].factors: "), got.err
    assert says in got.err


def test_the_worked_weights_figure_draws_a_bounded_number_of_parts():
    # 1500 attention parts drew one figure of 1500 panels: over a minute, gigapixels
    from sdpa_cli import registry
    from sdpa_cli.framework.context import RunContext
    from sdpa_cli.runner import loader as spec_mod
    from sdpa_cli.studies.worked_example import replay as worked

    parts = [{"name": f"p{i}", "kind": "attention", "tokens": ["a", "b"],
              "scores": [[1, 2], [3, 4]], "d_k": 2} for i in range(30)]
    s = spec_mod.load(None, study="worked-example",
                      overrides={"title": "t", "source": "s", "parts": parts})
    result = registry.get("worked-example").run(s, RunContext(figures=True))
    (fig,) = result.figures
    assert len(fig.data["parts"]) == worked.FIGURE_MAX_PARTS
    assert f"first {worked.FIGURE_MAX_PARTS} of the 30" in fig.caption


# --- cost estimates within the contract's factor --------------------------------------------------


def _attention_part(n: int, d: int) -> dict:
    emb = [[1.0 + (i * d + j) % 3 for j in range(d)] for i in range(n)]
    w = [[1.0 if i == j else 0.5 for j in range(d)] for i in range(d)]
    return {"name": "a", "kind": "attention", "tokens": [f"t{i}" for i in range(n)],
            "embeddings": emb, "w_q": w, "w_k": w, "w_v": w}


@pytest.mark.parametrize("n, d", [(21, 1), (18, 2), (16, 4), (8, 8), (3, 3)])
def test_a_worked_examples_estimate_counts_the_matrices_it_computes(n, d):
    """The estimate counted the numbers given: 64 tokens of width 1 wrote 16716 rows (5 MB)
    against 71 estimated, and 4096 tokens (within the 4096 entries a matrix may hold) would
    have written n² rows for each of its n × n steps."""
    from contract import COST_FACTOR

    from sdpa_cli.report import writers

    got = api.worked_example(parts=[_attention_part(n, d)])
    cost = registry.get("worked-example").cost(got.spec)
    rows = len(got.rows)
    written = len(writers.results_json(got._result)) + len(writers.table_csv(got._result))
    assert rows <= cost.rows * COST_FACTOR and cost.rows <= rows * COST_FACTOR
    assert written <= cost.output * COST_FACTOR


@pytest.mark.parametrize("n", [64, 128, 4096])
def test_a_worked_example_too_large_to_write_is_refused_before_it_runs(n):
    with pytest.raises(api.SpecError) as e:
        api.worked_example(parts=[_attention_part(n, 1)])
    assert e.value.lines()[0].startswith("parts: would make a table of ")
    assert "give fewer tokens" in e.value.lines()[0]
