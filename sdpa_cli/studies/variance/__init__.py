"""The variance study: Monte Carlo of q·k versus dimension, raw and scaled, beside theory."""

from sdpa_cli.framework.declaration import Flag, Rate, Study
from sdpa_cli.studies.variance import cost, derived, rows
from sdpa_cli.studies.variance.spec import VarianceSpec

STUDY = Study(
    topic="theory",
    # fitted to four timed batches of the shipped specs (the changelog has them)
    rate=Rate(0.3, 13.0),
    spec=VarianceSpec,
    rows=(rows.VarianceRow, rows.HalfRow),
    figures={"variance.histograms": "figures:draw_histograms",
             "variance.vs_dim": "figures:draw_vs_dim"},
    cost=cost.cost,
    derived=derived.DERIVED,
    examples=({"dims": [3, 64], "pairs": 2000},
              {"dims": [8], "pairs": 500, "distribution": "sphere", "method": "exact"}),
    description="Monte Carlo of q·k versus dimension, raw and scaled, beside its theory.",
    usage=("sdpa variance --dims 3 100 1000",
           "sdpa variance --dims 16 64 256 512 1024 --pairs 10000 --format json",
           "sdpa variance experiments/variance/day74-dims.yaml --pairs 5000 --check"),
    flags={"dims": Flag("D [D ...]"), "pairs": Flag("N"), "distribution": Flag("LAW"),
           "correlation": Flag("R"), "scalings": Flag("RULE [RULE ...]"), "method": Flag("M"),
           "bins": Flag("N"), "se_tolerance": Flag("K"), "d_model": Flag("N"),
           "heads": Flag("H")},
)
