"""Benchmark (not a test): sdpa inspect's NumPy forward against transformers' eager forward.

    HF_HOME=… SDPA_TORCH_PYTHON=… python tests/bench_inspect.py [THREADS [MODEL]]

MODEL (a name in the HF cache; default sentence-transformers/all-MiniLM-L6-v2), 8 sequences
× 128 tokens of the text the shipped spec reads (experiments/inspect/minilm-text.txt),
float32, the same thread count for NumPy's BLAS and torch. Prints the best of 5 timings of
each (transformers' only with SDPA_TORCH_PYTHON set), their ratio, and sdpa's peak RSS
against the size of the weights file, all from this one run.
"""

from __future__ import annotations

import os
import sys

THREADS = sys.argv[1] if len(sys.argv) > 1 else "1"
MODEL = sys.argv[2] if len(sys.argv) > 2 else "sentence-transformers/all-MiniLM-L6-v2"
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = THREADS  # before NumPy loads

import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from sdpa_cli.studies.inspect.checkpoint import Weights, find, open_checkpoint  # noqa: E402
from sdpa_cli.studies.inspect.text import chunks, load_tokenizer  # noqa: E402

REPEATS = 5
TEXT = Path(__file__).resolve().parent.parent / "experiments" / "inspect" / "minilm-text.txt"
TORCH = """
import sys, time, json, numpy as np, torch
from transformers import AutoModel
torch.set_num_threads(int(sys.argv[3]))
model = AutoModel.from_pretrained(sys.argv[1], attn_implementation="eager").eval()
ids = torch.from_numpy(np.load(sys.argv[2], allow_pickle=False))
best = float("inf")
with torch.no_grad():
    for _ in range(int(sys.argv[4])):
        t = time.perf_counter(); model(ids, output_attentions=True)
        best = min(best, time.perf_counter() - t)
print(json.dumps({"seconds": best}))
"""


def main() -> None:
    folder, _ = find(MODEL)
    if folder is None:
        sys.exit(f"{MODEL} is not in the Hugging Face cache (MiniLM: see tests/fetch_minilm.py)")
    ckpt = open_checkpoint(folder)
    tok = load_tokenizer(ckpt.tokenizer)
    ids = chunks(tok, tok.body(TEXT.read_text(encoding="utf-8")), 128, 8, TEXT.name)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # interpreter, libraries
    best = float("inf")
    for _ in range(REPEATS):
        t = time.perf_counter()
        weights = Weights(ckpt)
        for _layer in ckpt.family.forward(ckpt.config, weights, ids, np.float32):
            pass
        weights.close()
        best = min(best, time.perf_counter() - t)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    size = sum(f.stat().st_size for f in ckpt.files)
    out = {"threads": int(THREADS), "sdpa_seconds": best, "peak_rss_mb": rss / 2**20,
           "rss_before_forward_mb": before / 2**20,
           "forward_rss_over_weights": (rss - before) / size,
           "weights_mb": size / 2**20, "rss_over_weights": rss / size}
    torch_py = os.environ.get("SDPA_TORCH_PYTHON")
    if torch_py:
        with tempfile.TemporaryDirectory() as tmp:
            np.save(Path(tmp) / "ids.npy", ids, allow_pickle=False)
            done = subprocess.run([torch_py, "-c", TORCH, str(folder), str(Path(tmp) / "ids.npy"),
                                   THREADS, str(REPEATS)], capture_output=True, text=True,
                                  check=True)
        out["torch_seconds"] = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
        out["sdpa_over_torch"] = best / out["torch_seconds"]
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()},
                     indent=1))


if __name__ == "__main__":
    main()
