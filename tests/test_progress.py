"""Progress of single study commands (the blocks bar, on a terminal only), the studies' ticks,
and the batch report after a lost scheduler."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import write_spec
from test_cells import SPECS, Counter

from sdpa_cli import registry, report
from sdpa_cli.errors import SchedulerLost
from sdpa_cli.framework.context import RunContext
from sdpa_cli.report import batch as batch_report
from sdpa_cli.report import collect
from sdpa_cli.report.progress import Progress
from sdpa_cli.runner import batch
from sdpa_cli.runner import loader as spec_mod
from sdpa_cli.studies.train import run as train

VARIANCE = ("variance", "--dims", "3", "16", "--pairs", "3000", "--seed", "5", "--no-plots")


class Watch:
    """Every Progress made, and every tick it counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[Progress] = []
        self.ticks: list[tuple[int, int]] = []
        init, tick = Progress.__init__, Progress.tick
        watch = self

        def spy_init(self: Progress, *a: Any, **kw: Any) -> None:
            init(self, *a, **kw)
            watch.made.append(self)

        def spy_tick(self: Progress, planned: int, done: int) -> None:
            watch.ticks.append((planned, done))
            tick(self, planned, done)

        monkeypatch.setattr(Progress, "__init__", spy_init)
        monkeypatch.setattr(Progress, "tick", spy_tick)


def test_a_study_command_on_a_terminal_counts_its_blocks_and_clears_the_bar(
        sdpa, monkeypatch):
    watch = Watch(monkeypatch)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    r = sdpa(*VARIANCE, "--out", "v")
    assert r.code == 0 and "Dot-product variance" in r.out and "blocks" not in r.out
    (bar,) = watch.made
    assert bar.live and bar.task is None  # the blocks bar alone: no specs bar
    planned = sum(p for p, _ in watch.ticks)
    assert planned > 0 and sum(d for _, d in watch.ticks) == planned
    # the bar is progress: on stderr, never in the result on stdout
    assert "variance variance: blocks" in r.err


@pytest.mark.parametrize("extra", [(), ("-q",), ("--format", "json"), ("--format", "csv"),
                                   ("--format", "markdown")])
def test_no_bar_and_no_tick_off_a_terminal_with_q_or_a_document(sdpa, monkeypatch, extra):
    if extra:  # a terminal, but -q or a document on stdout: nothing drawn
        monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    seen: list[Any] = []
    context = report.context

    def spy(settings: report.Settings) -> RunContext:
        seen.append(settings.tick)
        return context(settings)

    monkeypatch.setattr(report, "context", spy)
    plain = sdpa(*VARIANCE, "--out", "plain", *extra)
    assert plain.code == 0 and seen == [None]
    assert "blocks" not in plain.err and "\x1b" not in plain.out


def test_the_bar_changes_no_byte_of_the_document(sdpa, monkeypatch):
    plain = sdpa(*VARIANCE, "--out", "a", "--format", "json")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    live = sdpa(*VARIANCE, "--out", "b")
    assert (plain.code, live.code) == (0, 0)
    assert Path("b/results.json").read_text() == plain.out == Path("a/results.json").read_text()


# Every study ticks every task it plans, with the same digits: tests/test_contract.py.


def test_training_runs_on_an_executor_tick_as_they_complete():
    spec = spec_mod.load(None, study="train", overrides=dict(
        dims=[8], steps=10, seeds=2, batch=8, vocab=4, pairs=2, d_model=8, seed=4,
        learning_rates={"sgd": [0.1], "adam": [0.01]}))
    counter = Counter()
    with ThreadPoolExecutor(2) as pool:  # a cluster's executor: one task per training run
        ticked = registry.get("train").run(spec, RunContext(executor=pool, tick=counter))
    # one tick per training run: 2 seeds each, and each configuration's robustness rerun
    runs = len(train.configs(spec)) * (2 + 1)
    assert (counter.planned, counter.done) == (runs, runs) and runs >= 4
    assert ticked.to_json() == registry.get("train").run(spec, RunContext()).to_json()


# --- a lost scheduler mid-batch: the index describes the folders on disk -------------------


def _specs(folder: Path) -> Path:
    folder.mkdir()
    for name, text in SPECS.items():
        write_spec(folder, name, text)
    return folder


def test_a_lost_scheduler_mid_batch_rebuilds_the_index_from_the_folders(sdpa, workdir,
                                                                         monkeypatch):
    specs = _specs(workdir / "specs")
    first = sdpa("run", specs, "--out", "out", "--no-plots")
    assert first.code == 0, first.err
    out = workdir / "out"
    names = sorted(p.name for p in out.iterdir() if collect.is_run_folder(p))
    assert len(names) >= 2
    before = (out / "index.md").read_text()
    for path in specs.iterdir():  # every spec changes its seed: each must be computed again
        path.write_text(path.read_text().replace("seed: ", "seed: 1"))
    compute, calls = batch.compute, []

    def lose_at_second(p: Any, settings: Any) -> Any:
        calls.append(p)
        if len(calls) == 2:
            raise SchedulerLost("lost the Dask scheduler tcp://x:1 mid-run; this run stopped")
        return compute(p, settings)

    monkeypatch.setattr(batch, "compute", lose_at_second)
    lost = sdpa("run", specs, "--out", "out", "--no-plots")
    assert lost.code == 1
    assert lost.err.strip().splitlines()[-1].startswith("lost the Dask scheduler tcp://x:1")
    assert "updated out/index.md and report.html" in lost.err
    # the index is what the folders on disk make of themselves, the new first one included
    on_disk = collect.entries(out)
    assert (out / "index.md").read_text() == batch_report.index_md(on_disk)
    seeds = {e.name: e.result.spec["seed"] for e in on_disk if e.result is not None}
    assert seeds == {"a-phase": 13, "b-variance": 4, "c-sweep": 5}  # one new, two untouched
    assert before != (out / "index.md").read_text()


def test_a_lost_scheduler_before_any_folder_leaves_the_index_alone(sdpa, workdir, monkeypatch):
    specs = _specs(workdir / "specs")
    assert sdpa("run", specs, "--out", "out", "--no-plots").code == 0
    index = (workdir / "out" / "index.md").read_bytes()

    def lose(p: Any, settings: Any) -> Any:
        raise SchedulerLost("lost the Dask scheduler tcp://x:1 mid-run")

    monkeypatch.setattr(batch, "compute", lose)
    lost = sdpa("run", specs, "--out", "out", "--no-plots", "--force")
    assert lost.code == 1 and "updated" not in lost.err
    assert (workdir / "out" / "index.md").read_bytes() == index
