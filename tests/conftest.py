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


OK = "study: variance\ndims: [4, 16]\npairs: 200\nseed: {seed}\n"
FAILING = "study: variance\ndims: [4]\npairs: 200\nseed: 1\nse_tolerance: 0.001\n"


@pytest.fixture
def specs(workdir: Path) -> Path:
    """A batch folder of three specs: a-ok and c-ok pass, b-failing's standard-error check
    fails (its tolerance is far below what 200 pairs give). A module that needs another
    member overrides this fixture and edits the folder."""
    folder = workdir / "specs"
    folder.mkdir()
    write_spec(folder, "a-ok.yaml", OK.format(seed=1))
    write_spec(folder, "b-failing.yaml", FAILING)
    write_spec(folder, "c-ok.yaml", OK.format(seed=2))
    return folder


TINY_RUN = ("--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q")


@pytest.fixture(scope="session")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What sdpa wrote, for tests that damage or plant its files: a run folder R (variance),
    and a batch folder B of specs/one.yaml, whose check fails. Shared by the session: a test
    copies what it changes."""
    root = tmp_path_factory.mktemp("written")
    (root / "specs").mkdir()
    write_spec(root / "specs", "one.yaml", "study: variance\ndims: [4]\npairs: 100\nseed: 1\n"
               "se_tolerance: 0.001\n")
    assert run(["variance", *TINY_RUN, "--out", str(root / "R")]) == 0
    assert run(["run", str(root / "specs"), "--out", str(root / "B"), "--no-plots", "-q",
                "--check"]) == 1
    return root


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
