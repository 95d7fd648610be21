"""The train study: the model's backward against finite differences, optimisers, determinism,
learning on an easy config, the spec's bad inputs, and the command."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from conftest import write_spec

from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.train import recall
from sdpa_cli.studies.train.findings import compare
from sdpa_cli.studies.train.rows import TrainRow
from sdpa_cli.studies.train.run import sensitivity_rows

TINY = recall.Task(vocab=6, pairs=3, d_model=5, d_k=4, learned_embeddings=True)


def _setup(task: recall.Task, seed: int = 0, batch: int = 3):
    rng = np.random.default_rng(seed)
    params = recall.init_params(task, rng)
    # moderate weights, so the unscaled softmax is neither frozen nor flat in every row
    for name in ("wq", "wk"):
        params[name] *= 0.7
    return params, recall.draw_batch(task, batch, rng)


@pytest.mark.parametrize("rule", ["none", "sqrt", "linear", "cosine:0.2", "temperature:3"])
def test_every_parameter_gradient_matches_central_differences(rule: str) -> None:
    scaling = Scaling.parse(rule)
    params, batch = _setup(TINY)
    _, grads = recall.loss_and_grads(params, batch, scaling, TINY)
    assert set(grads) == set(recall.trained_names(TINY))
    h = 1e-6
    for name, g in grads.items():
        fd = np.zeros_like(params[name])
        for idx in np.ndindex(fd.shape):
            keep = params[name][idx]
            params[name][idx] = keep + h
            up = recall.forward(params, batch, scaling).loss
            params[name][idx] = keep - h
            down = recall.forward(params, batch, scaling).loss
            params[name][idx] = keep
            fd[idx] = (up - down) / (2 * h)
        err = np.linalg.norm(g - fd) / max(np.linalg.norm(fd), 1e-12)
        assert err < 1e-6, (rule, name, err)


def test_fixed_embeddings_get_no_gradient_and_stay_put() -> None:
    task = recall.Task(vocab=6, pairs=3, d_model=5, d_k=4)
    params, batch = _setup(task)
    _, grads = recall.loss_and_grads(params, batch, Scaling.parse("sqrt"), task)
    assert "key_embed" not in grads and "value_embed" not in grads


def test_sgd_step_is_minus_lr_times_the_gradient() -> None:
    params = {"w": np.array([1.0, -2.0])}
    recall.Optimiser("sgd", 0.25).step(params, {"w": np.array([4.0, -8.0])})
    assert params["w"].tolist() == [0.0, 0.0]


def test_adams_first_step_moves_each_weight_by_lr_against_its_gradient_sign() -> None:
    # After one step m̂ = g and v̂ = g², so the update is lr·g/(|g| + ε).
    g = np.array([3.0, -1e-3, 0.5])
    params = {"w": np.zeros(3)}
    recall.Optimiser("adam", 0.01).step(params, {"w": g})
    expected = -0.01 * g / (np.abs(g) + recall.ADAM_EPS)
    np.testing.assert_allclose(params["w"], expected, rtol=1e-12)


def test_batches_ask_for_a_stored_key_and_its_value() -> None:
    task = recall.Task(vocab=10, pairs=7, d_model=4, d_k=4)
    b = recall.draw_batch(task, 200, np.random.default_rng(1))
    for keys, values, q, t in zip(b.keys, b.values, b.query, b.target, strict=True):
        assert len(set(keys.tolist())) == task.pairs  # distinct: one answer
        (at,) = np.nonzero(keys == q)[0]
        assert values[at] == t


def _train(rule: str, opt: str, lr: float, steps: int = 150, seed: int = 3) -> recall.TrainLog:
    task = recall.Task(vocab=4, pairs=2, d_model=16, d_k=8)
    return recall.train(task, Scaling.parse(rule), opt, lr, steps=steps, batch=32, log_every=10,
                        init_rng=np.random.default_rng([seed, 0]),
                        data_rng=np.random.default_rng([seed, 1]))


def test_same_generators_give_the_same_bytes() -> None:
    a, b = _train("none", "adam", 0.01, steps=30), _train("none", "adam", 0.01, steps=30)
    assert a.steps.tobytes() == b.steps.tobytes()
    for name in recall.LOG_FIELDS:
        assert a.series[name].tobytes() == b.series[name].tobytes()


def test_an_easy_config_is_learnt() -> None:
    log = _train("sqrt", "adam", 0.01)
    # Chance accuracy is 1/4; the last window is 10 steps × 32 sequences.
    assert log.series["accuracy"][-1] >= 0.95
    assert log.series["loss"][-1] < 0.25 * math.log(4)
    assert recall.steps_to_reach(log, 0.9) is not None
    assert log.steps[0] == 1 and log.steps[-1] == 150


def test_steps_to_reach_is_the_first_logged_window_at_the_target() -> None:
    log = recall.TrainLog(np.array([1, 10, 20, 30]), {"accuracy": np.array([.1, .5, .9, .8])},
                          None)
    assert recall.steps_to_reach(log, 0.9) == 20
    assert recall.steps_to_reach(log, 0.95) is None


def _train_row(**given: object) -> TrainRow:
    """A TrainRow with the given fields; the rest are placeholders the test does not read."""
    base: dict[str, object] = {f.name: None for f in fields(TrainRow)}
    base.update(dim=8, scaling="none", optimiser="sgd", lr=1.0, seeds=3, reached=0)
    return TrainRow(**{**base, **given})  # type: ignore[arg-type]


def test_lr_sensitivity_follows_wortsman() -> None:
    # mean over rates of min(loss, chance) − best; a diverged rate (None) counts as chance.
    rows = [_train_row(lr=lr, final_loss_median=v)
            for lr, v in ((0.1, 0.5), (1.0, 3.0), (10.0, None))]
    (s,) = sensitivity_rows(rows, chance=2.0)
    assert s.best_lr == 0.1 and s.best_final_loss == 0.5
    assert s.lr_sensitivity == pytest.approx((0.5 + 2.0 + 2.0) / 3 - 0.5)


def _row(reached: int, lo: float | None, hi: float | None, loss_lo: float, loss_hi: float
         ) -> TrainRow:
    return _train_row(reached=reached, steps_to_target_lo=lo, steps_to_target_hi=hi,
                      final_loss_lo=loss_lo, final_loss_hi=loss_hi)


def test_worse_means_fewer_seeds_or_separated_ranges() -> None:
    assert compare(_row(1, 50, None, .1, 2), _row(3, 40, 60, .1, .2)) == 1
    assert compare(_row(3, 70, 90, .1, .2), _row(3, 40, 60, .1, .2)) == 1
    assert compare(_row(3, 50, 90, .1, .2), _row(3, 40, 60, .1, .2)) == 0
    assert compare(_row(0, None, None, 1.0, 1.5), _row(0, None, None, 2.0, 2.5)) == -1


# --- the command and its spec -------------------------------------------------------------------

SMALL = ["--dims", "8", "--steps", "20", "--seeds", "1", "--batch", "8", "--vocab", "4",
         "--pairs", "2", "--d-model", "8", "--seed", "1", "--no-plots"]


def test_command_writes_rows_with_the_documented_fields(sdpa) -> None:
    r = sdpa("train", *SMALL, "--format", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert len(doc["rows"]) == 4  # none, sqrt × sgd, adam
    for key in ("dim", "scaling", "factor", "optimiser", "lr", "reached", "never",
                "steps_to_target_median", "final_loss_median", "chance_loss", "entropy_init",
                "max_score_init", "grad_wq_init", "grad_wk_init", "diverged"):
        assert key in doc["rows"][0]
    assert {t for t in doc["tables"]} == {"sensitivity", "claims", "robustness"}
    assert len(doc["curves"]) == 4 and doc["curves"][0]["steps"][0] == 1


def test_one_optimiser_takes_its_default_rate(sdpa) -> None:
    """--optimisers sgd alone (no --learning-rates) uses SGD's default rate; the default
    mapping's Adam entry is not an error the user never asked for."""
    r = sdpa("train", *SMALL, "--optimisers", "sgd", "--format", "json")
    assert r.code == 0, r.err
    rows = r.json()["rows"]
    assert {(row["optimiser"], row["lr"]) for row in rows} == {("sgd", 0.1)}


def test_rules_of_issue_15_train_and_logn_factor_uses_the_sequence_length(sdpa) -> None:
    """Every rule trains; logn's factor in the row is S·ln n with n = pairs + 1 keys (the
    row used to call factor(d) without n and fail after all the runs)."""
    rules = ["qknorm", "qknorm:rms", "softcap:50", "logn:0.43", "mup", "linear:8"]
    r = sdpa("train", *SMALL, "--optimisers", "sgd", "--scalings", *rules, "--format", "json")
    assert r.code == 0, r.err
    factors = {row["scaling"]: row["factor"] for row in r.json()["rows"]}
    assert set(factors) == set(rules)
    assert factors["logn:0.43"] == pytest.approx(0.43 * math.log(3))  # --pairs 2: n = 3
    assert factors["mup"] == pytest.approx(8 / 8) and factors["qknorm"] == pytest.approx(8 ** -0.5)


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_written_spec_runs_again_to_the_same_results(sdpa, workdir: Path) -> None:
    spec = write_spec(workdir, "t.yaml", "study: train\ndims: [8]\nsteps: 20\nseeds: 2\n"
                      "batch: 8\nvocab: 4\npairs: 2\nd_model: 8\nseed: 4\n"
                      "learning_rates: {sgd: [0.1, 0.3], adam: [0.01]}\n")
    assert sdpa("run", str(spec), "--out", "a", "--no-plots", "-q").code == 0
    assert sdpa("run", "a/t/spec.yaml", "--out", "b", "--no-plots", "-q").code == 0
    first = json.loads((workdir / "a" / "t" / "results.json").read_text())
    again = json.loads((workdir / "b" / "t" / "results.json").read_text())
    assert again == first
    assert first["spec"]["learning_rates"] == {"sgd": [0.1, 0.3], "adam": [0.01]}


def test_threads_change_no_digit(sdpa) -> None:
    one = sdpa("train", *SMALL, "--format", "json", "--workers", "1").json()
    two = sdpa("train", *SMALL, "--format", "json", "--workers", "2").json()
    assert one["rows"] == two["rows"] and one["curves"] == two["curves"]


BAD = [
    (["--learning-rates", "0"], "--learning-rates: ", "must be > 0"),
    (["--pairs", "9", "--vocab", "4"], "--pairs: ", "need at least as many distinct keys"),
    (["--optimisers", "rmsprop"], "--optimisers: ", "must be one of sgd, adam"),
    (["--log-every", "50", "--steps", "20"], "--log-every: ", "more than steps"),
    (["--dims", "8", "8"], "--dims: ", "listed twice"),
    (["--steps", "10000000"], "--steps: ", "steps of work"),
    (["--batch", "10000", "--pairs", "99", "--vocab", "100", "--dims", "1", "--steps", "1",
      "--log-every", "1", "--seeds", "1"], "--batch: ", "of memory"),
    (["--embeddings", "frozen"], "--embeddings: ", "must be one of fixed, learned"),
]


@pytest.mark.parametrize(("argv", "where", "says"), BAD, ids=[b[2] for b in BAD])
def test_bad_flags_exit_2_with_one_line(sdpa, workdir: Path, argv, where, says) -> None:
    r = sdpa("train", *argv)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(where) and says in lines[0], r.err
    assert not (workdir / "outputs").exists()


def test_bad_spec_names_file_line_and_field(sdpa, workdir: Path) -> None:
    write_spec(workdir, "t.yaml", "study: train\noptimisers: [sgd]\n"
               "learning_rates: {sgd: [0.1], adam: [0.01]}\n")
    r = sdpa("train", "t.yaml")
    assert r.code == 2
    assert r.err.strip().startswith("t.yaml:3:") and "learning_rates" in r.err
    assert "adam is not in optimisers" in r.err and len(r.err.strip().splitlines()) == 1


def test_specs_in_a_slow_folder_run_only_when_named(tmp_path: Path) -> None:
    from sdpa_cli.runner import paths

    (tmp_path / "train" / "slow").mkdir(parents=True)
    quick, slow = tmp_path / "train" / "compare.yaml", tmp_path / "train" / "slow" / "big.yaml"
    for f in (quick, slow):
        f.write_text("study: train\n", encoding="utf-8")
    assert paths.spec_files(tmp_path) == [quick]
    assert paths.spec_files(tmp_path / "train" / "slow") == [slow]


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
def test_lr_sweep_figures_show_what_they_say(workdir: Path) -> None:
    # train-scaled-vs-unscaled.yaml has one rate per optimiser, so the shipped-spec figure
    # tests never draw final loss versus lr: draw every train figure of a small sweep and
    # inspect it the same way.
    from test_figures import drawn_figures, problems

    path = write_spec(workdir, "sweep.yaml", "study: train\ndims: [8, 16]\nsteps: 20\nseeds: 2\n"
                      "batch: 8\nvocab: 8\nd_model: 8\nseed: 2\n"  # no pairs: SMALL resets it
                      "learning_rates: {sgd: [0.1, 1.0], adam: [0.003, 0.03]}\n")
    figures = dict(drawn_figures(path))
    assert set(figures) == {"loss_curves", "traces", "loss_vs_lr"}
    for name, fig in figures.items():
        assert problems(fig) == [], name
    lr_axes = [ax for ax in figures["loss_vs_lr"].axes if ax.get_xlabel()]
    assert len(lr_axes) == 4 and all(ax.get_xscale() == "log" for ax in lr_axes)
