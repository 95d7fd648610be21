"""The work, memory and output guards: every study has one, and its estimates are honest."""

from __future__ import annotations

from pathlib import Path

import pytest
from attack import Bad, check
from attack import spec as one_spec

from sdpa_cli import registry
from sdpa_cli.errors import InputError
from sdpa_cli.framework.context import RunContext
from sdpa_cli.runner import loader as spec
from sdpa_cli.runner import paths
from sdpa_cli.spec import limits

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"


@pytest.mark.parametrize("path", paths.spec_files(EXPERIMENTS), ids=lambda p: p.stem)
def test_every_shipped_spec_is_inside_the_budgets_with_room(path):
    # what `sdpa run` runs by default (slow/ folders are named explicitly)
    s = spec.load(path)
    cost = registry.get(s.study).cost(s)
    assert cost.rows <= limits.MAX_ROWS // 2
    assert cost.work <= limits.MAX_WORK // 2
    assert cost.memory <= limits.MAX_MEMORY // 2
    assert cost.output <= limits.MAX_OUTPUT // 2


def _written(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.suffix in
               (".md", ".csv", ".json"))


@pytest.mark.parametrize("args", [
    ["softmax-sweep", "--scores", *map(str, range(200)), "--scales", *map(str, range(1, 41))],
    ["jacobian", "--scores", *map(str, range(200)), "--scales", *map(str, range(1, 41))],
    ["variance", "--dims", *map(str, range(1, 41)), "--pairs", "20", "--scalings", "none",
     "sqrt", "linear"],
], ids=["softmax-explicit", "jacobian-explicit", "variance-rows"])
def test_output_estimate_is_an_upper_bound_within_a_small_factor(sdpa, workdir, args):
    r = sdpa(*args, "--seed", "1", "--no-plots", "-q", "--out", "run")
    assert r.code == 0, r.err
    study = args[0]
    overrides = {"scores": list(map(float, range(200))), "scales": list(map(float,
                 range(1, 41)))} if study != "variance" else \
        {"dims": list(range(1, 41)), "pairs": 20, "scalings": ["none", "sqrt", "linear"]}
    s = spec.load(None, study=study, overrides={**overrides, "seed": 1})
    cost = registry.get(study).cost(s)
    written = _written(workdir / "run")
    # the guard may refuse early, never late: the estimate is above what is written, and
    # not so far above that it refuses runs a few times smaller than its limit
    assert written <= cost.output <= 6 * written, (written, cost.output)


def test_guard_refuses_at_load_with_the_field_to_lower():
    with pytest.raises(InputError) as e:
        spec.load(None, study="variance", overrides={"dims": list(range(1, 3000)),
                                                     "pairs": 2, "seed": 1})
    line = e.value.problems[0].render()
    assert line.startswith("dims: would make a table of 5998 rows") and "give fewer dims" in line


@pytest.mark.parametrize("study, overrides", [
    ("variance", {"dims": [3, 10]}),
    ("softmax-sweep", {"scores": [1.0, 0.0, -1.0], "scales": [1.0, 2.0]}),
    ("jacobian", {"scores": [1.0, 0.0, -1.0], "scales": [1.0, 2.0]}),
    ("softmax-sweep", {"dims": [16], "keys": [8], "trials": 40, "seed": 1}),  # the picture
])
def test_no_plots_makes_no_figure_data(study, overrides):
    s = spec.load(None, study=study, overrides={**overrides, "seed": 1, "pairs": 50}
                  if study == "variance" else overrides)
    run = registry.get(study).run
    with_figures = run(s, RunContext(figures=True))
    without = run(s, RunContext(figures=False))
    assert with_figures.figures and not without.figures
    # and not a digit of the results changes
    assert with_figures.table == without.table and with_figures.tables == without.tables


# --- attacks on the boundaries of the fixes ------------------------------------------------


@pytest.mark.parametrize("part", [
    "    kind: variance\n    values: [1e150, -1e150, 3]\n",
    "    kind: variance\n    values: [1, 2, 3]\n    divisor: 1e-149\n",
    "    kind: attention\n    tokens: [a]\n    q: [[1e75, 1e75]]\n    k: [[1e74, 1e74]]\n",
])
def test_worked_numbers_just_inside_the_range_compute_without_a_warning(sdpa, workdir, part):
    # pytest turns any RuntimeWarning into an error (filterwarnings = error)
    (workdir / "w.yaml").write_text("study: worked-example\ntitle: t\nsource: s\nparts:\n"
                                    "  - name: p\n" + part, encoding="utf-8")
    r = sdpa("worked-example", "./w.yaml", "--no-plots", "-q", "--out", "run")
    assert r.code == 0, r.err


@pytest.mark.parametrize("scale", ["1e300", "1e-300"])
def test_scales_at_the_edge_of_the_range_run_and_report_what_they_used(sdpa, workdir, scale):
    r = sdpa("softmax-sweep", "--scores", "1", "0.5", "0", "-0.5", "--scales", scale,
             "--no-plots", "-q", "--format", "json", "--out", "run")
    assert r.code == 0, r.err
    row = r.json()["rows"][0]
    assert row["scale"] == float(scale)
    assert row["scores"][0] == float(scale)  # 1 × scale: nothing clamped behind the user's back


def test_the_row_limit_is_exact_at_its_edge():
    at = {"dims": list(range(1, limits.MAX_ROWS + 1)), "scalings": ["sqrt"], "method": "exact",
          "pairs": 2, "seed": 1}
    spec.load(None, study="variance", overrides=at)  # exactly at the limit: accepted
    with pytest.raises(InputError, match="would make a table of 2001 rows"):
        spec.load(None, study="variance", overrides={**at, "dims": [*at["dims"], 5000]})


def test_the_histogram_figure_draws_a_bounded_number_of_dims():
    # 200 overlaid histograms took six minutes and 0.5 GB to draw (the table kept them all)
    from sdpa_cli.studies.variance import figure_data as variance

    dims = list(range(1, 31))
    s = spec.load(None, study="variance", overrides={"dims": dims, "pairs": 20,
                                                     "method": "exact", "seed": 1})
    result = registry.get("variance").run(s, RunContext(figures=True))
    hist = next(f for f in result.figures if f.name == "histograms")
    shown = [series["dim"] for series in hist.data["panels"][0]["series"]]
    assert len(shown) == variance.HIST_MAX_DIMS and shown[0] == 1 and shown[-1] == 30
    assert len(set(shown)) == len(shown)
    assert f"{variance.HIST_MAX_DIMS} of the 30 dimensions" in hist.caption
    assert len(result.table.rows) == 2 * len(dims)


def test_an_unreadable_weights_figure_is_left_out_with_a_note():
    from sdpa_cli.studies.softmax_sweep import run as softmax_sweep

    n = 101
    scales = [float(i) for i in range(1, softmax_sweep.WEIGHTS_FIGURE_MAX_BARS // n + 2)]
    s = spec.load(None, study="softmax-sweep",
                  overrides={"scores": [float(i) / n for i in range(n)], "scales": scales})
    result = registry.get("softmax-sweep").run(s, RunContext(figures=True))
    assert result.figures == () or not any(f.name == "weights_by_scale" for f in result.figures)
    assert any(f"{n} keys × {len(scales)} multipliers" in note for note in result.notes)
    fewer = spec.load(None, study="softmax-sweep",
                      overrides={"scores": [float(i) / n for i in range(n)], "scales": scales[:-2]})
    kept = registry.get("softmax-sweep").run(fewer, RunContext(figures=True))
    assert [f.name for f in kept.figures] == ["weights_by_scale"]


# --- numbers that used to let a NumPy warning through (filterwarnings = error turns any
# RuntimeWarning into a failure here) ---------------------------------------------------------


def test_huge_d_with_the_exact_method_and_figures_warns_nothing():
    s = spec.load(None, study="variance", overrides={"dims": [10**18], "method": "exact",
                                                     "pairs": 50, "seed": 1})
    result = registry.get("variance").run(s, RunContext(figures=True))
    hist = next(f for f in result.figures if f.name == "histograms")
    kinds = {series["theory_kind"] for p in hist.data["panels"] for series in p["series"]}
    assert kinds <= {"normal approx.", "none"}  # the figure says which law it drew


def test_a_subnormal_temperature_in_variance_warns_nothing(sdpa, workdir):
    r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--scalings",
             "temperature:1e-320", "--no-plots", "-q", "--out", "run")
    assert r.code == 0, r.err


# --- too much work, memory or output: refused before anything runs -----------------------

TOO_MUCH = [
    Bad("too-much-work", ["variance", "s.yaml"], "would draw 2e+14 random numbers",
        one_spec("study: variance\ndims: [1000]\npairs: 100000000000\n"), "s.yaml:3:8: pairs:"),
    Bad("rows-variance-flags", ["variance", "--dims", *map(str, range(1, 1202)), "--pairs", "2"],
        "would make a table of 2402 rows", {}, "--dims: dims:"),
    Bad("rows-variance-file", ["variance", "s.yaml"], "at most 2000: give fewer dims",
        one_spec("study: variance\npairs: 2\ndims: [" + ", ".join(map(str, range(1, 1100))) +
             "]\n"), "s.yaml:3:7: dims:"),
    Bad("memory-softmax-explicit", ["softmax-sweep", "--scores", *["1"] * 4096, "--scales",
                                    *map(str, range(1, 1001))],
        "GB of memory; at most 1 GB", {}, "--scales: scales:"),
    Bad("output-softmax-explicit", ["softmax-sweep", "--scores", *["1"] * 4096, "--scales",
                                    *map(str, range(1, 301))],
        "MB of files in the run folder; at most 100 MB", {}, "--scales: scales:"),
    Bad("output-jacobian-explicit", ["jacobian", "--scores", *["1"] * 4096, "--scales",
                                     *map(str, range(1, 301))],
        "of files in the run folder", {}, "--scales: scales:"),
    Bad("rows-softmax-vectors", ["softmax-sweep", "--dims", *map(str, range(1, 60)),
                                 "--keys", *map(str, range(2, 40)), "--trials", "2"],
        "dims × keys × scalings", {}, "--dims: dims:"),
    Bad("rows-gaussian", ["jacobian", "s.yaml"], "keys × score_stds",
        one_spec("study: jacobian\nkeys: [" + ", ".join(map(str, range(2, 60))) + "]\n"
             "score_stds: [" + ", ".join(str(i / 10) for i in range(1, 60)) + "]\n"),
        "s.yaml:3:13: score_stds:"),
    Bad("pairs-hours", ["variance", "s.yaml"], "hours of work",
        one_spec("study: variance\ndims: [3]\npairs: 1000000000000\n"), "s.yaml:3:8: pairs:"),
    Bad("memory-additive-weights", ["softmax-sweep", "--dims", "4096", "--keys", "2", "--trials",
                                    "2", "--additive", "100000"],
        "GB of memory; at most 1 GB: lower additive", {}, "--additive: additive:"),
    Bad("memory-train-embeddings", ["train", "--dims", "16", "--d-model", "4096", "--vocab",
                                    "100000", "--pairs", "1", "--batch", "1", "--steps", "1",
                                    "--log-every", "1"],
        "GB of memory; at most 1 GB: lower vocab or d_model", {}, "--vocab: vocab:"),
    Bad("work-train-many-tiny-steps", ["train", "--dims", "1", "--d-model", "2", "--vocab", "2",
                                       "--pairs", "1", "--batch", "1", "--steps", "100000000",
                                       "--seeds", "1", "--scalings", "none", "--optimisers",
                                       "sgd", "--learning-rates", "0.1", "--log-every",
                                       "10000000"],
        "steps of work", {}, "--steps: steps:"),
]


@pytest.mark.parametrize("bad", TOO_MUCH, ids=lambda b: b.id)
def test_too_much_is_one_line_naming_what_to_lower(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


HUGE = (10**300, 10**308, int(1.7e308))  # each within float64, so the command line takes it


# inspect's inputs and their bounds are its loader's (test_inspect_attacks.py)
@pytest.mark.parametrize("name", [n for n in registry.NAMES if n != "inspect"])
def test_every_cost_estimate_survives_whole_numbers_beyond_float_range(name):
    """One field or two at a time set to a whole number near float64's largest: every product
    an estimate forms is beyond float64, and the spec is refused in one line (it raised
    OverflowError: int too large to convert to float)."""
    import itertools

    from sdpa_cli.errors import InputError
    from sdpa_cli.framework.declaration import flag_shape
    from sdpa_cli.runner import loader

    study = registry.get(name)
    ints = [(f, flag_shape(info.annotation)) for f, info in study.spec.model_fields.items()
            if f in study.flag_fields() and "int" in repr(info.annotation)]
    base = dict(study.examples[0])
    for big in HUGE:
        for combo in [*itertools.combinations(ints, 1), *itertools.combinations(ints, 2)]:
            fields = {f: [big] if shape == "list" else big for f, shape in combo}
            with pytest.raises(InputError) as e:
                loader.load(None, study=name, overrides={**base, **fields, "seed": 1})
            assert len(e.value.lines()) >= 1 and all("\n" not in x for x in e.value.lines())
