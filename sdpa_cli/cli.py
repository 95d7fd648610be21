"""The `sdpa` command line: click wiring only (parse → spec → run → report → exit code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sdpa_cli import __version__
from sdpa_cli.options import (
    SETTINGS,
    StudyCommand,
    ValueCommand,
    batch_options,
    ci_settings,
    common_options,
    list_option,
    spec_overrides,
    value_option,
)

SPEC_ARG = click.argument("spec_path", metavar="[SPEC]", required=False,
                          type=click.Path(dir_okay=True, path_type=Path))


def _settings(ctx: click.Context, **extra: Any) -> Any:
    """report.Settings from the shared flags this command declares (options.SETTINGS and
    the CI flags)."""
    from sdpa_cli.report import Settings

    given = {k: ctx.params[k] for k in SETTINGS if k in ctx.params}
    out = given.pop("out", None)
    no_plots = given.pop("no_plots", False)
    given = {k: v for k, v in given.items() if v is not None}
    # --out is a run folder, except under worked-example --all, where it holds one per example
    batch = bool(ctx.params.get("all_"))
    where = {"batch_folder" if batch else "run_folder": Path(out)} if out else {}
    return Settings(out=Path(out) if out else None, plots=not no_plots, **given,
                    **ci_settings(ctx.params, **where), **extra)


def _run(study: str, spec_path: Path | None) -> int:
    from sdpa_cli import app

    ctx = click.get_current_context()
    overrides, flags = spec_overrides(ctx)
    return app.run_study(study, spec_path, overrides=overrides, flags=flags,
                         settings=_settings(ctx))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="sdpa", message="%(prog)s %(version)s")
def cli() -> None:
    """Measure, show and check why attention divides QKᵀ by √d_k.

    \b
    Start here:
      sdpa variance --dims 3 100 1000
      sdpa run                      every spec in experiments/, into outputs/
    """


@cli.command(cls=StudyCommand, short_help="Variance of q·k versus d, raw and scaled.")
@SPEC_ARG
@list_option("--dims", metavar="D [D ...]", help="Dimensions to sample (default 3 100 1000).")
@value_option("--pairs", metavar="N", help="(q, k) pairs per dimension (default 1000).")
@value_option("--distribution", metavar="LAW",
              help="normal | uniform | rademacher | sphere (unit vectors).")
@value_option("--mean", help="Mean of each component (default 0).")
@value_option("--std", help="Standard deviation of each component (default 1).")
@value_option("--correlation", metavar="R", help="corr(q_i, k_i) in [-1, 1] (default 0).")
@list_option("--scalings", metavar="RULE [RULE ...]",
             help="none sqrt linear sqrt-half temperature:T power:P cosine[:TAU] "
                  "(default none sqrt).")
@value_option("--method", metavar="M", help="direct (default) | exact (normal, sphere).")
@value_option("--bins", metavar="N", help="Histogram bins in the figures (default 50).")
@value_option("--se-tolerance", metavar="K", help="A check passes when |z| ≤ K (default 4).")
@value_option("--d-model", metavar="N", help="Model width; with --heads gives d_k.")
@value_option("--heads", metavar="H", help="Number of heads; d_k = d_model / heads.")
@common_options
def variance(spec_path: Path | None, **kwargs: Any) -> int:
    """Monte Carlo of q·k versus dimension, raw and scaled, beside its theory.

    \b
    Examples:
      sdpa variance --dims 3 100 1000
      sdpa variance --dims 16 64 256 512 1024 --pairs 10000 --format json
      sdpa variance experiments/variance/day74-dims.yaml --pairs 5000 --check
    """
    return _run("variance", spec_path)


def saturation_options(f):
    """The score sources shared by softmax-sweep and jacobian (exactly one per run)."""
    decorators = [
        list_option("--scores", metavar="Z [Z ...]",
                    help="Source 1: explicit scores (negative numbers are values)."),
        list_option("--scales", metavar="C [C ...]",
                    help="Source 1: multipliers of the scores (default 1)."),
        value_option("--dim", metavar="D",
                     help="Source 1: d_k of the scores; multipliers come from --scalings."),
        list_option("--dims", metavar="D [D ...]",
                    help="Source 2: d_k of random queries and keys."),
        value_option("--d-model", metavar="N", help="Source 2: model width; with --heads."),
        value_option("--heads", metavar="H", help="Source 2: heads; d_k = d_model / heads."),
        list_option("--score-stds", metavar="S [S ...]",
                    help="Source 3: std s of iid N(0, s²) scores."),
        value_option("--margin", metavar="G",
                     help="Source 4: one key leads n − 1 tied keys by G, exactly (no draws)."),
        list_option("--keys", metavar="N [N ...]",
                    help="Sources 2-4: keys per row (default 10; 16 128 1024 for source 3)."),
        value_option("--trials", metavar="N",
                     help="Sources 2, 3: sequences / score rows per cell (default 2000)."),
        list_option("--scalings", metavar="RULE [RULE ...]",
                    help="none sqrt linear sqrt-half temperature:T power:P cosine[:TAU] "
                         "qknorm[:rms] softcap:C logn:S linear:C mup[:C] (default none sqrt)."),
        value_option("--distribution", metavar="LAW",
                     help="Source 2: normal | uniform | rademacher | sphere."),
        value_option("--mean", help="Source 2: mean of each component (default 0)."),
        value_option("--std", help="Source 2: std of each component (default 1)."),
        value_option("--correlation", metavar="R",
                     help="Source 2: corr(q_i, k_i) of a query and its own key (default 0)."),
        value_option("--mask", metavar="M", help="Source 2: none (default) | causal."),
        value_option("--additive", metavar="H",
                     help="Source 2: also additive scores vᵀtanh(W₁q + W₂k), hidden width H."),
        value_option("--se-tolerance", metavar="K",
                     help="Score-law checks pass when |z| ≤ K (default 4)."),
    ]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


@cli.command("softmax-sweep", cls=StudyCommand,
             short_help="Softmax weights and saturation as scores grow.")
@SPEC_ARG
@saturation_options
@value_option("--threshold", metavar="T",
              help="A row is saturated when its largest weight exceeds T (default 0.99).")
@common_options
def softmax_sweep(spec_path: Path | None, **kwargs: Any) -> int:
    """Softmax weights as scores grow: largest weight, entropy, saturation.

    Scores come from exactly one source: explicit scores times multipliers (--scores),
    random queries and keys under each scaling rule (--dims or --d-model/--heads), or
    random N(0, s²) scores (--score-stds).

    \b
    Examples:
      sdpa softmax-sweep --scores 1 0.5 0 -0.5 --scales 1 5 10 20 50
      sdpa softmax-sweep --dims 16 64 256 1024 --keys 10 --scalings none sqrt
      sdpa softmax-sweep --score-stds 0.5 1 2 4 8 --keys 16 1024 --format json
    """
    return _run("softmax-sweep", spec_path)


@cli.command("jacobian", cls=StudyCommand,
             short_help="Softmax Jacobian norms: where gradients vanish.")
@SPEC_ARG
@saturation_options
@list_option("--mark-dims", metavar="D [D ...]",
             help="Phase diagram: mark unscaled attention at s = √d (default 64 512).")
@common_options
def jacobian(spec_path: Path | None, **kwargs: Any) -> int:
    """The softmax Jacobian J = diag(p) − ppᵀ as scores grow: vanishing gradients.

    Same score sources as softmax-sweep. With --score-stds it also finds, per n, the spread
    s* where the mean ‖J‖_F peaks, beside √(2 ln n), and draws the phase diagram.

    \b
    Examples:
      sdpa jacobian --scores 1 0.5 0 -0.5 --scales 1 5 10 20
      sdpa jacobian --score-stds 0.25 0.5 1 2 4 8 16 --keys 16 128 1024 --trials 20000
      sdpa jacobian --dims 16 64 256 1024 --keys 10 --scalings none sqrt linear
    """
    return _run("jacobian", spec_path)


@cli.command("train", cls=StudyCommand,
             short_help="Train one attention head with and without scaling.")
@SPEC_ARG
@list_option("--dims", metavar="D [D ...]", help="d_k of the attention head (default 16 64 256).")
@list_option("--scalings", metavar="RULE [RULE ...]", help="Scaling rules (default none sqrt).")
@list_option("--optimisers", metavar="OPT [OPT ...]", help="sgd and/or adam (default both).")
@list_option("--learning-rates", metavar="LR [LR ...]",
             help="Rates for every optimiser given (default sgd 0.1, adam 0.003).")
@value_option("--seeds", metavar="N", help="Runs per configuration (default 3).")
@value_option("--steps", metavar="N", help="Optimiser steps per run (default 300).")
@value_option("--batch", metavar="N", help="Sequences per step (default 32).")
@value_option("--vocab", metavar="V", help="Vocabulary size; chance loss is ln V (default 16).")
@value_option("--pairs", metavar="P", help="Key–value pairs per sequence (default 8).")
@value_option("--d-model", metavar="N", help="Embedding width (default 64).")
@value_option("--embeddings", metavar="E", help="fixed (default) | learned.")
@value_option("--target-accuracy", metavar="A", help="Accuracy for steps-to-target (0.9).")
@value_option("--log-every", metavar="N", help="Steps per logged point (default 10).")
@value_option("--norm", metavar="NORM", help="none (one head, default) | post | pre: a stack.")
@value_option("--layers", metavar="L", help="Blocks of the stack, with --norm (default 1).")
@value_option("--mlp", metavar="BOOL", help="true: each block adds a ReLU MLP (default false).")
@common_options
def train(spec_path: Path | None, **kwargs: Any) -> int:
    """Train one attention head on associative recall, with and without scaling.

    Logs loss, accuracy, query-row entropy, largest |score| and ‖∂L/∂W_Q‖, ‖∂L/∂W_K‖; reports
    steps to the target accuracy per (d_k, rule, optimiser, rate), the learning-rate
    sensitivity of each rule, and the documents' claims about training beside the evidence.

    \b
    Examples:
      sdpa train --dims 16 256 --steps 300
      sdpa train experiments/train/train-scaled-vs-unscaled.yaml --format json
      sdpa train --optimisers sgd --learning-rates 0.1 0.3 1 --dims 64 --seeds 5
    """
    return _run("train", spec_path)


PATHS_ARG = click.argument("targets", metavar="[PATH ...]", nargs=-1,
                           type=click.Path(path_type=Path))


@cli.command("gradients", cls=StudyCommand,
             short_help="Gradients through one attention layer versus d_k.")
@SPEC_ARG
@list_option("--dims", metavar="D [D ...]", help="d_k values (default 16 64 256 1024).")
@value_option("--d-model", metavar="N", help="Width of X and of the weights' rows (default 64).")
@value_option("--keys", metavar="N", help="Sequence length n (default 16).")
@value_option("--d-v", metavar="N", help="Value width (default: d_v = d_k).")
@value_option("--trials", metavar="N", help="Independent draws per d_k (default 200).")
@list_option("--scalings", metavar="RULE [RULE ...]",
             help="none sqrt linear temperature:T power:P cosine[:TAU] … (default none sqrt "
                  "linear).")
@value_option("--init-std", metavar="S", help="σ_w: weights iid N(0, σ_w²/d_model) (default 1).")
@value_option("--alignment", metavar="A", help="W_K = A·W_Q + √(1−A²)·W', A in [0, 1] "
              "(default 0).")
@value_option("--causal", metavar="BOOL", help="true: query i sees keys 0…i (default false).")
@value_option("--se-tolerance", metavar="K", help="A check passes when |z| ≤ K (default 4).")
@common_options
def gradients(spec_path: Path | None, **kwargs: Any) -> int:
    """Gradients through one attention layer at initialisation, versus d_k, per rule.

    \b
    Examples:
      sdpa gradients --dims 16 64 256 1024 --scalings none sqrt linear
      sdpa gradients --dims 16 256 --alignment 0.7 --causal true --format json
      sdpa gradients experiments/gradients/gradients-aligned.yaml --trials 400 --check
    """
    return _run("gradients", spec_path)


@cli.command("depth", cls=StudyCommand,
             short_help="Gradients and token collapse through a stack of blocks.")
@SPEC_ARG
@list_option("--layers", metavar="L [L ...]", help="Stack depths (default 12; at most 256).")
@list_option("--dims", metavar="D [D ...]", help="d_k values (default 16 256).")
@list_option("--scalings", metavar="RULE [RULE ...]",
             help="none sqrt linear qknorm softcap:C … (default none sqrt linear).")
@list_option("--norms", metavar="NORM [NORM ...]", help="post and/or pre (default both).")
@value_option("--mlp", metavar="BOOL", help="true: each block adds a ReLU MLP (default false).")
@value_option("--d-model", metavar="N", help="Width of X and of W_V (default 64).")
@value_option("--keys", metavar="N", help="Tokens per sequence n (default 16).")
@value_option("--trials", metavar="N", help="Independent draws (default 20).")
@value_option("--init-std", metavar="S", help="σ_w: every W iid N(0, σ_w²/fan_in) (default 1).")
@value_option("--causal", metavar="BOOL", help="true: query i sees keys 0…i (default false).")
@value_option("--se-tolerance", metavar="K", help="Documented numbers match within K se.")
@common_options
def depth(spec_path: Path | None, **kwargs: Any) -> int:
    """Gradients and token similarity, block by block, through L attention blocks.

    Post-LN and Pre-LN blocks (LayerNorm without parameters), optional MLP, at
    initialisation: ‖∂L/∂W_Q‖, ‖∂L/∂W_K‖, ‖∂L/∂W_V‖, frozen rows and the mean cosine between
    tokens per block, per (L, d_k, rule, norm), on common random numbers.

    \b
    Examples:
      sdpa depth --layers 12 --dims 16 256 --scalings none sqrt linear
      sdpa depth experiments/depth/post-vs-pre.yaml --format json
      sdpa depth --layers 2 4 8 --norms pre --mlp true --trials 50
    """
    return _run("depth", spec_path)


@cli.command("run", cls=ValueCommand,
             short_help="Run every spec (default: experiments/) into outputs/.")
@PATHS_ARG
@batch_options
def run_cmd(targets: tuple[Path, ...], out: Path | None, check: bool, fail_fast: bool,
            fmt: str, no_plots: bool, svg: bool, quiet: bool, workers: int | None,
            dpi: int | None, scheduler: str | None, keyword: str | None, last_failed: bool,
            force: bool, **ci: Any) -> int:
    """Run every spec in the given files and folders (default: experiments/).

    Every spec is validated before anything runs; then each runs into DIR/<name>/, a failed
    spec does not stop the others, and DIR/index.md and DIR/report.html show them all.

    \b
    Examples:
      sdpa run
      sdpa run experiments/variance --check
      sdpa run --out /tmp/batch --workers 2 --fail-fast
    """
    from sdpa_cli import batch
    from sdpa_cli.options import default_workers
    from sdpa_cli.report import Settings

    settings = Settings(root=out or Path("outputs"), fmt=fmt, plots=not no_plots, svg=svg,
                        check=check, quiet=quiet, workers=workers or default_workers(), dpi=dpi,
                        scheduler=scheduler,
                        **ci_settings(ci, batch_folder=out or Path("outputs")))
    return batch.run_batch(list(targets), settings, fail_fast=fail_fast, keyword=keyword,
                           last_failed=last_failed, force=force)


@cli.command("compare", short_help="Compare two run folders or two batch folders.")
@click.argument("a", metavar="A", type=click.Path(path_type=Path))
@click.argument("b", metavar="B", type=click.Path(path_type=Path))
@click.option("--tolerance", type=click.FloatRange(0, min_open=True), default=4.0,
              show_default=True, metavar="K",
              help="Monte Carlo quantities agree when |A − B| ≤ K standard errors.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]),
              default="table", show_default=True,
              help="table: a summary on stderr; json/markdown: every quantity on stdout.")
@click.option("--exact", is_flag=True,
              help="Byte for byte instead: every file but the manifests must be identical.")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
def compare_cmd(a: Path, b: Path, tolerance: float, fmt: str, exact: bool,
                quiet: bool) -> int:
    """Compare two run folders (or two batch folders): parameters, quantities, figures.

    Exit 0 when every Monte Carlo quantity agrees within K standard errors and every
    deterministic one is equal (with --exact: every file is identical), 1 otherwise.

    \b
    Examples:
      sdpa compare outputs/day74-dims /tmp/other/day74-dims
      sdpa compare batch1 batch2 --exact
      sdpa compare old new --tolerance 3 --format markdown
    """
    from sdpa_cli import compare

    return compare.run(a, b, tolerance=tolerance, fmt=fmt, exact_mode=exact, quiet=quiet)


@cli.command("validate", cls=ValueCommand, short_help="Check specs without running anything.")
@PATHS_ARG
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when all is well.")
def validate_cmd(targets: tuple[Path, ...], quiet: bool) -> int:
    """Check specs without running anything (exit 2 and one line per problem if bad).

    \b
    Examples:
      sdpa validate
      sdpa validate my-notes.yaml experiments/variance
    """
    from sdpa_cli import batch

    return batch.run_validate(list(targets), quiet=quiet)


@cli.command("worked-example", cls=StudyCommand,
             short_help="Replay the documents' examples; audit their numbers.")
@click.argument("target", metavar="[NAME or SPEC]", required=False)
@click.option("--list", "list_", is_flag=True,
              help="List the examples (name, description, source) on stdout.")
@click.option("--all", "all_", is_flag=True,
              help="Run every example, each into its own run folder.")
@click.option("--expand", is_flag=True,
              help="Show every QKᵀ entry as its dot-product expansion (2×1 + 1×0 + 3×2 = 8).")
@common_options
def worked_example(target: str | None, list_: bool, all_: bool, expand: bool,
                   **kwargs: Any) -> int:
    """The documents' worked examples step by step, and an audit of their numbers.

    \b
    Examples:
      sdpa worked-example --list
      sdpa worked-example money-bank-grows --expand
      sdpa worked-example my-notes.yaml --check      exit 1 if a number disagrees
      sdpa worked-example --all --format json
    """
    from sdpa_cli import app

    ctx = click.get_current_context()
    overrides, flags = spec_overrides(ctx)
    if expand:  # --expand only ever turns expansions on; without it the spec's `expand:` stands
        overrides["expand"], flags["expand"] = True, "--expand"
    return app.worked_example(target, list_=list_, all_=all_, overrides=overrides,
                              flags=flags, settings=_settings(ctx))
