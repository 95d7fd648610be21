"""The depth study: gradients and rank collapse through a stack of attention blocks."""

from sdpa_cli.framework.declaration import Flag, Rate, Study
from sdpa_cli.studies.depth.rows import DepthRow, StackRow
from sdpa_cli.studies.depth.spec import DepthSpec, cost

STUDY = Study(
    topic="depth",
    # fitted to its two shipped specs, each timed alone (the changelog has the runs)
    rate=Rate(2.3, 0.0),
    spec=DepthSpec,
    rows=(DepthRow, StackRow),
    figures={"depth.grad_wq": "figures:draw_grad_wq", "depth.cosine": "figures:draw_cosine",
             "depth.frozen": "figures:draw_frozen"},
    cost=cost,
    examples=({"layers": [1, 3], "dims": [4, 8], "d_model": 8, "keys": 5, "trials": 4},
              {"layers": [2], "dims": [4], "d_model": 8, "keys": 5, "trials": 4, "mlp": True,
               "causal": True, "norms": ["pre"], "scalings": ["qknorm", "softcap:5"]}),
    description="Gradients and token similarity, block by block, through L attention blocks "
                "(Post-LN or Pre-LN, LayerNorm without parameters, optional MLP) at "
                "initialisation: ‖∂L/∂W_Q‖, ‖∂L/∂W_K‖, ‖∂L/∂W_V‖, frozen rows and the mean "
                "cosine between tokens per block, per (L, d_k, rule, norm), on common random "
                "numbers.",
    usage=("sdpa depth --layers 12 --dims 16 256 --scalings none sqrt linear",
           "sdpa depth experiments/depth/post-vs-pre.yaml --format json",
           "sdpa depth --layers 2 4 8 --norms pre --mlp true --trials 50"),
    flags={"layers": Flag("L [L ...]"), "dims": Flag("D [D ...]"),
           "scalings": Flag("RULE [RULE ...]"), "norms": Flag("NORM [NORM ...]"),
           "init_std": Flag("S"), "se_tolerance": Flag("K")},
)
