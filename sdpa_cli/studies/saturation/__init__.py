"""What softmax-sweep and jacobian share: the score sources, their cells, rows and figures."""

from typing import Any

from sdpa_cli.framework.declaration import Flag
from sdpa_cli.studies.saturation import cost

SAT = "sdpa_cli.studies.saturation."
# Figure.kind → renderer, for both studies (each draws the kinds its score source makes).
FIGURES: dict[str, str] = {
    "saturation.weights_by_scale": SAT + "saturation_figures:draw_weights_by_scale",
    "saturation.vs_dim": SAT + "saturation_figures:draw_vs_dim",
    "saturation.attention_picture": SAT + "saturation_figures:draw_attention_picture",
    "saturation.vs_std": SAT + "saturation_figures:draw_vs_std",
    "saturation.jacobian_vs_scale": SAT + "jacobian_figures:draw_jacobian_vs_scale",
    "saturation.jacobian_vs_dim": SAT + "jacobian_figures:draw_jacobian_vs_dim",
    "saturation.frobenius_vs_std": SAT + "jacobian_figures:draw_frobenius_vs_std",
    "saturation.phase_diagram": SAT + "jacobian_figures:draw_phase_diagram",
    "rules.leading_keys": SAT + "rules_figures:draw_leading_keys",
    "rules.rem_participation": SAT + "rules_figures:draw_rem_participation",
    "rules.vs_keys": SAT + "rules_figures:draw_vs_keys",
}
# How the score-source fields read as flags of both commands (the rest are derived).
METAVARS: dict[str, str] = {
    "scores": "Z [Z ...]", "scales": "C [C ...]", "dim": "D", "dims": "D [D ...]",
    "heads": "H", "score_stds": "S [S ...]", "margin": "G", "scalings": "RULE [RULE ...]",
    "distribution": "LAW", "correlation": "R", "mask": "M", "additive": "H", "se_tolerance": "K",
    "threshold": "T", "mark_dims": "D [D ...]",
}
# One small example of each score source (explicit, vectors, Gaussian, leading key), for both
# studies' contract tests.
EXAMPLES = ({"scores": [1.0, 0.5, 0.0, -0.5], "scales": [1.0, 5.0]},
            {"dims": [16, 64], "keys": [8], "trials": 60},
            {"score_stds": [0.5, 2.0], "keys": [16], "trials": 60},
            {"margin": 2.0, "keys": [4, 8], "dim": 16})
# What both declarations state alike: `Study(**SHARED, ...)` adds what is each one's own.
SHARED: dict[str, Any] = {"topic": "rules", "figures": FIGURES, "cost": cost.cost,
                          "examples": EXAMPLES}


def flags(without: str) -> dict[str, Flag]:
    """The score-source fields' flags, but the one field the command has none for."""
    return {k: Flag(v) for k, v in METAVARS.items() if k != without}
