"""The depth study's run: trials in seeded blocks, rows per block, summaries per stack."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sdpa_cli.framework.audit import Lookup, find_rows, pick, selector_problem, split_quantity
from sdpa_cli.framework.common import assemble
from sdpa_cli.framework.common import canonical as _canonical
from sdpa_cli.framework.common import finite as _finite
from sdpa_cli.framework.context import SERIAL, RunContext
from sdpa_cli.framework.gradrows import WeightGrads
from sdpa_cli.framework.result import Check, Column, Figure, Result, Table, as_row
from sdpa_cli.numerics.blocks import fold_blocks
from sdpa_cli.numerics.bootstrap import median_interval
from sdpa_cli.numerics.depth_trials import BlockValues, draw, stack_values
from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.depth import findings
from sdpa_cli.studies.depth.rows import FIELDS, STACK_FIELDS, DepthRow, StackRow
from sdpa_cli.studies.depth.spec import DepthSpec

COLLAPSED = 0.9  # token cosine at which a stack counts as collapsed (the threshold)
# The main table goes to the terminal only up to this many rows (one per block); the
# per-stack summary always does, and the files hold every row.
TERMINAL_ROWS = 40
Key = tuple[int, str, str]  # (d_k, rule label, norm)

COLUMNS = (
    *Column.rule_keys(),
    Column("norm", "norm", "text", priority=0),
    Column("layers", "L", "int", priority=1),
    Column("layer", "block", "int", priority=0),
    Column("grad_wq_median", "‖∂W_Q‖ median", priority=0),
    Column("grad_wq_mean", "‖∂W_Q‖ mean", priority=1),
    Column("grad_wq_se", "se", "e", priority=3),
    Column("grad_wv_mean", "‖∂W_V‖ mean", priority=2),
    Column("frozen_share", "frozen", "pct", priority=0),
    Column("softmax_pass", "passes softmax", priority=1),
    Column("token_cosine", "token cos", "f3", priority=0),
)
STACK_COLUMNS = (
    *Column.rule_keys(),
    Column("norm", "norm", "text", priority=0),
    Column("layers", "L", "int", priority=0),
    Column("wq_ratio", "‖∂W_Q‖ last/first", priority=0),
    Column("wq_ratio_se", "se", priority=1),
    Column("wv_ratio", "‖∂W_V‖ last/first", priority=1),
    Column("first_frozen", "frozen (block 0)", priority=1),
    Column("last_cosine", "token cos (last)", "f3", priority=0),
    Column("collapse_depth", "cos ≥ 0.9 at", "int", priority=2),
)


def plan_rows(spec: DepthSpec) -> list[dict[str, Any]]:
    return [{"dim": d, "scaling": s.label, "norm": nm, "mlp": spec.mlp, "layers": L,
             "layer": li} for d in spec.dims for s in spec.scalings for nm in spec.norms
            for L in spec.layers for li in range(L)]


def documented_problem(spec: DepthSpec, entry: Documented) -> str | None:
    return selector_problem(plan_rows(spec), _canonical(entry), FIELDS)


def _values(spec: DepthSpec, ctx: RunContext) -> dict[Key, dict[int, BlockValues]]:
    """Every trial, in fixed blocks seeded (seed, spawn_key=(block,)); each block's draws
    serve every (d_k, rule, norm, L): common random numbers."""
    stack = spec.stack()
    size = stack.block_trials()
    blocks = -(-spec.trials // size)
    keys = [(d, s, nm) for d in spec.dims for s in spec.scalings for nm in spec.norms]

    def work(b: int) -> dict[Key, dict[int, BlockValues]]:
        rng = block_generator(spec.entropy, (b,))
        count = min(size, spec.trials - b * size)
        draws = draw(rng, stack, count)
        with np.errstate(under="ignore"):
            return {(d, s.label, nm): stack_values(draws, stack, d, s, nm, spec.layers)
                    for d, s, nm in keys}

    def fold(acc: list[dict[Key, dict[int, BlockValues]]],
             part: dict[Key, dict[int, BlockValues]]) -> list[dict[Key, dict[int, BlockValues]]]:
        acc.append(part)
        return acc

    start: list[dict[Key, dict[int, BlockValues]]] = []
    parts = fold_blocks(blocks, work, fold, start, ctx.workers, ctx.executor, ctx.tick)
    return {k: {L: BlockValues.join([p[k][L] for p in parts]) for L in spec.layers}
            for k in parts[0]}


def block_rows(spec: DepthSpec, key: Key, L: int, v: BlockValues) -> list[DepthRow]:
    d, label, nm = key
    c = _factor(spec, label, d)
    out = []
    for li in range(L):
        with np.errstate(all="ignore"):
            passed, passed_se = ratio_of_means(v.wq[li], c * v.wv[li])
        with np.errstate(all="ignore"):
            pm, plo, phi = median_interval(v.wq[li] / (c * v.wv[li]), _boot_seed(spec, key, li))
        cos = v.cosine[li]
        fz = v.frozen[li]
        out.append(DepthRow(
            dim=d, scaling=label, norm=nm, mlp=spec.mlp, layers=L, layer=li,
            grads=WeightGrads.of(v.wq[li], v.wk[li], v.wv[li]),
            frozen_share=float(fz.mean()), frozen_share_se=float(fz.std(ddof=1) /
                                                                  math.sqrt(fz.size)),
            softmax_pass=_finite(passed), softmax_pass_se=_finite(passed_se),
            softmax_pass_median=_finite(pm), softmax_pass_lo=_finite(plo),
            softmax_pass_hi=_finite(phi),
            token_cosine=_finite(cos.mean()),
            token_cosine_se=_finite(cos.std(ddof=1) / math.sqrt(cos.size))))
    return out


def _factor(spec: DepthSpec, label: str, d: int) -> float:
    """The rule's factor on q·k at this d_k (c = 1 unscaled, 1/√d_k, 1/d_k, …)."""
    rule = next(s for s in spec.scalings if s.label == label)
    return rule.factor(d, spec.keys)


def ratio_of_means(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """mean(a)/mean(b) over paired trials and its delta-method standard error:
    var ≈ r²·(s_a²/ā² + s_b²/b̄² − 2·s_ab/(ā·b̄))/n."""
    n = a.size
    ma, mb = float(a.mean()), float(b.mean())
    if mb == 0.0 or not math.isfinite(ma / mb):  # a first block passing no gradient at all
        return math.nan, math.nan
    r = ma / mb
    cov = np.cov(a, b, ddof=1)
    rel = cov[0, 0] / ma**2 + cov[1, 1] / mb**2 - 2.0 * cov[0, 1] / (ma * mb)
    return r, abs(r) * math.sqrt(max(rel, 0.0) / n)


def _boot_seed(spec: DepthSpec, key: Key, where: int) -> int:
    """The bootstrap's own seed for one row: the spec's entropy and the row's place."""
    d, label, nm = key
    words = [*label.encode(), *nm.encode()]
    return int(np.random.SeedSequence([spec.entropy, d, where + 1024, *words])
               .generate_state(1)[0])


def stack_row(key: Key, L: int, v: BlockValues, seed: int = 0) -> StackRow:
    d, label, nm = key
    with np.errstate(all="ignore"):
        r, r_se = ratio_of_means(v.wq[L - 1], v.wq[0])
        rv, rv_se = ratio_of_means(v.wv[L - 1], v.wv[0])
        vm, vlo, vhi = median_interval(v.wv[L - 1] / v.wv[0], seed)
        med0, med1 = float(np.median(v.wq[0])), float(np.median(v.wq[L - 1]))
    cos = v.cosine.mean(axis=1)
    hit = np.nonzero(cos >= COLLAPSED)[0]
    last = v.cosine[L - 1]
    return StackRow(
        dim=d, scaling=label, norm=nm, layers=L, wq_ratio=_finite(r), wq_ratio_se=_finite(r_se),
        median_ratio=_finite(med1 / med0) if med0 > 0 else None,
        wv_ratio=_finite(rv), wv_ratio_se=_finite(rv_se),
        wv_ratio_median=_finite(vm), wv_ratio_lo=_finite(vlo), wv_ratio_hi=_finite(vhi),
        first_frozen=float(v.frozen[0].mean()),
        last_cosine=_finite(last.mean()),
        last_cosine_se=_finite(last.std(ddof=1) / math.sqrt(last.size)),
        collapse_depth=int(hit[0]) + 1 if hit.size else None)


def run(spec: DepthSpec, ctx: RunContext = SERIAL) -> Result:
    values = _values(spec, ctx)
    typed: list[DepthRow] = []
    stacks: list[StackRow] = []
    checks: list[Check] = []
    for key, by_L in values.items():
        for L in spec.layers:
            typed.extend(block_rows(spec, key, L, by_L[L]))
            stacks.append(stack_row(key, L, by_L[L], _boot_seed(spec, key, -L)))
        bad = [g for g in ("wq", "wk", "wv") for L in spec.layers
               if not np.all(np.isfinite(getattr(by_L[L], g)))]
        d, label, nm = key
        checks.append(Check(f"d_k={d} {label} {nm}", not bad,
                            f"non-finite gradients in {', '.join(sorted(set(bad)))}" if bad
                            else "every block's gradients finite"))
    checks.extend(findings.theory_checks(spec))
    rows = [as_row(r) for r in typed]
    summary = [as_row(s) for s in stacks]
    return assemble(
        spec, study="depth", title="Gradients and token similarity through a stack of blocks",
        table=Table("depth", "Per block: gradient norms, frozen rows, token cosine", COLUMNS,
                    tuple(rows), terminal=len(rows) <= TERMINAL_ROWS),
        tables=[Table("stacks", "Per stack: ‖∂L/∂W_Q‖ last/first block and token collapse",
                      STACK_COLUMNS, tuple(summary))],
        checks=checks, lookup=_lookup(rows, summary), theory=findings.theory_lines(spec),
        notes=_notes(spec), figures=_figures(spec, rows) if ctx.figures else (),
        findings=findings.verdicts(spec, rows, summary, _first_blocks(spec, values),
                                   spec.entropy),
        expect=findings.expect(),
    )


def _first_blocks(spec: DepthSpec, values: Mapping[Key, Mapping[int, BlockValues]]
                  ) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """(norm, d_k) → rule → block 0's per-trial values in the deepest stack: row 0 the
    gradient through its softmax, like with like (‖∂L/∂W_Q‖ ÷ (c·‖∂L/∂W_V‖),
    DepthRow.softmax_pass), row 1 the gradient arriving there (‖∂L/∂W_V‖)."""
    L = max(spec.layers)
    out: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    for (d, label, nm), by_L in values.items():
        with np.errstate(all="ignore"):
            passed = by_L[L].wq[0] / (_factor(spec, label, d) * by_L[L].wv[0])
        out.setdefault((nm, d), {})[label] = np.stack([passed, by_L[L].wv[0]])
    return out


def _lookup(rows: Sequence[Mapping[str, Any]], summary: Sequence[Mapping[str, Any]]
            ) -> Lookup:
    def lookup(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
        name, idx = split_quantity(quantity)
        table = summary if name in STACK_FIELDS and name not in FIELDS else rows
        found = find_rows(table, _canonical(entry).row)
        if len(found) != 1:
            return None, None
        row = found[0]
        value = pick(row.get(name), idx)
        se_name = (name.removesuffix("_mean") if name.endswith("_mean") else name) + "_se"
        se = row.get(se_name)
        base = name.removesuffix("_median")
        lo, hi = row.get(base + "_lo"), row.get(base + "_hi")
        if name.endswith("_median") and lo is not None and hi is not None:
            se = (hi - lo) / (2 * 1.96)  # the 95% bootstrap interval as a standard error
        return (float(value) if isinstance(value, int | float) else None), se

    return lookup


def _notes(spec: DepthSpec) -> tuple[str, ...]:
    notes = [f"Frozen row: softmax Jacobian ‖diag(p) − ppᵀ‖_F < 1e-3. Token cosine: mean "
             f"cosine between distinct rows of h after the block (Pre-LN: the residual "
             f"stream, before the final LN); 'cos ≥ {COLLAPSED:g} at' counts blocks from 1.",
             "Every (L, d_k, rule, norm) reads the same draws of each trial (common random "
             "numbers): d_k takes the first d_k columns of W_Q and W_K, L the first L blocks."]
    if spec.causal:
        notes.append(f"Causal mask: the first query sees one key, so 1/{spec.keys} of every "
                     "block's rows is frozen whatever the rule.")
    return tuple(notes)


def _figures(spec: DepthSpec, rows: Sequence[Mapping[str, Any]]) -> tuple[Figure, ...]:
    deepest = max(spec.layers)
    series = []
    for d in spec.dims:
        for nm in spec.norms:
            for s in spec.scalings:
                mine = [r for r in rows if r["dim"] == d and r["norm"] == nm
                        and r["scaling"] == s.label and r["layers"] == deepest]
                series.append({
                    "dim": d, "norm": nm, "scaling": s.label,
                    "layer": [r["layer"] for r in mine],
                    "wq_median": [r["grad_wq_median"] for r in mine],
                    "wq_mean": [r["grad_wq_mean"] for r in mine],
                    "wq_se": [r["grad_wq_se"] for r in mine],
                    "cosine": [r["token_cosine"] for r in mine],
                    "cosine_se": [r["token_cosine_se"] for r in mine],
                    "frozen": [r["frozen_share"] for r in mine],
                    "frozen_se": [r["frozen_share_se"] for r in mine]})
    sizes = (f"L = {deepest}, d_model = {spec.d_model}, n = {spec.keys}, {spec.trials} trials"
             + (", MLP" if spec.mlp else "") + (", causal" if spec.causal else ""))
    data = {"series": series, "norms": list(spec.norms), "dims": list(spec.dims),
            "sizes": sizes}
    return (
        Figure("grad_wq_by_block", "depth.grad_wq", "Median ‖∂L/∂W_Q‖ per block",
               data, caption="A falling line: less gradient reaches W_Q in the blocks "
               "nearer the output. Solid: d_k as in the legend; one panel per norm."),
        Figure("token_cosine_by_block", "depth.cosine", "Mean cosine between tokens per block",
               data, caption="Near 1: the tokens have become alike (rank collapse)."),
        Figure("frozen_by_block", "depth.frozen", "Share of frozen score rows per block",
               {**data, "below": 1e-3},
               caption="Frozen: the row's softmax Jacobian has ‖J‖_F < 1e-3."),
    )
