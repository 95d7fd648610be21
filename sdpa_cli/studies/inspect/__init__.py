"""The inspect study: attention statistics of real checkpoints (safetensors, GGUF) on text."""

from sdpa_cli.framework.declaration import Flag, Study
from sdpa_cli.studies.inspect import inputs, rows, tiny
from sdpa_cli.studies.inspect.spec import InspectSpec

STUDY = Study(
    topic="inspect",
    spec=InspectSpec,
    rows=(rows.HeadRow, rows.LayerRow, rows.SummaryRow, rows.ResidualRow,
          rows.InterventionRow),
    figures={"inspect.heatmaps": "figures:draw_heatmaps", "inspect.pooled": "figures:draw_pooled",
             "inspect.entropy_vs_n": "figures:draw_entropy_vs_n",
             "inspect.picture": "figures:draw_picture",
             "inspect.head_types": "figures:draw_head_types",
             "inspect.scale_loss": "figures:draw_scale_loss"},
    cost=inputs.cost,
    examples=({"seq_len": [8, 16], "sequences": 2},
              {"seq_len": [12], "sequences": 2, "weights": "init", "scalings": ["none", "sqrt"]}),
    example_files=tiny.example_files,
    description=(
        "Attention statistics of a real checkpoint on real text, per layer and head.\n\n"
        "MODEL is a folder (config.json, model.safetensors, tokenizer.json), a GGUF file (or a "
        "folder holding one), a name in the local Hugging Face cache or Ollama store, or a "
        "spec (study: inspect). Never pickle, never the network."),
    usage=("sdpa inspect sentence-transformers/all-MiniLM-L6-v2 --seq-len 32 128 512",
           "sdpa inspect ./my-model --weights init --seed 1 --scalings none sqrt softcap:30",
           "sdpa inspect ./SmolLM2-135M-Instruct.Q4_1.gguf --seq-len 128",
           "sdpa inspect experiments/inspect/minilm.yaml --check"),
    flags={"seq_len": Flag("N [N ...]"), "sequences": Flag("K"), "weights": Flag("W"),
           "text": Flag("FILE [FILE ...]", repeat=True), "scalings": Flag("RULE [RULE ...]"),
           "dtype": Flag("T"), "se_tolerance": Flag("K"), "loss": Flag(switch=True),
           "scale_factors": Flag("F [F ...]"), "unscale_layers": Flag("L [L ...] or all")},
    no_flag=("model", "fetch"),  # the positional MODEL sets model; fetch is a spec's own
    target_field="model",
    target_metavar="MODEL or SPEC",
    check_target=inputs.check_model,
)
