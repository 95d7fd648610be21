"""The gradients study: gradients through one attention layer at initialisation, per rule."""

from sdpa_cli.framework.declaration import Flag, Rate, Study
from sdpa_cli.studies.gradients import run, theory
from sdpa_cli.studies.gradients.spec import GradientsSpec, cost

STUDY = Study(
    topic="gradients",
    # fitted to four timed batches of the shipped specs (the changelog has them)
    rate=Rate(0.1, 0.62),
    spec=GradientsSpec,
    rows=(run.GradientRow, theory.SlopeRow),
    figures={"gradients.norms": "figures:draw_norms", "gradients.frozen": "figures:draw_frozen"},
    cost=cost,
    examples=({"dims": [16, 64], "trials": 20, "keys": 8, "d_model": 32},),
    description="Gradients through one attention layer at initialisation, versus d_k, per rule.",
    usage=("sdpa gradients --dims 16 64 256 1024 --scalings none sqrt linear",
           "sdpa gradients --dims 16 256 --alignment 0.7 --causal true --format json",
           "sdpa gradients experiments/gradients/gradients-aligned.yaml --trials 400 --check"),
    flags={"dims": Flag("D [D ...]"), "scalings": Flag("RULE [RULE ...]"),
           "init_std": Flag("S"), "alignment": Flag("A"), "se_tolerance": Flag("K")},
)
