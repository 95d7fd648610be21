"""Study: does unscaled attention train worse? One head learns associative recall per rule."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdpa_cli.framework.audit import selector_problem
from sdpa_cli.framework.common import assemble, finite, row_lookup
from sdpa_cli.framework.context import SERIAL, RunContext
from sdpa_cli.framework.result import Check, Column, Figure, Result, Table, as_row, row_fields
from sdpa_cli.numerics.blocks import fold_blocks
from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.train import findings, recall, robustness
from sdpa_cli.studies.train.rows import SensitivityRow, TrainRow
from sdpa_cli.studies.train.spec import TrainSpec

COLUMNS = (
    *Column.rule_keys(),
    Column("optimiser", "opt", "text", priority=0),
    Column("lr", "lr", priority=0),
    Column("steps_to_target_median", "steps to target (median)", priority=0),
    Column("steps_to_target_lo", "lo", priority=2),
    Column("steps_to_target_hi", "hi", priority=2),
    Column("never", "never", "int", priority=1),
    Column("final_loss_median", "final loss", priority=1),
    Column("final_accuracy_median", "final acc", priority=1),
    Column("entropy_init", "entropy at step 1", priority=3),
    Column("max_score_final", "max |score| at end", priority=3),
    Column("grad_wq_init", "‖∂L/∂W_Q‖ at step 1", priority=3),
    Column("diverged", "diverged", "int", priority=2),
)
FIELDS = row_fields(TrainRow)
SENSITIVITY_COLUMNS = (
    *Column.rule_keys(),
    Column("optimiser", "opt", "text", priority=0),
    Column("rates", "rates", "int", priority=1),
    Column("best_lr", "best lr", priority=1),
    Column("best_final_loss", "best final loss", priority=0),
    Column("lr_sensitivity", "lr sensitivity", priority=0),
    Column("best_at_edge", "best at sweep edge", "text", priority=2),
)


@dataclass(frozen=True)
class Config:
    dim: int
    scaling: Scaling
    optimiser: str
    lr: float


def configs(spec: TrainSpec) -> list[Config]:
    """Every (d_k, rule, optimiser, rate), in table order."""
    return [Config(d, s, opt, lr) for d in spec.dims for s in spec.scalings
            for opt, rates in spec.rates.items() for lr in rates]


def plan_rows(spec: TrainSpec) -> list[dict[str, Any]]:
    return [{"dim": c.dim, "scaling": c.scaling.label, "optimiser": c.optimiser, "lr": c.lr}
            for c in configs(spec)]


def documented_problem(spec: TrainSpec, entry: Documented) -> str | None:
    return selector_problem(plan_rows(spec), entry, FIELDS)


def task_for(spec: TrainSpec, dim: int) -> recall.Task:
    task: recall.Task = spec.task(dim)
    return task


def train_one(spec: TrainSpec, c: Config, seed_index: int, perturb: float = 0.0
              ) -> recall.TrainLog:
    """One run. Its generators depend on (spec seed, d_k, seed index) only, so every rule,
    optimiser and rate starts from the same weights and sees the same batches: the
    comparisons between rules are paired."""
    assert spec.seed is not None
    return recall.train(
        task_for(spec, c.dim), c.scaling, c.optimiser, c.lr, steps=spec.steps,
        batch=spec.batch, log_every=spec.log_every,
        init_rng=block_generator(spec.seed, (c.dim, seed_index, 0)),
        data_rng=block_generator(spec.seed, (c.dim, seed_index, 1)), perturb=perturb)


# Initialisations whose step-1 entropy the collapse claim's median rests on: one forward
# pass each (no training), so many cost little; the first `seeds` are the trained runs'.
INIT_DRAWS = 200


def init_entropies(spec: TrainSpec) -> np.ndarray | None:
    """The unscaled query row's mean entropy at step 1, at the largest d_k, for INIT_DRAWS
    initialisations drawn as train_one draws seed i's (its weights, its first batch)."""
    rule = next((s for s in spec.scalings if s.label == "none"), None)
    if rule is None or spec.seed is None or spec.beyond is not None:
        return None  # a run beyond the claims' setting decides none: its seeds will do
    d = max(spec.dims)
    task = task_for(spec, d)
    out = np.empty(max(INIT_DRAWS, spec.seeds))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for i in range(out.size):
            params = recall.init_params(task, block_generator(spec.seed, (d, i, 0)))
            batch = recall.draw_batch(task, spec.batch, block_generator(spec.seed, (d, i, 1)))
            out[i] = recall.forward(params, batch, rule, task).entropy
    return out


def _train_block(spec: TrainSpec, plan: Sequence[tuple[Config, int, float]], b: int
                 ) -> recall.TrainLog:
    """Block b of the fold: the b-th training run of the plan (module level: it pickles)."""
    return train_one(spec, *plan[b])


def run(spec: TrainSpec, ctx: RunContext = SERIAL) -> Result:
    # every seed of every configuration, then each configuration's first seed again with its
    # initial weights nudged by 1e-12 (robustness.py): how far the outcome rests on rounding
    plan = [(c, s, 0.0) for c in configs(spec) for s in range(spec.seeds)]
    plan += [(c, 0, robustness.PERTURB) for c in configs(spec)]
    # One block per training run, through the same fold as every study's blocks: threads,
    # an executor or a cluster, progress ticks; each run owns its generators, so neither the
    # order of execution nor the number of workers changes a digit.
    logs: list[recall.TrainLog] = fold_blocks(
        len(plan), functools.partial(_train_block, spec, plan), lambda acc, log: [*acc, log],
        [], workers=ctx.workers, executor=ctx.executor, tick=ctx.tick)
    by_config: dict[Config, list[recall.TrainLog]] = {}
    nudged: dict[Config, recall.TrainLog] = {}
    for (c, _, perturb), log in zip(plan, logs, strict=True):
        if perturb:
            nudged[c] = log
        else:
            by_config.setdefault(c, []).append(log)
    chance = math.log(spec.vocab)
    typed = [_row(spec, c, runs, chance) for c, runs in by_config.items()]
    rows = [as_row(r) for r in typed]
    sens = sensitivity_rows(typed, chance)
    init = init_entropies(spec)
    claims, sentences = findings.audit_claims(spec, typed, sens, init)
    # the same verdicts from the runs with the first seed nudged: a flip makes a claim fragile
    typed_n = [_row(spec, c, [nudged[c], *runs[1:]], chance) for c, runs in by_config.items()]
    claims_n, _ = findings.audit_claims(spec, typed_n, sensitivity_rows(typed_n, chance),
                                        init)
    claims = robustness.mark_fragile(claims, claims_n)
    robust = robustness.rows({(c.dim, c.scaling.label, c.optimiser, c.lr): (runs[0], nudged[c])
                              for c, runs in by_config.items()}, spec.target_accuracy)
    fragility = robustness.sentence(robust, claims)
    figures = _figures(spec, by_config, typed, sens) if ctx.figures else []
    result = assemble(
        spec, study="train", title="Associative recall trained with and without scaling",
        table=Table("train", "Steps to target accuracy and final loss per configuration",
                    COLUMNS, tuple(rows)),
        checks=_checks(spec, typed), lookup=row_lookup(rows), theory=_theory(spec),
        notes=[*sentences, *_notes(spec), *_sensitivity_note(sens)], figures=figures,
        findings=(findings.reach_sentence(spec, typed),
                  *(f"claim {c.claim}: {c.verdict}" for c in claims if c.verdict != "untested"),
                  fragility),
        # With one rate per rule the sensitivity is 0 by definition: the files keep the
        # table, the terminal says so in a note instead of a column of zeros.
        tables=[Table("sensitivity", "Learning-rate sensitivity per rule (Wortsman et al. "
                      "2023)", SENSITIVITY_COLUMNS, tuple(as_row(x) for x in sens),
                      terminal=any(x.rates > 1 for x in sens)),
                Table("claims", "The documents' claims about training, audited",
                      findings.CLAIM_COLUMNS, tuple(as_row(c) for c in claims)),
                Table("robustness", "Each configuration's first seed, as drawn and with its "
                      "initial weights × (1 + 1e-12)", robustness.COLUMNS,
                      tuple(as_row(r) for r in robust))])
    curves = [{"dim": c.dim, "scaling": c.scaling.label, "optimiser": c.optimiser, "lr": c.lr,
               **_median_curves(runs)} for c, runs in by_config.items()]
    audit = (*result.audit, *findings.claim_entries(claims, spec.name or "train",
                                                     spec.beyond))
    return Result(**{**vars(result), "audit": audit, "extra": {"curves": curves}})


def _median(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.median(vals)) if len(vals) == len(values) and vals else None


def _row(spec: TrainSpec, c: Config, runs: list[recall.TrainLog], chance: float
         ) -> TrainRow:
    reach = [recall.steps_to_reach(log, spec.target_accuracy) for log in runs]
    hit = sorted(r for r in reach if r is not None)
    # Median with "never" as +∞: defined while at least half the seeds reached the target.
    ranked = [float(r) if r is not None else math.inf for r in reach]
    med = float(np.median(ranked))
    final = [log.last("loss") for log in runs]
    finite_final = [f for f in final if f is not None]

    def first(name: str) -> float | None:
        return _median([finite(log.series[name][0]) for log in runs])

    def last(name: str) -> float | None:
        return _median([log.last(name) for log in runs])

    return TrainRow(
        dim=c.dim, scaling=c.scaling.label, factor=c.scaling.factor(c.dim, spec.pairs + 1),
        optimiser=c.optimiser, lr=c.lr, seeds=len(runs), steps=spec.steps,
        target_accuracy=spec.target_accuracy,
        reached=len(hit), never=len(runs) - len(hit),
        steps_to_target_median=med if math.isfinite(med) else None,
        # smallest and largest over seeds: an interval for the median with coverage
        # 1 − 2^(1−seeds) (75% for 3 seeds, 94% for 5); hi is None if a seed never reached it
        steps_to_target_lo=float(hit[0]) if hit else None,
        steps_to_target_hi=float(hit[-1]) if len(hit) == len(runs) else None,
        final_loss_median=_median(final),
        final_loss_lo=min(finite_final) if finite_final else None,
        final_loss_hi=max(finite_final) if len(finite_final) == len(final) else None,
        final_accuracy_median=last("accuracy"),
        chance_loss=chance,
        entropy_init=first("entropy"), entropy_init_lo=_edge(runs, min),
        entropy_init_hi=_edge(runs, max), entropy_final=last("entropy"),
        max_score_init=first("max_score"), max_score_final=last("max_score"),
        grad_wq_init=first("grad_wq"), grad_wk_init=first("grad_wk"),
        grad_wq_final=last("grad_wq"), grad_wk_final=last("grad_wk"),
        diverged=sum(log.diverged_at is not None for log in runs),
    )


def _edge(runs: list[recall.TrainLog], pick: Any) -> float | None:
    """The smallest or largest entropy at step 1 over the seeds (None if one is not finite)."""
    first = [finite(log.series["entropy"][0]) for log in runs]
    vals = [v for v in first if v is not None]
    return float(pick(vals)) if vals and len(vals) == len(first) else None


def sensitivity_rows(rows: list[TrainRow], chance: float) -> list[SensitivityRow]:
    """Wortsman et al. (2023): the mean over the rate sweep of min(final loss, loss at chance)
    − the best final loss of the sweep; a diverged rate counts as chance."""
    out = []
    keys = dict.fromkeys((r.dim, r.scaling, r.optimiser) for r in rows)
    for dim, scaling, opt in keys:
        group = sorted((r for r in rows if (r.dim, r.scaling, r.optimiser) ==
                        (dim, scaling, opt)), key=lambda r: r.lr)
        clipped = [min(r.final_loss_median, chance) if r.final_loss_median is not None
                   else chance for r in group]
        best = int(np.argmin(clipped))
        out.append(SensitivityRow(
            dim=dim, scaling=scaling, optimiser=opt, rates=len(group),
            best_lr=group[best].lr, best_final_loss=clipped[best],
            best_at_edge=len(group) > 1 and best in (0, len(group) - 1),
            lr_sensitivity=float(np.mean(clipped) - clipped[best]),
            final_loss_by_lr=clipped, lrs=[r.lr for r in group],
        ))
    return out


def _fastest(row: TrainRow) -> float:
    """The median steps of a row whose every seed reached the target (so it is finite)."""
    assert row.steps_to_target_median is not None
    return row.steps_to_target_median


def _checks(spec: TrainSpec, rows: list[TrainRow]) -> list[Check]:
    full = [r for r in rows if r.reached == r.seeds]
    if full:
        best = min(full, key=_fastest)
        detail = (f"{len(full)} of {len(rows)} configurations reach {spec.target_accuracy:g} "
                  f"accuracy in every seed; fastest: d_k = {best.dim}, {best.scaling}, "
                  f"{best.optimiser} lr {best.lr:g}, median "
                  f"{_fastest(best):g} steps")
    else:
        detail = (f"no configuration reaches {spec.target_accuracy:g} accuracy in every seed "
                  f"within {spec.steps} steps: the task is not learnt, so the runs compare "
                  "nothing; raise steps or lower target_accuracy")
    return [Check("task learnt", bool(full), detail, fields=("steps",))]


def _theory(spec: TrainSpec) -> tuple[str, ...]:
    return (
        f"chance loss ln V = ln {spec.vocab} = {math.log(spec.vocab):.4g}; a head that attends "
        "to the matching pair can reach loss 0",
        "at init the unscaled scores have std ≈ √d_k·|x|²/d_model (|x|² ≈ 2·d_model for a pair "
        "row), so the query row's softmax is near one-hot once that passes √(2 ln n)"
        + (" (Pre-LN: block 0 reads LN(x), |x|² ≈ d_model)" if spec.norm == "pre" else ""),
        "steps to target: the first logged step whose window-mean accuracy reaches the target; "
        "lo–hi is the range over seeds",
    )


def _sensitivity_note(sens: list[SensitivityRow]) -> list[str]:
    if any(x.rates > 1 for x in sens):
        return []
    return ["learning-rate sensitivity not measured: one rate per rule and optimiser, so it "
            "is 0 by definition (list several learning_rates to sweep them)."]


def _notes(spec: TrainSpec) -> list[str]:
    return [
        f"{spec.seeds} seed(s) per configuration; every rule, optimiser and rate of a seed "
        "starts from the same weights and sees the same batches (paired comparison).",
        f"each sequence: {spec.pairs} key–value pairs (one row each: E_key[k] + E_value[v]) then "
        f"the query key; embeddings {spec.embeddings}; logged means over {spec.log_every} steps.",
        *_stack_note(spec),
    ]


def _stack_note(spec: TrainSpec) -> list[str]:
    if spec.norm == "none":
        return []
    name = {"post": "Post-LN", "pre": "Pre-LN"}[spec.norm]
    return [f"model: {spec.layers} {name} block(s) of the depth study (LayerNorm without "
            f"parameters{', ReLU MLP' if spec.mlp else ''}, value width d_model), read out "
            "on the query row; entropy, largest |score| and ‖∂L/∂W_Q‖ are block 0's."]


def _median_curves(runs: list[recall.TrainLog]) -> dict[str, Any]:
    """Per logged step: median, min and max over seeds (a diverged run's missing points are
    left out of the statistics at those steps)."""
    longest = max(runs, key=lambda log: len(log.steps))
    out: dict[str, Any] = {"steps": longest.steps.tolist()}
    for name in recall.LOG_FIELDS:
        grid = np.full((len(runs), len(longest.steps)), np.nan)
        for i, log in enumerate(runs):
            grid[i, : len(log.steps)] = log.series[name]
        grid[~np.isfinite(grid)] = np.nan
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: null points
            out[name] = [finite(v) for v in np.nanmedian(grid, axis=0)]
            out[f"{name}_lo"] = [finite(v) for v in np.nanmin(grid, axis=0)]
            out[f"{name}_hi"] = [finite(v) for v in np.nanmax(grid, axis=0)]
    return out


def _figures(spec: TrainSpec, by_config: dict[Config, list[recall.TrainLog]],
             rows: list[TrainRow], sens: list[SensitivityRow]) -> list[Figure]:
    chance = math.log(spec.vocab)
    # each rule's curves at its best rate: the one the sensitivity table and the claims name
    best_lr = {(x.dim, x.scaling, x.optimiser): x.best_lr for x in sens}
    best = [c for c in by_config if best_lr[(c.dim, c.scaling.label, c.optimiser)] == c.lr]
    curves = [{"dim": c.dim, "scaling": c.scaling.label, "formula": c.scaling.formula,
               "optimiser": c.optimiser, "lr": c.lr, **_median_curves(by_config[c])}
              for c in best]
    base = {"dims": list(spec.dims), "scalings": [s.label for s in spec.scalings],
            "formulas": [s.formula for s in spec.scalings], "optimisers": list(spec.rates),
            "seeds": spec.seeds, "chance": chance, "target": spec.target_accuracy,
            "batch": spec.batch, "log_every": spec.log_every}
    figs = [Figure("loss_curves", "train.loss_curves",
                   "Training loss per rule (median and range over seeds, best rate)",
                   {**base, "curves": curves}),
            Figure("traces", "train.traces",
                   "Query-row attention entropy and largest |score| while training",
                   {**base, "curves": curves, "keys": spec.pairs + 1})]
    if any(len(v) > 1 for v in spec.rates.values()):
        points = [{"dim": r.dim, "scaling": r.scaling, "optimiser": r.optimiser, "lr": r.lr,
                   "final_loss_median": r.final_loss_median, "final_loss_lo": r.final_loss_lo,
                   "final_loss_hi": r.final_loss_hi} for r in rows]
        figs.append(Figure("loss_vs_lr", "train.loss_vs_lr",
                           "Final loss versus learning rate, per rule",
                           {**base, "points": points}))
    return figs

