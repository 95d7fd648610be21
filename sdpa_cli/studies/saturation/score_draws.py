"""Monte Carlo cells of the saturation studies: block-seeded draws, rule variants, folds."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sdpa_cli.framework.context import RunContext
from sdpa_cli.numerics.blocks import Job, fold_jobs
from sdpa_cli.numerics.moments import Moments
from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.limits import SCALE_RANGE
from sdpa_cli.studies.saturation import score_rows as sat
from sdpa_cli.studies.saturation.additive import additive_blocks, additive_scores
from sdpa_cli.studies.saturation.spec import BATCHES, SaturationFields

# Scales are clamped into this range before softmax: beyond it the weights are already
# exactly one-hot (or exactly uniform), and 0 or inf would make the scaled scores undefined.
# (SCALE_RANGE, from spec.limits: a spec's own scales outside it are refused there.)


def clamp(scale: float) -> float:
    return min(max(scale, SCALE_RANGE[0]), SCALE_RANGE[1])


# --- sources 2 and 3: Monte Carlo cells ------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One way of turning a cell's raw scores into softmax inputs: multiply by `scale`
    (then cap: C·tanh(x/C)). `source` is raw q·k, cos(q, k) or the cosine of mean-removed
    vectors (LayerNorm, for qknorm); `probe` keeps the final scores at the probe positions."""

    label: str
    scale: float  # on the raw scores (standardized units), or on the cosines
    cosine: bool = False
    source: str = "raw"  # "raw", "cos" or "centred"
    cap: float | None = None
    probe: bool = False


@dataclass(frozen=True)
class Measured:
    """Monte Carlo summary of one variant of one cell: (mean, se) over independent trials."""

    stats: Mapping[str, tuple[float, float]]
    median_frobenius: tuple[float, float] | None = None
    largest: Mapping[str, float] = field(default_factory=dict)  # each statistic's maximum


@dataclass(frozen=True)
class Cell:
    """Everything kept from one cell: per-variant summaries and per-trial raw scores."""

    trials: int
    measured: tuple[Measured, ...]
    probes: Mapping[str, Moments] = field(default_factory=dict)  # raw scores at fixed spots
    first: Mapping[str, np.ndarray] | None = None  # the first trial, for the picture


class _Fold:
    """Receives block results strictly in block order (fold_blocks guarantees it) and keeps
    only running moments per statistic and probe: memory does not grow with trials."""

    def __init__(self, variants: int, trials: int, medians: bool) -> None:
        self.trials = trials
        self.parts: list[dict[str, Moments]] = [{} for _ in range(variants)]
        self.medians = [sat.BatchMedians(trials, BATCHES) for _ in range(variants)] \
            if medians else None
        self.probes: dict[str, Moments] = {}
        self.first: dict[str, np.ndarray] | None = None

    def __call__(self, acc: _Fold, part: tuple) -> _Fold:
        per_variant, probes, first = part
        for i, (per_trial, frob_rows) in enumerate(per_variant):
            for name, block in per_trial.items():
                self.parts[i][name] = self.parts[i].get(name, Moments()).merge(block)
            if self.medians is not None:
                self.medians[i].add(frob_rows)
        for name, block in probes.items():
            self.probes[name] = self.probes.get(name, Moments()).merge(block)
        if first is not None:
            self.first = first
        return self

    def cell(self, trials: int) -> Cell:
        measured = []
        for i, parts in enumerate(self.parts):
            stats = {name: _mean_se(m) for name, m in parts.items()}
            med = self.medians[i].result() if self.medians is not None else None
            measured.append(Measured(stats, med, {name: m.max for name, m in parts.items()}))
        return Cell(trials, tuple(measured), dict(self.probes), self.first)


def _moments(per_trial: Mapping[str, np.ndarray]) -> dict[str, Moments]:
    """A block's per-trial values summarised where they were drawn: only these few numbers
    travel back from a worker (the same Moments.of the fold would take, so the same digits)."""
    return {name: Moments.of(np.asarray(v, dtype=float)) for name, v in per_trial.items()}


def _mean_se(m: Moments) -> tuple[float, float]:
    """Mean and its standard error sd/√N over independent trials."""
    return m.mean, (math.sqrt(m.variance / m.n) if m.n > 1 else math.nan)


def run_cells(jobs: Sequence[Job[tuple, _Fold]], ctx: RunContext) -> list[Cell]:
    """The cells of a sweep, their blocks sharing the threads (or the cluster) and each
    folded in its own block order: the same digits as running them one by one."""
    folds = fold_jobs(jobs, ctx.workers, ctx.executor, ctx.tick)
    return [f.cell(f.trials) for f in folds]


def gaussian_job(
    spec: SaturationFields, n: int, key: tuple[int, ...], *, threshold: float | None,
    jacobian: bool,
) -> Job[tuple, _Fold]:
    """Rows of n iid N(0, s²) scores for every s of the spec, from the same standard normal
    draws (common random numbers: the curves over s are not blurred by independent noise)."""
    stds = list(spec.score_stds or [])
    trials = spec.trials
    per, blocks = sat.gaussian_blocks(n, trials)

    def work(b: int) -> tuple:
        rng = block_generator(spec.seed or 0, (*key, b))
        z = sat.gaussian_scores(rng, min(per, trials - b * per), n)
        out = []
        for s in stds:
            st = sat.row_stats(z, clamp(s), threshold=threshold, jacobian=jacobian)
            out.append((_moments(st), st["frobenius"][:, None] if jacobian else None))
        return out, _moments({"score": z[:, 0]}), None

    fold = _Fold(len(stds), trials, medians=jacobian)
    return Job(blocks, work, fold, fold)


def vector_job(
    spec: SaturationFields, law: PairLaw, d: int, n: int, variants: Sequence[Variant],
    key: tuple[int, ...], *, threshold: float | None, jacobian: bool, keep_first: bool,
) -> Job[tuple, _Fold]:
    """Sequences of n queries and n keys in d dimensions; every variant sees the same draws.

    Rows within one sequence are not independent, so each trial contributes its average over
    the n query rows, and standard errors are taken over trials. The raw scores at two fixed
    positions, (1, 0) (an independent query-key pair) and (0, 0) (a query with its own key),
    are kept per trial to check the score law: one value per trial is an iid sample.
    """
    trials = spec.trials
    per, blocks = sat.sequence_blocks(n, d, trials)
    want_cos = any(v.cosine or v.source == "cos" for v in variants)
    want_centred = any(v.source == "centred" for v in variants)
    masked = spec.mask == "causal"

    def work(b: int) -> tuple:
        rng = block_generator(spec.seed or 0, (*key, b))
        extra: dict[str, np.ndarray] | None = {} if want_centred else None
        raw, cos, qk = sat.sequence_scores(rng, law, min(per, trials - b * per), n, d,
                                           cosine=want_cos, keep_first=keep_first and b == 0,
                                           centred=extra)
        probes = {"offdiag": raw[:, 1, 0].copy(), "diag": raw[:, 0, 0].copy()}
        if cos is not None:
            probes.update(offdiag_cos=cos[:, 1, 0].copy(), diag_cos=cos[:, 0, 0].copy())
        first = None
        if keep_first and b == 0:
            first = {"raw": raw[0].copy()}
            if cos is not None:
                first["cos"] = cos[0].copy()
            if qk is not None:
                first["q"], first["k"] = qk
        sources = {"raw": raw, "cos": cos, "centred": extra["cos"] if extra else None}
        if masked:
            sources = {k: (sat.causal(v) if v is not None else None) for k, v in sources.items()}
        out = []
        spreads: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for v in variants:
            src = sources["cos" if v.cosine else v.source]
            assert src is not None
            scale = clamp(v.scale)
            if v.cap is not None:
                src, scale = capped(src, v.scale, v.cap), 1.0
            if v.probe:
                probes[f"{v.label}@offdiag"] = scale * src[:, 1, 0]
                probes[f"{v.label}@diag"] = scale * src[:, 0, 0]
            st = sat.row_stats(src, scale, threshold=threshold, jacobian=jacobian)
            per_trial = {name: values.mean(axis=1) for name, values in st.items()}
            # the variants of one source differ by their scale only: its spread once
            if id(src) not in spreads:
                spreads[id(src)] = _score_spread(src, masked)
            top, var = spreads[id(src)]
            per_trial.update(max_abs_score=_held(scale, top, 1),
                             row_score_var=_held(scale, var, 2))
            out.append((_moments(per_trial), st["frobenius"] if jacobian else None))
        return out, _moments(probes), first

    fold = _Fold(len(variants), trials, medians=jacobian)
    return Job(blocks, work, fold, fold)


SPREAD_ROWS = 4
# Beyond this a value's fourth power (the running moments keep it) would overflow float64: such
# a spread is reported as null, as the rows report every number float64 cannot hold.
HELD = 1e70


def _held(scale: float, x: np.ndarray, power: int) -> np.ndarray:
    """scale**power · x, null (NaN) where it reaches HELD."""
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.float64(scale) ** power * x  # a NumPy power: inf past float64, no exception
        return np.where(np.abs(y) < HELD, y, np.nan)


def _score_spread(src: np.ndarray, masked: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per trial, in the source's own units (a variant's scale c multiplies the first by c,
    the second by c²): the largest |score| over the rows it reads and all their keys (a bound
    such as cosine's |cos| ≤ 1 is checked on each), and the variance of a row's scores
    averaged over those rows (the spread the softmax sees, a query's own key included)."""
    # Both on SPREAD_ROWS query rows of each trial, spread over its positions (every key of
    # each): they sit in the innermost loop of every sweep, where all rows cost a tenth more
    part = src[:, :: max(1, src.shape[1] // SPREAD_ROWS), :]
    if not masked:
        return (np.maximum(part.max(axis=(1, 2)), -part.min(axis=(1, 2))),
                part.var(axis=-1).mean(axis=-1))
    with np.errstate(invalid="ignore"):
        x = np.where(np.isfinite(part), part, np.nan)  # masked keys are no scores
        return np.nanmax(np.abs(x), axis=(1, 2)), np.nanmean(np.nanvar(x, axis=-1), axis=-1)


def additive_job(spec: SaturationFields, law: PairLaw, d: int, n: int, key: tuple[int, ...],
                  *, threshold: float | None, jacobian: bool) -> Job[tuple, _Fold]:
    """Rows of n additive scores, one query with fresh weights per trial (independent rows)."""
    h = spec.additive
    assert h is not None
    trials = spec.trials
    per, blocks = additive_blocks(n, d, h, trials)

    def work(b: int) -> tuple:
        rng = block_generator(spec.seed or 0, (*key, 7, b))
        e = additive_scores(rng, min(per, trials - b * per), n, d, h, law.kind)
        st = sat.row_stats(e, 1.0, threshold=threshold, jacobian=jacobian)
        return ([(_moments(st), st["frobenius"][:, None] if jacobian else None)],
                _moments({"additive": e[:, 0]}), None)

    fold = _Fold(1, trials, medians=jacobian)
    return Job(blocks, work, fold, fold)


def variants_for(spec: SaturationFields, d: int, unit: float, n: int) -> list[Variant]:
    return [variant(s, d, unit, n) for s in spec.scalings]


def variant(s: Scaling, d: int, unit: float, n: int) -> Variant:
    """How rule s turns the cell's scores at (d, n) into softmax inputs."""
    if s.cosine:
        return Variant(s.label, s.factor(d), True, "cos")
    if s.norm is not None:
        # q̂·k̂ = d·cos with |q̂|² = d: LayerNorm's cosines are those of mean-removed vectors
        return Variant(s.label, d * s.factor(d), False,
                       "centred" if s.norm == "layer" else "cos", probe=True)
    return Variant(s.label, s.factor(d, n) * unit, False, "raw", s.cap, probe=s.cap is not None)


def capped(z: np.ndarray, scale: float, cap: float) -> np.ndarray:
    """C·tanh(scale·z/C), masked (−inf) entries kept masked."""
    with np.errstate(invalid="ignore"):
        out = cap * np.tanh(z * (scale / cap))
    return np.where(np.isneginf(z), -np.inf, out)
