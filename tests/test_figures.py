"""Every shipped spec's figures, inspected as matplotlib objects before they are saved."""

from __future__ import annotations

import functools
import re
import tempfile
from pathlib import Path

import pytest
from conftest import per_spec
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from sdpa_cli import registry
from sdpa_cli.framework import figure_style as style
from sdpa_cli.framework.context import SERIAL
from sdpa_cli.report import figures
from sdpa_cli.runner import loader as specs

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
SPECS = sorted(EXPERIMENTS.glob("*/*.yaml"))
# Sizes that change no figure's layout, only its noise: the whole file stays fast.
# steps, seeds: train; 40 trials draw every element that 100 do (rules-vs-n took 14 s)
SMALL = {"pairs": 2000, "trials": 40, "steps": 30, "seeds": 2}
# A number written with its digits: 22.627416997969522, 0.25, 1e-05, 3.
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def significant_digits(number: str) -> int:
    mantissa = re.split(r"[eE]", number)[0]
    digits = mantissa.replace(".", "").lstrip("0")
    if "." in mantissa:
        return len(digits)
    return len(digits.rstrip("0")) or 1  # 1000 has one significant digit


@functools.cache
def drawn_figures(path: Path) -> tuple[tuple[str, MplFigure], ...]:
    """Run the spec small and catch each figure at the moment it would be saved (once per
    spec: the checks below only read the figures)."""
    given = specs.read_document(path).data
    overrides = {k: v for k, v in SMALL.items() if k in given}
    spec = specs.load(path, overrides=overrides)
    result = registry.get(spec.study).run(spec, SERIAL)
    caught: list[tuple[str, MplFigure]] = []

    def keep(fig: MplFigure, stem: Path, **kw: object) -> list[Path]:
        FigureCanvasAgg(fig)
        fig.draw_without_rendering()  # layout done, as savefig does it
        caught.append((stem.name, fig))
        return [stem.with_suffix(".png")]

    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as tmp:
        patch.setattr(style, "save", keep)
        for figure in result.figures:
            figures.render(figure, Path(tmp), draw=registry.get(result.study).renderer(figure.kind))
    return tuple(caught)


def texts(fig: MplFigure) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _tick_texts(fig: MplFigure) -> set[int]:
    """Tick labels: matplotlib keeps some for ticks outside the view that are never drawn,
    so these are judged through their axes' drawn extent instead."""
    ids = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ids.update((id(tick.label1), id(tick.label2)))
    return ids


def visible_tick_labels(axis) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]


def problems(fig: MplFigure) -> list[str]:
    out = []
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox

    def outside(box) -> bool:
        return (box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1
                or box.y1 > canvas.y1 + 1)

    ticks = _tick_texts(fig)
    for ax in fig.axes:
        if ax.get_visible() and outside(ax.get_tightbbox(renderer)):
            out.append(f"axes {ax.get_title() or ax.get_ylabel()!r} reach outside the canvas")
    for t in texts(fig):
        if id(t) not in ticks and outside(t.get_window_extent(renderer)):
            out.append(f"text outside the canvas: {t.get_text()!r}")
        for number in NUMBER.findall(t.get_text()):
            if significant_digits(number) > 6:
                out.append(f"raw float {number} in {t.get_text()!r}")
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        for axis, scale, label in ((ax.xaxis, ax.get_xscale(), ax.get_xlabel()),
                                   (ax.yaxis, ax.get_yscale(), ax.get_ylabel())):
            if "log" in label.lower() and scale != "log":
                out.append(f"axis labelled {label!r} drawn {scale}")
            if visible_tick_labels(axis) and not label.strip():
                out.append(f"an axis of {ax.get_title()!r} has ticks and no label")
        out += _legend_covers(ax, renderer)
        out += _brown(ax)
    return out


def _legend_covers(ax: Axes, renderer) -> list[str]:
    """A legend inside the axes may not sit on a drawn point or on the top of a bar."""
    legend = ax.get_legend()
    if legend is None:
        return []
    box = legend.get_window_extent(renderer)
    points = []
    for line in ax.get_lines():
        if line.get_marker() in (None, "None", "", " "):
            continue
        xy = line.get_transform().transform(line.get_xydata())
        points += [p for p in xy if all(map(lambda v: v == v, p))]
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_height() > 0:
            x0, y0, w, h = patch.get_x(), patch.get_y(), patch.get_width(), patch.get_height()
            points.append(patch.get_data_transform().transform((x0 + w / 2, y0 + h)))
    hit = [p for p in points if box.contains(*p)]
    return [f"legend of {ax.get_title()!r} covers {len(hit)} data points"] if hit else []


def _brown(ax: Axes) -> list[str]:
    """Two or more filled histograms on one axes mix into brown unless the fills are light."""
    heavy = [p for p in ax.patches if type(p).__name__ == "StepPatch" and p.get_fill()
             and (p.get_alpha() or 1.0) > 0.15]
    return [f"{len(heavy)} overlapping filled histograms in {ax.get_title()!r}"] \
        if len(heavy) > 1 else []


@pytest.mark.parametrize("path", per_spec(SPECS), ids=lambda p: p.stem)
def test_every_figure_shows_what_it_says(path: Path) -> None:
    found = {name: problems(fig) for name, fig in drawn_figures(path)}
    assert {name: p for name, p in found.items() if p} == {}


def test_significant_digits() -> None:
    assert [significant_digits(x) for x in ("22.627416997969522", "0.0442", "1000", "1e-05",
                                              "2.30", "512")] == [17, 3, 1, 1, 3, 3]


def _figure(path: str, name: str) -> MplFigure:
    return dict(drawn_figures(EXPERIMENTS / path))[name]


def test_weights_by_scale_lower_panel_is_log() -> None:
    fig = _figure("softmax-sweep/softmax-demo.yaml", "weights_by_scale")
    assert [ax.get_yscale() for ax in fig.axes[:2]] == ["linear", "log"]


def test_single_dimension_compares_rules_not_a_curve() -> None:
    fig = _figure("variance/multi-head.yaml", "variance_vs_dim")
    labels = " ".join(visible_tick_labels(fig.axes[0].xaxis))
    assert "÷√512 (d_model)" in labels and "÷√64 (d_k)" in labels
    assert "versus d" not in " ".join(t.get_text() for t in texts(fig))


def test_small_dimension_range_is_linear() -> None:
    fig = _figure("variance/dims-1-2-3.yaml", "variance_vs_dim")
    assert (fig.axes[0].get_xscale(), fig.axes[0].get_yscale()) == ("linear", "linear")


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_std_spec_plots_std() -> None:
    fig = _figure("variance/score-range.yaml", "variance_vs_dim")
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert any("sd" in label or "std" in label for label in labels)
    assert not any("variance" in label for label in labels)


def test_histograms_one_panel_per_dimension() -> None:
    """Each d on its own axes, so the narrow d = 3 spike cannot flatten d = 1000."""
    fig = _figure("variance/day74-dims.yaml", "histograms")
    raw = [ax for ax in fig.axes if ax.patches and ax.get_xlabel() == "raw q·k"]
    assert len(raw) == 3
    tops = [max(p.get_data().values.max() for p in ax.patches) for ax in raw]
    assert all(ax.get_ylim()[1] < 3 * top for ax, top in zip(raw, tops, strict=True))


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_attention_picture_scaled_scores_own_colour_bar() -> None:
    fig = _figure("softmax-sweep/scaling-effect-picture.yaml", "attention_picture")
    score_images = [im for ax in fig.axes for im in ax.get_images()
                    if im.get_cmap().name.startswith("RdBu")]
    limits = {round(im.norm.vmax, 6) for im in score_images}
    assert len(score_images) == 2 and len(limits) == 2
    assert "near-uniform" in " ".join(t.get_text() for t in texts(fig))


def test_worked_panels_named_as_the_document_names_them() -> None:
    """No spec-internal part names ("stated-vectors", "scores-15-8-22-3": minus signs lost)
    and no placeholder row "s"."""
    for path in ("worked-example/money-bank-grows.yaml", "worked-example/visual-summary.yaml"):
        fig = _figure(path, "weights")
        shown = " ".join(t.get_text() for t in texts(fig))
        assert "stated-vectors" not in shown and "scores-15" not in shown
        assert all(visible_tick_labels(ax.yaxis) != ["s"] for ax in fig.axes)
    assert "score −15" in shown  # the single row's keys carry their scores, signed


def _png_width(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[16:20], "big")  # IHDR width


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
def test_dpi_scales_the_png_and_default_stays_screen_sized(sdpa, workdir: Path) -> None:
    spec = EXPERIMENTS / "softmax-sweep" / "softmax-demo.yaml"
    assert sdpa("softmax-sweep", spec, "--out", "screen", "-q").code == 0
    assert sdpa("softmax-sweep", spec, "--out", "print", "-q", "--dpi", "330").code == 0
    screen = _png_width(workdir / "screen" / "weights_by_scale.png")
    assert _png_width(workdir / "print" / "weights_by_scale.png") == pytest.approx(
        3 * screen, abs=3)  # 330 = 3 × the default 110
    bad = sdpa("softmax-sweep", spec, "--out", "bad", "--dpi", "0")
    assert bad.code == 2 and "--dpi" in bad.err and not (workdir / "bad").exists()


def test_peak_legend_names_the_refined_peak(tmp_path: Path) -> None:
    """The star is s* from the golden-section refinement (not the grid parabola it replaced):
    the legend may not call it a parabola vertex."""
    path = tmp_path / "peak.yaml"
    path.write_text("study: jacobian\nscore_stds: [0.5, 1, 2, 4, 8]\nkeys: [16]\n"
                    "trials: 200\nseed: 3\n", encoding="utf-8")
    fig = dict(drawn_figures(path))["frobenius_vs_std"]
    legend = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts]
    assert "s*: peak of mean ‖J‖_F" in legend
    assert not any("parabola" in t for t in legend), legend


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_gradient_slope_titles_stay_on_the_canvas_with_many_rules(tmp_path: Path) -> None:
    """Seven rules' fitted slopes in each panel title: wrapped, so no text leaves the canvas
    or runs into the neighbouring panel."""
    path = tmp_path / "grads.yaml"
    path.write_text("study: gradients\ndims: [16, 64]\nd_model: 8\nkeys: 4\ntrials: 20\nseed: 1\n"
                    "scalings: [qknorm, 'qknorm:rms', 'softcap:50', 'logn:0.43', mup, 'linear:8',"
                    " 'cosine:0.1']\n", encoding="utf-8")
    fig = dict(drawn_figures(path))["gradient_norms"]
    assert problems(fig) == []


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
@pytest.mark.parametrize("study", ["softmax-sweep", "jacobian"])
def test_versus_keys_figure_is_log_log_with_every_rule(tmp_path: Path, study: str) -> None:
    """Random q, k versus n: one row of three panels per d_k, x log in n with the key counts
    as ticks, the weights and ‖J‖_F (or the spread) on log y, every rule in the legend."""
    path = tmp_path / "keys.yaml"
    path.write_text(f"study: {study}\ndims: [16, 32]\nkeys: [8, 32, 128]\ntrials: 30\n"
                    "seed: 2\nscalings: [none, sqrt, 'logn:0.43', qknorm]\n", encoding="utf-8")
    fig = dict(drawn_figures(path))["saturation_vs_keys"]
    assert problems(fig) == []
    assert len(fig.axes) == 6
    assert [ax.get_xscale() for ax in fig.axes] == ["log"] * 6
    assert [ax.get_yscale() for ax in fig.axes[:3]] == ["log", "linear", "log"]
    assert visible_tick_labels(fig.axes[0].xaxis) == ["8", "32", "128"]
    legend = [t.get_text() for t in fig.axes[0].get_legend().texts]
    assert len(legend) == 5 and legend[0].startswith("uniform")  # 1/n, then the 4 rules
    assert "sqrt: q·k/√d" in legend


def test_a_deep_models_entropy_figure_keeps_every_text_on_its_canvas() -> None:
    """Thirty layers (SmolLM2) made a legend taller than the figure: a deep model gets a
    colour scale for its layers instead, and the figure passes the canvas checks."""
    from sdpa_cli.framework.result import Figure as Fig
    from sdpa_cli.studies.inspect.figures import draw_entropy_vs_n

    series = {f"layer {i}": [0.3 + 0.01 * i, 0.32 + 0.01 * i] for i in range(30)}
    fig = draw_entropy_vs_n(Fig("entropy_vs_n", "inspect.entropy_vs_n", "t",
                                {"n": [32, 128], "series": series, "where": "m, d_k = 64"}))
    assert fig.axes[0].get_legend() is None and len(fig.axes) == 2  # the colour bar
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # layout done, as savefig does it
    assert problems(fig) == []
    few = draw_entropy_vs_n(Fig("entropy_vs_n", "inspect.entropy_vs_n", "t",
                                {"n": [32, 128], "series": dict(list(series.items())[:6]),
                                 "where": "m, d_k = 32"}))
    assert few.axes[0].get_legend() is not None


def test_variance_bars_title_and_caption_name_the_same_multiple_of_se(tmp_path: Path) -> None:
    """The bars are ± se_tolerance standard errors (the check's own reach); the title said
    "± 4 se" while the caption said "±se bars"."""
    for k in (4, 2.5):
        path = tmp_path / "s.yaml"
        path.write_text(f"study: variance\ndims: [3, 100]\npairs: 400\nseed: 1\n"
                        f"se_tolerance: {k}\n", encoding="utf-8")
        result = registry.get("variance").run(specs.load(path), SERIAL)
        (fig,) = [f for f in result.figures if f.name == "variance_vs_dim"]
        row = result.rows[0]
        assert (row["ci_high"] - row["variance"]) / row["se"] == pytest.approx(k)  # drawn
        assert f"± {k:g} se" in fig.title and f"± {k:g} se" in fig.caption
        assert "±se" not in fig.caption


def _pooled(layers: int) -> MplFigure:
    """Pooled scores of `layers` layers, each with a spike of clipped scores at -10."""
    import numpy as np

    from sdpa_cli.framework.result import Figure
    from sdpa_cli.studies.inspect.figures import draw_pooled

    edges = np.linspace(-10.0, 10.0, 101)
    mids = (edges[:-1] + edges[1:]) / 2
    counts = {}
    for layer in range(layers):
        c = 1000 * np.exp(-(mids - layer / layers) ** 2 / 8)
        c[0] = 30000.0  # every score below -10, clipped into the edge bin
        counts[f"trained n=64 layer {layer}"] = c.round().tolist()
    fig = draw_pooled(Figure("pooled_scores", "inspect.pooled", "Pooled",
                             {"edges": edges.tolist(), "counts": counts, "where": "m"}))
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    return fig


def test_pooled_scores_of_a_deep_model_take_a_colour_scale_and_no_clip_spike() -> None:
    """SmolLM2's 30 layers made a 31-entry legend whose colours repeated, and the scores
    clipped to -10 made a spike that set the y-axis."""
    fig = _pooled(30)
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["N(0, 1)"]
    assert any(a.get_ylabel() == "layer" for a in fig.axes[1:])  # the colour scale
    assert ax.get_ylim()[1] < 0.5  # the densities' scale, not the spike's (about 6)
    assert "beyond ±9.8" in ax.get_title()
    colours = {tuple(line.get_color()) for line in ax.get_lines()[:-1]}
    assert len(colours) == 30
    few = _pooled(6).axes[0]  # a small model keeps its legend, one entry per layer
    assert len(few.get_legend().get_texts()) == 7


def test_a_figures_grid_is_rows_cols_or_matplotlibs_nrows_ncols() -> None:
    from sdpa_cli.framework import figure_style as style

    for args, kw, shape in (((1, 2), {}, (1, 2)), ((), {"ncols": 2}, (1, 2)),
                            ((), {"nrows": 3, "ncols": 2, "sharex": True}, (3, 2)),
                            ((), {}, (1, 1))):
        _, axes = style.new(6.0, 3.0, *args, **kw)
        assert axes.shape == shape, (args, kw)  # always a 2-d grid: axes[row][col]
