"""The softmax-sweep study: softmax weights as scores grow (largest weight, entropy)."""

from sdpa_cli.framework.declaration import Rate, Study
from sdpa_cli.studies.saturation import SHARED, derived, flags, saturation_rows
from sdpa_cli.studies.saturation.spec import SoftmaxSweepSpec

STUDY = Study(
    **SHARED,
    # fitted to four timed batches of the shipped specs (the changelog has them)
    rate=Rate(0.3, 3.6),
    spec=SoftmaxSweepSpec,
    rows=saturation_rows.SWEEP_ROWS,
    derived=derived.SWEEP,
    description=(
        "Softmax weights as scores grow: largest weight, entropy, saturation.\n\n"
        "Scores come from exactly one source: explicit scores times multipliers (--scores), "
        "random queries and keys under each scaling rule (--dims or --d-model/--heads), or "
        "random N(0, s²) scores (--score-stds)."),
    usage=("sdpa softmax-sweep --scores 1 0.5 0 -0.5 --scales 1 5 10 20 50",
           "sdpa softmax-sweep --dims 16 64 256 1024 --keys 10 --scalings none sqrt",
           "sdpa softmax-sweep --score-stds 0.5 1 2 4 8 --keys 16 1024 --format json"),
    flags=flags(without="mark_dims"),
)
