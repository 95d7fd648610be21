"""Every study sdpa knows, one line each; each entry imports its study only when it is used."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real imports happen inside the loaders, so `sdpa --help` stays light
    from sdpa_cli.spec.common import Documented, SpecBase
    from sdpa_cli.spec.limits import Cost
    from sdpa_cli.studies.context import RunContext
    from sdpa_cli.studies.result import Figure, Result

Renderer = Callable[["Figure"], Any]  # Figure data → a matplotlib figure


@dataclass(frozen=True)
class Study:
    """One study: everything the CLI, the batch and the report need to know about it."""

    name: str  # the `study:` of its specs and its command's name
    spec_model: type[SpecBase]  # the pydantic model of its spec
    run: Callable[[Any, RunContext], Result]  # run(spec, ctx) → Result; never prints or writes
    # Why a documented entry names no row or quantity of this spec (None when it does);
    # checked before anything runs.
    documented_problem: Callable[[Any, Documented], str | None]
    # Figure.kind → the function that draws it; a function, so matplotlib loads only to draw.
    figures: Callable[[], Mapping[str, Renderer]]
    # spec → its estimated work, memory and output (spec.limits.Cost); checked by spec.load
    # before anything runs. Every study gives one (tests/test_limits.py asserts it).
    limits: Callable[[Any], Cost] | None = None


def _variance() -> Study:
    from sdpa_cli.spec import limits
    from sdpa_cli.spec.variance import VarianceSpec
    from sdpa_cli.studies import variance

    return Study("variance", VarianceSpec, variance.run, variance.documented_problem,
                 _variance_figures, limits=limits.variance)


def _variance_figures() -> Mapping[str, Renderer]:
    from sdpa_cli.report.figures import variance as f

    return {"variance.histograms": f.draw_histograms, "variance.vs_dim": f.draw_vs_dim}


def _softmax_sweep() -> Study:
    from sdpa_cli.spec import limits
    from sdpa_cli.spec.score_sources import SoftmaxSweepSpec
    from sdpa_cli.studies import softmax_sweep

    return Study("softmax-sweep", SoftmaxSweepSpec, softmax_sweep.run,
                 softmax_sweep.documented_problem, _saturation_figures,
                 limits=limits.score_source)


def _jacobian() -> Study:
    from sdpa_cli.spec import limits
    from sdpa_cli.spec.score_sources import JacobianSpec
    from sdpa_cli.studies import jacobian

    return Study("jacobian", JacobianSpec, jacobian.run, jacobian.documented_problem,
                 _saturation_figures, limits=limits.score_source)


def _saturation_figures() -> Mapping[str, Renderer]:
    from sdpa_cli.report.figures import jacobian_figures as j
    from sdpa_cli.report.figures import rules_figures as r
    from sdpa_cli.report.figures import saturation_figures as f

    return {
        "saturation.weights_by_scale": f.draw_weights_by_scale,
        "saturation.vs_dim": f.draw_vs_dim,
        "saturation.attention_picture": f.draw_attention_picture,
        "saturation.vs_std": f.draw_vs_std,
        "saturation.jacobian_vs_scale": j.draw_jacobian_vs_scale,
        "saturation.jacobian_vs_dim": j.draw_jacobian_vs_dim,
        "saturation.frobenius_vs_std": j.draw_frobenius_vs_std,
        "saturation.phase_diagram": j.draw_phase_diagram,
        "rules.leading_keys": r.draw_leading_keys,
        "rules.rem_participation": r.draw_rem_participation,
        "rules.vs_keys": r.draw_vs_keys,
    }


def _worked_example() -> Study:
    from sdpa_cli.spec import limits
    from sdpa_cli.spec.worked import WorkedExampleSpec
    from sdpa_cli.studies import worked as worked_example

    def run(spec: WorkedExampleSpec, ctx: RunContext) -> Result:
        return worked_example.run(spec)  # small exact arithmetic: no blocks, nothing to share

    return Study("worked-example", WorkedExampleSpec, run, worked_example.documented_problem,
                 _worked_figures, limits=limits.worked_example)


def _worked_figures() -> Mapping[str, Renderer]:
    from sdpa_cli.report.figures import worked as f

    return {"worked.weights": f.draw_weights}


def _gradients() -> Study:
    from sdpa_cli.spec.gradients import GradientsSpec, cost
    from sdpa_cli.studies import gradients

    return Study("gradients", GradientsSpec, gradients.run, gradients.documented_problem,
                 _gradients_figures, limits=cost)


def _gradients_figures() -> Mapping[str, Renderer]:
    from sdpa_cli.report.figures import gradients as f

    return {"gradients.norms": f.draw_norms, "gradients.frozen": f.draw_frozen}


def _train() -> Study:
    from sdpa_cli.spec.train import TrainSpec
    from sdpa_cli.spec.train import limits as train_limits
    from sdpa_cli.studies import train

    return Study("train", TrainSpec, train.run, train.documented_problem, _train_figures,
                 limits=train_limits)


def _train_figures() -> Mapping[str, Renderer]:
    from sdpa_cli.report.figures import train as f

    return {"train.loss_curves": f.draw_loss_curves, "train.traces": f.draw_traces,
            "train.loss_vs_lr": f.draw_loss_vs_lr}


def _depth() -> Study:  # issue 22; the lead's framework (issue 27) replaces this loader
    from sdpa_cli.studies.depth import run as depth
    from sdpa_cli.studies.depth.spec import DepthSpec, cost

    return Study("depth", DepthSpec, depth.run, depth.documented_problem, _depth_figures,
                 limits=cost)


def _depth_figures() -> Mapping[str, Renderer]:
    from sdpa_cli.studies.depth import figures as f

    return {"depth.grad_wq": f.draw_grad_wq, "depth.cosine": f.draw_cosine,
            "depth.frozen": f.draw_frozen}


# The registry: one line per study, in the order help and error messages list them.
LOADERS: dict[str, Callable[[], Study]] = {
    "variance": _variance,
    "softmax-sweep": _softmax_sweep,
    "jacobian": _jacobian,
    "worked-example": _worked_example,
    "gradients": _gradients,
    "train": _train,
    "depth": _depth,
}
NAMES: tuple[str, ...] = tuple(LOADERS)


@functools.cache
def get(name: str) -> Study:
    """The study called `name` (KeyError for an unknown name: check against NAMES first)."""
    return LOADERS[name]()


def check_documented(spec: SpecBase, file: str | None) -> None:
    """Refuse, before anything runs, documented entries that name no row or quantity."""
    from sdpa_cli.errors import InputError, Problem

    study = get(spec.study)
    problems = []
    for i, entry in enumerate(spec.documented):
        why = study.documented_problem(spec, entry)
        if why:
            problems.append(Problem(why, file=file, field=f"documented[{i}]"))
    if problems:
        raise InputError(problems)
