"""Where the jacobian study's mean ‖J‖_F peaks over s, per n: grid parabola, then refinement."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from sdpa_cli.framework.common import finite
from sdpa_cli.framework.context import RunContext
from sdpa_cli.numerics.blocks import Job, fold_jobs
from sdpa_cli.studies.jacobian.refine import RefinedPeak, refine_peak
from sdpa_cli.studies.saturation import score_rows as sat
from sdpa_cli.studies.saturation.saturation_rows import JacobianGaussianRow, PeakRow
from sdpa_cli.studies.saturation.spec import JacobianSpec


def refined(spec: JacobianSpec, peaks: list[PeakRow],
            brackets: list[tuple[float, float] | None], ctx: RunContext) -> list[PeakRow]:
    """Each grid peak with a bracket, refined by golden section on common random numbers.

    Each n's search is one task (they are independent, and each is a sequence of passes
    over all its trials), so the threads or the cluster run them at once; the results are
    taken in n's order, whatever order they finish in."""
    wanted = [(j, p, b) for j, (p, b) in enumerate(zip(peaks, brackets, strict=True))
              if b is not None]
    jobs = [Job(1, partial(_refine, n=p.keys, trials=spec.trials, seed=spec.seed or 0,
                           bracket=b, key=(1_000_003, j)), _keep, None) for j, p, b in wanted]
    out = list(peaks)
    for (j, p, _), fine in zip(wanted, fold_jobs(jobs, ctx.workers, ctx.executor, ctx.tick),
                               strict=True):
        if not fine.at_edge:
            out[j] = replace(p, s_star=fine.s_star, s_star_se=finite(fine.se),
                             ratio=fine.s_star / p.sqrt_2_ln_n, fitted_peak=fine.peak,
                             peak_mean_frobenius=max(p.peak_mean_frobenius, fine.peak))
    return out


def _refine(_: int, *, n: int, trials: int, seed: int, bracket: tuple[float, float],
            key: tuple[int, ...]) -> RefinedPeak:
    return refine_peak(n, trials, seed, *bracket, key=key, tol=3e-3)  # 0.3% of s*: below se


def _keep(_: RefinedPeak | None, fine: RefinedPeak) -> RefinedPeak:
    return fine


def bracket(spec: JacobianSpec, rows: list[JacobianGaussianRow]) -> tuple[float, float] | None:
    """The grid neighbours of the maximum, where golden section refines s* on common random
    numbers (refine.py, with a delta-method se); None at the grid's edge or when off."""
    s = np.array([r.score_std for r in rows])
    f = np.array([r.stats.mean_frobenius for r in rows])
    if sat.peak_on_grid(s, f).at_edge or not spec.refine_peak:
        return None
    grid = np.sort(s)
    k = int(np.searchsorted(grid, s[int(np.argmax(f))]))
    return float(grid[k - 1]), float(grid[k + 1])


def grid_peak(n: int, rows: list[JacobianGaussianRow]) -> PeakRow:
    """s* on the grid (the parabola through the maximum and its neighbours)."""
    s = np.array([r.score_std for r in rows])
    f = np.array([r.stats.mean_frobenius for r in rows])
    peak = sat.peak_on_grid(s, f)
    sc = sat.freezing_std(n)
    return PeakRow(keys=n, s_star=peak.s_star, s_star_se=None, grid_s_star=peak.s_star,
                   sqrt_2_ln_n=sc, ratio=peak.s_star / sc,
                   peak_mean_frobenius=peak.grid_max, fitted_peak=peak.fitted_max,
                   frobenius_uniform=sat.uniform_frobenius(n), at_edge=peak.at_edge)


def peak_notes(peaks: list[PeakRow], smallest: float) -> list[str]:
    """What to say of peaks at the grid's edge, and how s* and its se were found."""
    notes = []
    low = [p.keys for p in peaks if p.at_edge and p.s_star == smallest]
    high = [p.keys for p in peaks if p.at_edge and p.keys not in low]
    if low:
        notes.append("for n = " + ", ".join(map(str, low)) + " the mean ‖J‖_F is largest at "
                     "the smallest s: these rows have the most gradient at uniform weights "
                     "(√(n−1)/n) and no peak in between; s* is that grid point.")
    if high:
        notes.append("for n = " + ", ".join(map(str, high)) + " the mean ‖J‖_F still rises "
                     "at the largest s: s* is that grid point; widen score_stds to bracket it.")
    notes.append("s* is found by golden section between the grid neighbours of the maximum, "
                 "on one fixed set of draws (common random numbers), to 0.3% in s; its se is "
                 "the delta method's: sd of per-row slopes ∂‖J‖_F/∂s at s* over √trials, "
                 "divided by the curvature of the mean curve (grid_s_star: the old parabola).")
    return notes


# Timing: the Gaussian Jacobian searches s* per n (golden section, about SEARCH_EVALUATIONS
# evaluations on fixed draws), work its cost estimate leaves out: SEARCH_NS nanoseconds per
# trial × key × evaluation (fitted with the study's rate).
SEARCH_NS = 30.0
SEARCH_EVALUATIONS = 20


def search_seconds(spec: JacobianSpec) -> float:
    """Seconds the s* search adds to a spec's estimate (none without random scores)."""
    if spec.score_source != "gaussian":
        return 0.0
    return SEARCH_NS * 1e-9 * SEARCH_EVALUATIONS * spec.trials * sum(spec.key_list)
