"""inspect's BLAS threads: the statistics' small products on one thread whatever BLAS was set
to before the run (the environment), the forward's large ones on --workers, and the numbers
the same for any --workers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("threadpoolctl")

import inspect_fixtures as fx
import threadpoolctl

from sdpa_cli.cli.entry import run as cli
from sdpa_cli.studies.inspect.models import common, rowstats
from sdpa_cli.studies.inspect.models.threads import blas_threads


def _blas() -> int:
    return int(threadpoolctl.threadpool_info()[0]["num_threads"])


def _run(where: Path, workers: int) -> dict:
    code = cli(["inspect", str(where / "m"), "--text", str(where / "t.txt"), "--seq-len", "16",
                "--sequences", "2", "--no-plots", "-q", "--workers", str(workers), "--out",
                str(where / f"o{workers}")])
    assert code == 0
    doc: dict = json.loads((where / f"o{workers}" / "results.json").read_text(encoding="utf-8"))
    return doc


def test_statistics_run_on_one_blas_thread_and_the_forward_on_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = fx.llama(tmp_path / "m", seed=2)
    fx.write_tokenizer(folder, "llama")
    (tmp_path / "t.txt").write_text(fx.text(300), encoding="utf-8")
    seen: dict[str, set[int]] = {"stats": set(), "forward": set()}
    scores, matmul_t = rowstats._scores, common.matmul_t

    def spy_scores(*a, **k):  # type: ignore[no-untyped-def]
        seen["stats"].add(_blas())
        return scores(*a, **k)

    def spy_matmul(*a, **k):  # type: ignore[no-untyped-def]
        seen["forward"].add(_blas())
        return matmul_t(*a, **k)

    monkeypatch.setattr(rowstats, "_scores", spy_scores)
    monkeypatch.setattr(common, "matmul_t", spy_matmul)
    from sdpa_cli.studies.inspect.models import decoder
    monkeypatch.setattr(decoder, "matmul_t", spy_matmul)
    with blas_threads(3):  # as OPENBLAS_NUM_THREADS=3 in the environment would leave it
        two = _run(tmp_path, 2)
        assert _blas() == 3  # given back as it was
    assert seen == {"stats": {1}, "forward": {2}}
    one = _run(tmp_path, 1)
    assert one["rows"] == two["rows"] and one["tables"] == two["tables"]


def test_attention_at_short_length_runs_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch):
    """Gemma 3's heads (d_k = 256) at n = 128 are products of 2^22 multiply-adds: on a busy
    2-core machine a second BLAS thread made each cost about 60 times the CPU of one, and a
    --workers 2 run of the Gemma 3 spec twice the CPU and wall of --workers 1."""
    seen: set[int] = set()
    matmul = np.matmul

    class Spy:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(np, name)

        @staticmethod
        def matmul(*a, **k):  # type: ignore[no-untyped-def]
            seen.add(_blas())
            return matmul(*a, **k)

    monkeypatch.setattr(common, "np", Spy())
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 4, 128, 256), dtype=np.float32) for _ in range(3))
    with blas_threads(2):
        common.attend(q, k, v, 1 / 16, causal=True)
    assert seen == {1}
