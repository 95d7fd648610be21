"""Cells of a sweep and specs of a batch run together, with the same bytes; progress ticks."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import Counter, write_spec

from sdpa_cli import registry
from sdpa_cli.framework.context import RunContext
from sdpa_cli.numerics.blocks import Job, fold_blocks, fold_jobs
from sdpa_cli.report import writers
from sdpa_cli.report.progress import Progress
from sdpa_cli.runner import batch, executors
from sdpa_cli.runner import loader as spec_mod


def _square(b: int) -> float:
    return (b + 0.1) ** 0.5


def _sum(acc: float, x: float) -> float:
    return acc + x  # floating-point: the order of the fold shows in the last digits


def _jobs() -> list[Job[float, float]]:
    return [Job(n, _square, _sum, float(k)) for k, n in enumerate([1, 37, 0, 5, 120])]


def _alone() -> list[float]:
    return [fold_blocks(j.n_blocks, j.work, j.fold, j.initial) for j in _jobs()]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_jobs_sharing_a_window_fold_as_each_alone(workers):
    tick = Counter()
    assert fold_jobs(_jobs(), workers, tick=tick) == _alone()
    assert tick.planned == tick.done == 163


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
def test_jobs_on_the_cluster_fold_as_each_alone(cluster):
    tick = Counter()
    assert fold_jobs(_jobs(), 1, cluster, tick) == _alone()
    assert tick.planned == tick.done == 163


def _study(study: str, ctx: RunContext, **overrides: Any) -> str:
    spec = spec_mod.load(None, study=study, overrides=overrides)
    return writers.results_json(registry.get(study).run(spec, ctx))


SWEEPS = [  # several cells each; the jacobian phase diagram also refines s* per n as tasks
    ("jacobian", dict(score_stds=[0.5, 1, 2, 4, 8], keys=[4, 64, 512], trials=200, seed=7)),
    ("jacobian", dict(dims=[8, 32], keys=[4, 16], trials=60, seed=5, additive=4)),
    ("softmax-sweep", dict(score_stds=[0.5, 2, 8], keys=[8, 128], trials=150, seed=3)),
    ("softmax-sweep", dict(dims=[16, 64], keys=[8], trials=80, seed=2, additive=3,
                           scalings=["sqrt", "cosine:0.1"])),
]


@pytest.mark.parametrize("study, overrides", SWEEPS)
def test_sweep_cells_together_change_no_digit(study, overrides):
    tick = Counter()
    serial = _study(study, RunContext(workers=1), **overrides)
    assert _study(study, RunContext(workers=2, tick=tick), **overrides) == serial
    assert tick.planned == tick.done >= len(overrides["keys"])


@pytest.mark.parametrize("study, overrides", SWEEPS[::2])
def test_sweep_cells_on_the_cluster_change_no_digit(cluster, study, overrides):
    assert _study(study, RunContext(executor=cluster), **overrides) == \
        _study(study, RunContext(workers=2), **overrides)


# --- sdpa run: specs computed ahead with a cluster, written in order -------------------------


SPECS = {
    "a-phase.yaml": "study: jacobian\nseed: 3\nscore_stds: [0.5, 2, 8]\nkeys: [4, 64]\n"
                    "trials: 120\n",
    "b-variance.yaml": "study: variance\nseed: 4\ndims: [3, 100]\npairs: 3000\n",
    "c-sweep.yaml": "study: softmax-sweep\nseed: 5\ndims: [16]\nkeys: [8]\ntrials: 60\n",
}


def _batch(folder: Path) -> Path:
    folder.mkdir()
    for name, text in SPECS.items():
        write_spec(folder, name, text)
    return folder


def _documents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in {"manifest.json", "report.html", "index.md",
                                              "sdpa-batch.json"}}


def test_a_batch_on_the_cluster_writes_the_bytes_of_a_threads_batch(cluster, sdpa, workdir,
                                                                     monkeypatch):
    monkeypatch.setenv("DASK_LOGGING__DISTRIBUTED", "error")
    specs = _batch(workdir / "specs")
    local = sdpa("run", specs, "--out", "local", "--workers", "2", "--no-plots")
    remote = sdpa("run", specs, "--out", "remote", "--no-plots",
                  "--scheduler", cluster._client.scheduler.address)
    assert (local.code, remote.code) == (0, 0), remote.err
    assert _documents(workdir / "remote") == _documents(workdir / "local")
    assert len(_documents(workdir / "local")) >= 3 * 4


def _fake_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread pool stands in for a cluster's executor (no Dask needed)."""

    @contextmanager
    def session(settings):
        with ThreadPoolExecutor(2) as pool:
            yield dataclasses.replace(settings, executor=pool)

    monkeypatch.setattr(executors, "resolve", lambda flag, environ=None: object())
    monkeypatch.setattr(executors, "session", session)


def test_with_an_executor_specs_compute_at_once_and_are_written_in_order(sdpa, workdir,
                                                                         monkeypatch):
    # Two specs must be computing at the same moment, or the barrier breaks (an error
    # outcome); folders must still be written in the planned order, by this thread.
    barrier = threading.Barrier(2, timeout=20)
    compute = batch.compute
    written: list[str] = []

    def meeting(p, settings):
        if p.spec.study == "variance" or p.file.name.startswith("a-"):
            barrier.wait()
        return compute(p, settings)

    write_run = batch.report.write_run

    def recording(result, settings, **kw):
        assert threading.current_thread() is threading.main_thread()
        written.append(kw["target"].name)
        return write_run(result, settings, **kw)

    monkeypatch.setattr(batch, "compute", meeting)
    monkeypatch.setattr(batch.report, "write_run", recording)
    _fake_cluster(monkeypatch)
    r = sdpa("run", _batch(workdir / "specs"), "--out", "out", "--no-plots")
    assert r.code == 0, r.err
    assert written == ["a-phase", "b-variance", "c-sweep"]


def test_fail_fast_with_an_executor_does_not_wait_for_specs_still_computing(sdpa, workdir,
                                                                         monkeypatch):
    release = threading.Event()
    compute = batch.compute

    def stuck(p, settings):
        if p.file.name.startswith("a-"):
            raise RuntimeError("broken")
        release.wait(30)  # computing when the batch stops: abandoned, never written
        return compute(p, settings)

    monkeypatch.setattr(batch, "compute", stuck)
    _fake_cluster(monkeypatch)
    began = time.monotonic()
    r = sdpa("run", _batch(workdir / "specs"), "--out", "out", "--no-plots", "--fail-fast")
    release.set()
    assert r.code == 1 and time.monotonic() - began < 15, r.err
    assert sorted(p.name for p in (workdir / "out").iterdir() if p.is_dir()) == []


# --- progress: on a terminal only -------------------------------------------------------------


def test_the_progress_bar_counts_blocks_only_when_live(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with Progress(1) as live:
        assert live.live and live.bar is not None and live.blocks is not None
        threads = [threading.Thread(target=live.tick, args=(3, 0)) for _ in range(4)]
        threads += [threading.Thread(target=live.tick, args=(0, 2)) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        task = live.bar.tasks[live.blocks]
        assert (task.total, task.completed, task.visible) == (12, 10, True)
    with Progress(1, quiet=True) as quiet:
        quiet.tick(3, 1)  # nothing to draw: no bar
        assert quiet.bar is None


def test_run_planned_feeds_ticks_only_to_a_live_bar(sdpa, workdir, monkeypatch):
    seen: list[Any] = []
    compute = batch.compute

    def spy(p, settings):
        seen.append(settings.tick)
        return compute(p, settings)

    monkeypatch.setattr(batch, "compute", spy)
    r = sdpa("run", _batch(workdir / "specs"), "--out", "out", "--no-plots")
    assert r.code == 0 and seen == [None, None, None]  # captured stderr: not a terminal


def test_keep_freed_memory_defers_to_the_users_malloc_settings(monkeypatch):
    from sdpa_cli import process

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    assert process.keep_freed_memory() is False
    for name in process.HEAP_ENVIRON:  # (Dask's import may have set them in this process)
        monkeypatch.delenv(name, raising=False)
    assert process.keep_freed_memory() is (sys.platform == "linux")  # glibc here
