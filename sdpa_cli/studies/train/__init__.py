"""The train study: one attention head trained on associative recall, per scaling rule."""

from sdpa_cli.framework.declaration import Flag, Rate, Study
from sdpa_cli.studies.train import rows
from sdpa_cli.studies.train.spec import TrainSpec, limits

STUDY = Study(
    topic="train",
    # fitted to four timed batches of the shipped specs (the changelog has them)
    rate=Rate(1.5, 0.056),
    spec=TrainSpec,
    rows=(rows.TrainRow, rows.SensitivityRow, rows.ClaimRow, rows.RobustnessRow),
    figures={"train.loss_curves": "figures:draw_loss_curves", "train.traces": "figures:draw_traces",
             "train.loss_vs_lr": "figures:draw_loss_vs_lr"},
    cost=limits,
    examples=({"dims": [8], "steps": 10, "seeds": 2, "batch": 8, "vocab": 4, "pairs": 2,
               "d_model": 8, "log_every": 5, "learning_rates": {"sgd": [0.1], "adam": [0.01]}},),
    description=(
        "Train one attention head on associative recall, with and without scaling.\n\n"
        "Logs loss, accuracy, query-row entropy, largest |score| and ‖∂L/∂W_Q‖, ‖∂L/∂W_K‖; "
        "reports steps to the target accuracy per (d_k, rule, optimiser, rate), the "
        "learning-rate sensitivity of each rule, and the documents' claims about training "
        "beside the evidence."),
    usage=("sdpa train --dims 16 256 --steps 300",
           "sdpa train experiments/train/train-scaled-vs-unscaled.yaml --format json",
           "sdpa train --optimisers sgd --learning-rates 0.1 0.3 1 --dims 64 --seeds 5"),
    flags={"dims": Flag("D [D ...]"), "scalings": Flag("RULE [RULE ...]"),
           "optimisers": Flag("OPT [OPT ...]"), "learning_rates": Flag("LR [LR ...]"),
           "vocab": Flag("V"), "pairs": Flag("P"), "embeddings": Flag("E"),
           "target_accuracy": Flag("A")},
)
