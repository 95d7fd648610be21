"""Shared fixtures: run sdpa in-process in a scratch folder and capture what it prints."""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# As sdpa's main() does for users: one BLAS thread, set before NumPy loads. In-process runs
# skip main(), and on a busy 2-core machine threaded BLAS makes small matrix products ~50×
# slower (the gradients study is mostly such products).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from sdpa_cli import registry  # noqa: E402
from sdpa_cli.cli.entry import run  # noqa: E402 - after the BLAS setting above
from sdpa_cli.framework.declaration import DeclarationError  # noqa: E402
from sdpa_cli.runner import executors, loader  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# The quick tier's budget (75 s on 2 cores): its heaviest tests, 2 s or more each on an idle
# machine (pytest --durations), run in the slow tier, which .ci/run runs in full. Each is one
# of several tests of the same behaviour; the quick tier keeps a cheaper one.
HEAVY = {
    "test_cli_saturation.py::test_each_source_draws_its_figures",
    "test_input_properties.py::test_random_yaml_documents",
    "test_figures.py::test_versus_keys_figure_is_log_log_with_every_rule",
    "test_faults_2.py::test_symlinked_run_folder_keeps_its_link_and_leaves_nothing",
    "test_cells.py::test_jobs_on_the_cluster_fold_as_each_alone",
    "test_faults_2.py::test_an_ascii_terminal_gets_ascii_spellings",
    "test_train.py::test_lr_sweep_figures_show_what_they_say",
    "test_extremes.py::test_random_vectors_with_huge_components",
    "test_batch.py::test_report_links_its_figures_and_is_complete",
    "test_gradients_study.py::test_study_agrees_with_a_plain_loop_model",
    "test_gauss_slopes.py::test_moments_against_30_digits_at_two_keys",
    "test_figures.py::test_dpi_scales_the_png_and_default_stays_screen_sized",
    "test_extremes.py::test_tiny_and_huge_std",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = f"{item.path.name}::{item.originalname}"  # type: ignore[attr-defined]
        if name in HEAVY:
            item.add_marker(pytest.mark.slow)


EXPERIMENTS = ROOT / "experiments"


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh current folder, so outputs/ lands in tmp and never in the checkout."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


@pytest.fixture
def sdpa(workdir: Path, capsys: pytest.CaptureFixture[str]):
    """sdpa("variance", "--dims", "3") -> Outcome(code, stdout, stderr), in-process."""

    def call(*args: str) -> Outcome:
        capsys.readouterr()
        code = run([str(a) for a in args])
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return call


def write_spec(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# The quick tier runs these shipped specs through the per-spec tests (one or two per study and
# figure kind); the rest run in the slow tier (`pytest -m slow`, which .ci/run runs).
# A shipped spec whose estimated work is above this (about a second) runs in the slow tier
# only; its study is still in the quick tier through its declared examples (test_contract).
QUICK_WORK = 10**9


def _cheapest_of_each_study(folder: Path = EXPERIMENTS) -> dict[str, Path]:
    """Study → the shipped spec that its own cost estimate calls cheapest, if it is quick: the
    quick tier runs those, the slow tier every shipped spec (a new study's specs are picked up
    with no list to keep). A study whose declaration is broken has none here: its own
    contract tests say what is wrong, and every other test still runs."""
    best: dict[str, tuple[int, Path]] = {}
    for path in sorted(folder.glob("*/*.yaml")):
        try:
            s = loader.load(path)
            work = registry.get(s.study).cost(s).work
        except DeclarationError:
            continue
        if work <= QUICK_WORK and (s.study not in best or work < best[s.study][0]):
            best[s.study] = (work, path)
    return {study: path for study, (_, path) in best.items()}


QUICK_SPEC = _cheapest_of_each_study()
REPRESENTATIVE = frozenset(p.stem for p in QUICK_SPEC.values())


# The example index of a study whose declaration is broken: its tests fail with its error.
BROKEN = -1


def study_examples() -> list:
    """(study, example index) of every example every registered study declares; a study
    whose declaration is broken gives one case, (study, BROKEN), so that each of its tests
    fails with its own error while the other studies' pass (the contract is per study)."""
    out = []
    for name in registry.NAMES:
        try:
            count = len(registry.get(name).examples)
        except DeclarationError:
            out.append(pytest.param(name, BROKEN, id=f"{name}-declaration"))
            continue
        out.extend(pytest.param(name, i, id=f"{name}-{i}") for i in range(count))
    return out


def example_spec(name: str, i: int, seed: int = 11):
    """A study's i-th declared example as a loaded spec (validated, cost-guarded); the files
    a study's examples need (inspect's checkpoint) are written once per session. A broken
    study raises its DeclarationError here."""
    study = registry.get(name)
    files = _example_files(name) if study.example_files is not None else {}
    return loader.load(None, study=name, overrides={"seed": seed + i, **files,
                                                    **study.examples[i]})


@functools.cache
def _example_files(name: str) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"sdpa-example-{name}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return dict(registry.get(name).example_files(folder))


def per_spec(paths: list[Path]) -> list:
    """Shipped spec paths as parameters: representative ones quick, the others slow."""
    return [p if p.stem in REPRESENTATIVE else pytest.param(p, marks=pytest.mark.slow)
            for p in paths]


@pytest.fixture(scope="session")
def cluster() -> Iterator[executors.ClusterExecutor]:
    """One LocalCluster of 2 worker processes for the whole session (it takes seconds)."""
    if not executors.dask_installed():
        pytest.skip("dask[distributed] is not installed (sdpa[dask])")
    from distributed import Client, LocalCluster

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASK_LOGGING__DISTRIBUTED", "error")
        executors.keep_heap()
        lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=":0", silence_logs=logging.CRITICAL)
        client = Client(lc)
        try:
            yield executors.ClusterExecutor(client, lc.scheduler_address)
        finally:
            client.close()
            lc.close()


class Counter:
    """A thread-safe progress tick for tests: blocks planned and completed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.planned = self.done = 0

    def __call__(self, planned: int, done: int) -> None:
        with self.lock:
            self.planned += planned
            self.done += done
