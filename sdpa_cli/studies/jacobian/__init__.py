"""The jacobian study: the softmax Jacobian diag(p) − ppᵀ as scores grow."""

from sdpa_cli.framework.declaration import Rate, Study
from sdpa_cli.studies.jacobian import peaks
from sdpa_cli.studies.saturation import SHARED, derived, flags, saturation_rows
from sdpa_cli.studies.saturation.spec import JacobianSpec

STUDY = Study(
    **SHARED,
    # fitted to four timed batches of the shipped specs (the changelog has them)
    rate=Rate(0.4, 2.0, extra=peaks.search_seconds),
    spec=JacobianSpec,
    rows=saturation_rows.JACOBIAN_ROWS,
    derived=derived.JACOBIAN,
    description=(
        "The softmax Jacobian J = diag(p) − ppᵀ as scores grow: vanishing gradients.\n\n"
        "Same score sources as softmax-sweep. With --score-stds it also finds, per n, the "
        "spread s* where the mean ‖J‖_F peaks, beside √(2 ln n), and draws the phase diagram."),
    usage=("sdpa jacobian --scores 1 0.5 0 -0.5 --scales 1 5 10 20",
           "sdpa jacobian --score-stds 0.25 0.5 1 2 4 8 16 --keys 16 128 1024 --trials 20000",
           "sdpa jacobian --dims 16 64 256 1024 --keys 10 --scalings none sqrt linear"),
    flags=flags(without="threshold"),
    no_flag=("refine_peak",),
)
