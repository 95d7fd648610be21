"""The depth study: its rows' contract, common random numbers, the summaries, guards, bad input,
and (slow) the issue's 12-block torch check reproduced within its standard errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sdpa_cli.runner import loader as spec_io
from sdpa_cli.studies.depth import run as depth
from sdpa_cli.studies.depth.rows import FIELDS
from sdpa_cli.studies.depth.spec import DepthSpec

CONTRACT = ("dim", "scaling", "norm", "mlp", "layers", "layer",
            "grad_wq_mean", "grad_wq_se", "grad_wq_median",
            "grad_wk_mean", "grad_wk_se", "grad_wk_median",
            "grad_wv_mean", "grad_wv_se", "grad_wv_median",
            "frozen_share", "frozen_share_se", "softmax_pass", "softmax_pass_se",
            "softmax_pass_median", "softmax_pass_lo", "softmax_pass_hi",
            "token_cosine", "token_cosine_se")
EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments" / "depth"


def _small(**kw: object) -> DepthSpec:
    base: dict[str, object] = {"layers": [2, 3], "dims": [4, 8], "scalings": ["none", "sqrt"],
                               "d_model": 8, "keys": 5, "trials": 6, "seed": 3}
    return DepthSpec(**{**base, **kw})


def test_rows_follow_the_contract_one_per_block() -> None:
    s = _small(mlp=True, causal=True)
    result = depth.run(s)
    assert FIELDS == CONTRACT
    assert tuple(result.rows[0]) == CONTRACT
    # dims × rules × norms × Σ L
    assert len(result.rows) == 2 * 2 * 2 * (2 + 3)
    assert {(r["layers"], r["layer"]) for r in result.rows} == {
        (2, 0), (2, 1), (3, 0), (3, 1), (3, 2)}
    assert all(c.passed for c in result.checks), result.checks
    assert len(result.tables[0].rows) == 2 * 2 * 2 * 2  # one summary per stack
    assert [f.kind for f in result.figures] == ["depth.grad_wq", "depth.cosine", "depth.frozen"]


def test_common_random_numbers_across_depths() -> None:
    """A stack of 2 blocks is the first 2 blocks of the stack of 3 (same draws): the same
    forward, so the same token cosines and frozen shares; the gradients differ (one block
    more above them)."""
    rows = depth.run(_small()).rows
    for r2 in (r for r in rows if r["layers"] == 2):
        r3 = next(r for r in rows if r["layers"] == 3 and all(
            r[k] == r2[k] for k in ("dim", "scaling", "norm", "layer")))
        assert r3["token_cosine"] == r2["token_cosine"]
        assert r3["frozen_share"] == r2["frozen_share"]
        assert r3["grad_wq_mean"] != r2["grad_wq_mean"]


def test_the_run_does_not_depend_on_the_threads() -> None:
    from sdpa_cli.framework.context import RunContext

    s = _small()
    assert depth.run(s).rows == depth.run(s, RunContext(workers=3)).rows


def test_ratio_of_means_se_matches_its_spread_over_replications() -> None:
    """The delta-method se of mean(a)/mean(b) (paired, correlated) against the standard
    deviation of the ratio over R independent replications; the sd of R draws is itself
    uncertain by a share 1/√(2(R − 1)), and the tolerance is 4 of those."""
    rng = np.random.default_rng(12)
    R, n = 400, 200
    ratios, ses = [], []
    for _ in range(R):
        z = rng.standard_normal((2, n))
        a = np.exp(0.5 * z[0])
        b = np.exp(0.5 * (0.6 * z[0] + 0.8 * z[1])) + 1.0
        r, se = depth.ratio_of_means(a, b)
        ratios.append(r)
        ses.append(se)
    spread = float(np.std(ratios, ddof=1))
    rel = 1.0 / math.sqrt(2 * (R - 1))
    assert abs(float(np.mean(ses)) / spread - 1.0) <= 4 * rel


def test_collapse_depth_counts_blocks_from_one() -> None:
    from sdpa_cli.numerics.depth_trials import BlockValues

    cos = np.array([[0.1, 0.2], [0.95, 0.87], [0.99, 0.99]])  # block means 0.15, 0.91, 0.99
    ones = np.ones((3, 2))
    v = BlockValues(wq=np.array([[2.0, 4.0], [1.0, 1.0], [0.5, 1.5]]), wk=ones, wv=ones,
                    frozen=np.zeros((3, 2)), cosine=cos)
    row = depth.stack_row((4, "sqrt", "post"), 3, v)
    assert row.collapse_depth == 2
    assert row.wq_ratio == pytest.approx(1.0 / 3.0, rel=1e-15)
    assert row.median_ratio == pytest.approx(1.0 / 3.0, rel=1e-15)


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_specs_load(path: Path) -> None:
    s = spec_io.load(path)
    assert s.study == "depth" and max(s.layers) <= 12 and s.d_model == 64
    assert set(s.dims) == {16, 256}
    assert {r.label for r in s.scalings} == {"none", "sqrt", "linear"}


BAD = [
    (["--layers", "257"], "layers[0]: 257 blocks is above the limit 256"),
    (["--layers", "4", "300"], "layers[1]: 300 blocks is above the limit 256"),
    (["--layers", "0"], "layers[0]"),
    (["--norms", "mid"], "norms[0]"),
    (["--dims", "16", "16"], "dims[1]: 16 is listed twice"),
    (["--norms", "pre", "pre"], "norms[1]"),
    (["--trials", "1"], "trials"),
    (["--mlp", "maybe"], "mlp"),
    (["--scalings", "power:1e300"], "scalings"),
    (["--trials", "1000000", "--layers", "256", "--d-model", "1024"], "layers"),
    (["--layers", "200", "256", "--dims", "16", "32", "64"], "would make a table of"),
]


@pytest.mark.parametrize(("args", "says"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2_nothing_written(sdpa, workdir: Path, args: list[str],
                                                      says: str) -> None:
    r = sdpa("depth", *args, "--seed", "1")
    lines = r.err.strip().splitlines()
    assert r.code == 2, r.err
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    assert says in lines[0], lines[0]
    assert not (workdir / "outputs").exists()


def test_bad_spec_file_names_file_line_and_field(sdpa, workdir: Path) -> None:
    (workdir / "d.yaml").write_text("study: depth\nlayers: [4, 512]\n", encoding="utf-8")
    r = sdpa("depth", "d.yaml")
    assert r.code == 2
    assert r.err.strip().startswith("d.yaml:2:"), r.err
    assert "layers[1]" in r.err and "256" in r.err


# The issue's 12-block torch check (d_model 64, n 16, 20 trials; its figures match the MLP
# stack): each figure it prints, as (d_k, rule, norm, block, field, value).
ISSUE = [
    (16, "sqrt", "post", 11, "token_cosine", 0.995),
    (256, "sqrt", "post", 11, "token_cosine", 0.998),
    (16, "sqrt", "post", 0, "grad_wq_median", 34.0),
    (16, "sqrt", "post", 11, "grad_wq_median", 0.17),
    (256, "none", "post", 0, "frozen_share", 0.43),
    (256, "none", "post", 0, "grad_wq_median", 1.7e4),
    (256, "sqrt", "post", 0, "grad_wq_median", 41.0),
    (256, "none", "post", 11, "token_cosine", 0.973),
]
# Measured disagreements, kept as such (the depth page gives the numbers): the issue's Post-LN
# token cosine 0.995 after block 11 at d_k = 16, ÷√d_k, is 8 se below ours (0.998, the same
# as at d_k = 256, where the issue's 0.998 agrees).
DIFFERENT: list[tuple] = [(16, "sqrt", "post", 11, "token_cosine", 0.995)]


def issue_z(rows: list, item: tuple) -> tuple[dict, float]:
    """Our row for an issue figure, and the figure's distance from our value in standard
    errors of a 20-trial figure (the issue's) minus our 200-trial one. Medians have no se of
    their own: they are compared on a log scale, with the se of a median of a near-normal
    log, 1.25·sd(log)/√n, and sd(log) from our mean and se (lognormal)."""
    d, rule, nm, layer, field, want = item
    row = next(r for r in rows if (r["dim"], r["scaling"], r["norm"], r["layer"]) ==
               (d, rule, nm, layer))
    spread = math.sqrt(1 / 20 + 1 / 200)
    if field == "grad_wq_median":
        cv = row["grad_wq_se"] * math.sqrt(200) / row["grad_wq_mean"]
        sd_log = math.sqrt(math.log1p(cv * cv))
        return row, (math.log(want) - math.log(row[field])) / (1.25 * sd_log * spread)
    sd = row[f"{field}_se"] * math.sqrt(200)
    return row, (want - row[field]) / (sd * spread)


@pytest.mark.slow
@pytest.mark.xdist_group("depth-200")  # one run with the depth page's (tests/test_docs.py)
def test_the_issues_torch_check_within_its_standard_errors() -> None:
    """With 200 trials (our se small), each issue figure within 4 se of ours, except the
    ones listed in DIFFERENT, which must still differ (the note gives their z)."""
    import docgen  # the docs' run cache: the same run as `sdpa help depth`'s table

    rows = docgen.run("experiments/depth/post-vs-pre.yaml", trials=200).rows
    for item in ISSUE:
        row, z = issue_z(rows, item)
        if item in DIFFERENT:
            assert abs(z) > 4, (item, row[item[4]], z)
        else:
            assert abs(z) <= 4, (item, row[item[4]], z)
    pre = [r for r in rows if r["norm"] == "pre" and r["layer"] == 11]
    assert all(0.3 <= r["token_cosine"] <= 0.8 for r in pre)  # the issue: 0.36–0.74


@pytest.mark.parametrize("kw", [{"init_std": 1000.0, "causal": True}, {"d_model": 1, "dims": [1]}],
                         ids=["saturated", "d_model-1"])
def test_degenerate_stacks_give_null_ratios_not_errors(kw: dict) -> None:
    """Every row frozen (σ_w = 1000) or every row 0 after LN (d_model 1): block 0 passes no
    gradient to W_Q, so last/first is null, and the identical-token checks still pass."""
    result = depth.run(_small(**{"layers": [3], "trials": 3, **kw}))
    assert all(c.passed for c in result.checks), [c for c in result.checks if not c.passed]
    if "d_model" in kw:
        assert all(s["wq_ratio"] is None for s in result.tables[0].rows)


def test_median_interval_covers_a_heavy_tailed_median() -> None:
    from sdpa_cli.numerics.bootstrap import median_interval

    # log-normal with σ = 2 (its mean e² ≈ 7.4 sits far from its median 1): 20 draws, as a
    # depth spec's trials; over 200 repeats the 95% interval holds the median 1 in ≥ 0.88
    # of them (0.95 less 4 binomial standard errors, √(0.95·0.05/200) = 0.015)
    rng = np.random.default_rng(11)
    hits = 0
    for i in range(200):
        x = np.exp(2.0 * rng.standard_normal(20))
        m, lo, hi = median_interval(x, i)
        assert lo <= m <= hi
        hits += lo <= 1.0 <= hi
    assert hits / 200 >= 0.88
    assert median_interval(np.array([np.nan, 2.0, 4.0]), 0)[0] == 3.0


def test_stack_and_block_rows_carry_medians_with_their_intervals() -> None:
    result = depth.run(_small())
    for r in result.tables[0].rows:
        assert r["wv_ratio_lo"] <= r["wv_ratio_median"] <= r["wv_ratio_hi"]
    for r in result.rows:
        assert r["softmax_pass_lo"] <= r["softmax_pass_median"] <= r["softmax_pass_hi"]
    # a saturating first block: the gradient reaching it, as a median with its interval
    sat = depth.run(_small(dims=[4, 64], d_model=64, keys=16, trials=8, layers=[2]))
    said = [f for f in sat.findings if "arriving at the block (‖∂L/∂W_V‖)" in f]
    assert len(said) == 2
    assert all("median of the 8 paired trials' ratios, 95% interval" in f for f in said)
