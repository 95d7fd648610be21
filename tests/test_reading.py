"""What a newcomer reads at 80 columns: batch and --all summaries keep every name whole, log
progress lines, missing compare folders, the train claims' verdicts, scratch runs joining
a report, seeds, the wrote line and the gradient-norm figure (issue 29)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from sdpa_cli.framework.result import AuditEntry, Check, Result, Table
from sdpa_cli.numerics.rng import fresh_entropy
from sdpa_cli.report import batch as batch_report
from sdpa_cli.report import compare_text, examples, terminal
from sdpa_cli.report.outcomes import Outcome, Planned
from sdpa_cli.report.progress import Progress
from sdpa_cli.studies.gradients import figures as gradient_figures
from sdpa_cli.studies.train import findings as train_findings


def _render(table: Any, width: int = 80) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, highlight=False).print(table)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"


def _audit(n: int, accepted: int) -> tuple[AuditEntry, ...]:
    return tuple(AuditEntry("001_x.txt, Step 1", f"q{i}", 1.0, 2.0, "mismatch", "1", 0.01,
                            "printed digits", accepted="known" if i < accepted else None)
                 for i in range(n))


def _result(name: str, *, audit: tuple[AuditEntry, ...] = (), checks: int = 2,
            failed: int = 0, source: str = "001_409455fed8d25d77.txt, Step 1") -> Result:
    table = Table("t", "t", (), ())
    return Result("worked-example", name, name, source, "", {}, table,
                  checks=tuple(Check(f"c{i}", i >= failed, "") for i in range(checks)),
                  audit=audit)


def _outcome(name: str, study: str, status: str, seconds: float, *, kept: bool = False,
             result: Result | None = None) -> Outcome:
    planned = Planned(Path(f"{name}.yaml"), SimpleNamespace(study=study),  # type: ignore[arg-type]
                      Path("outputs") / name)
    return Outcome(planned, status, result=result, seconds=seconds, kept=kept)


# --- item 1: the batch summary ------------------------------------------------------------

BATCH = [
    _outcome("jacobian-leading-key-vs-n", "jacobian", "passed", 1.5,
             result=_result("a", checks=3)),
    _outcome("rules-field-independent", "softmax-sweep", "passed", 0.0, kept=True,
             result=_result("b", checks=34)),
    _outcome("train-scaled-vs-unscaled", "train", "failed", 20.8,
             result=_result("c", checks=2, failed=1)),
    _outcome("i-am-happy", "worked-example", "passed", 0.3,
             result=_result("d", audit=_audit(49, 46))),
    _outcome("broken", "variance", "error", 0.0),
]

GOLDEN_BATCH_80 = """\
5 experiments: 3 passed, 1 failed, 1 error (1 unchanged, kept)

 experiment                 study               checks  root errors  seconds
 ───────────────────────────────────────────────────────────────────────────
 jacobian-leading-key-vs-n  jacobian        ✓      3/3            0      1.5
 rules-field-independent    softmax-sweep   ✓=   34/34            0     kept
 train-scaled-vs-unscaled   train           ✗      1/2            0     20.8
 i-am-happy                 worked-example  ✓      2/2            1      0.3
 broken                     variance        !        —            0      0.0

"""


def test_batch_summary_golden_render_at_80_columns() -> None:
    assert _render(batch_report.summary_table(BATCH)) == GOLDEN_BATCH_80


def test_batch_summary_keeps_every_name_whole_on_one_line_at_60_columns() -> None:
    text = _render(batch_report.summary_table(BATCH), width=60)
    for o in BATCH:
        assert sum(o.planned.target.name in line for line in text.splitlines()) == 1
    assert "…" not in "".join(line.split()[0] for line in text.splitlines()[4:] if line)


def test_one_experiment_is_singular() -> None:
    assert batch_report.summary_table(BATCH[:1]).title == "1 experiment: 1 passed"


# --- item 1: worked-example --all ----------------------------------------------------------

def test_all_examples_summary_keeps_names_at_80_columns() -> None:
    names = ["variance-10-to-70", "variance-by-dimension", "d512-numerical-example"]
    results = [(_result(n, audit=_audit(3, 3)), Path("outputs") / n) for n in names]
    buf = io.StringIO()
    examples.show_batch(results, check=False,
                        out=Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    for n in names:
        assert n in text
    assert "wrote 3 run folders in outputs/: one per example" in text
    assert examples.document_number("001_409455fed8d25d77.txt, Step 2") == "001"


def test_the_examples_listing_wraps_under_its_column_on_a_terminal() -> None:
    entry = examples.Listed("variance-by-dimension", "The 1-D/2-D/3-D variances 16.33, 17.33, "
                            "52.33, scaled by 1/√d, and the claims made with them.",
                            "000_0e5125495e9ebe01.txt, Mathematical Derivation: Why √dk?",
                            "x.yaml")
    text = examples.listing_document([entry], "table", width=60)
    lines = text.splitlines()
    assert all(len(line) <= 60 for line in lines) and len(lines) == 7
    assert all(line.startswith(" " * 23) for line in lines[1:])
    # the document by its short title, its file name beside it
    assert " ".join(" ".join(lines).split()) == " ".join(
        f"{entry.name} {entry.description} source: Day 74: Why do we scale self-attention? "
        "(000_0e5125495e9ebe01.txt), Mathematical Derivation: Why √dk?".split())
    assert examples.listing_document([entry], "table").count("\n") == 2  # piped: unwrapped


# --- item 1 and 6: progress lines in a log ------------------------------------------------

def test_progress_in_a_log_is_one_plain_line_per_spec(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 30.0, 30.5, 45.0])  # began, then one reading per finished spec
    monkeypatch.setattr("sdpa_cli.report.progress.time.monotonic", lambda: next(clock))
    with Progress(4, estimates=[10.0, 0.0, 5.0, 5.0]) as p:
        assert not p.live  # stderr is captured: not a terminal
        p.start(0, "phase-diagram", "jacobian")
        p.done("passed", 30.0, None)
        p.start(1, "softmax-demo", "softmax-sweep")
        p.done("passed", 0.0, None, kept=True)
        p.start(2, "day74-dims", "variance")
        p.done("passed", 14.5, None)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    # 30 s where 10 were expected: the 10 s still planned become (30 + p)/(10 + p)·10 = 22,
    # with p = 20/2 · (1 − 1/3): the first spec's pace weighed against a share of the plan
    # that shrinks with each spec run (a kept one runs nothing); then (44.5 + q)/(15 + q)·5
    # with q = 10 · (1 − 2/3)
    assert err.splitlines() == [
        "[1/4] phase-diagram passed (30.0s; 0:30 elapsed, ~0:22 left)",
        "[2/4] softmax-demo passed (unchanged, kept; 0:30 elapsed, ~0:22 left)",
        "[3/4] day74-dims passed (14.5s; 0:45 elapsed, ~0:13 left)",
    ]


def test_time_left_starts_from_the_plan_and_follows_the_pace_slowly() -> None:
    p = Progress(3, quiet=True, estimates=[4.0, 2.0, 6.0])
    assert p.left(0) == 12.0  # nothing run yet: the plan as it stands
    p.i = 0
    p.done("passed", 8.0, None)  # twice as slow as estimated
    # the plan of the two left (8 s), times the pace weighed against 2/3 of half the plan
    # (4 s): (8 + 4)/(4 + 4) = 1.5, not yet the 2 of the measured rate
    assert p.left(1) == pytest.approx(8.0 * 12.0 / 8.0)
    p.i = 1
    p.done("passed", 4.0, None)  # still twice as slow: the weight is 1/3 of half the plan
    assert p.left(2) == pytest.approx(6.0 * 14.0 / 8.0)


def test_time_left_follows_the_measured_rate_after_the_first_specs() -> None:
    """A machine 3.4× slower than the plan: once three specs have run, the time left is
    the plan of the rest at the measured rate (the plan kept half its weight to the end,
    and the batch said ~0:10 left with minutes to go)."""
    p = Progress(20, quiet=True, estimates=[1.0] * 20)
    for i in range(5):
        p.i = i
        p.done("passed", 3.4, None)
    assert p.left(5) == pytest.approx(15 * 3.4)
    p.i = 5
    p.done("passed", 0.0, None, kept=True)  # a kept spec changes no pace
    assert p.left(6) == pytest.approx(14 * 3.4)


# --- item 2: train claims keep their verdict ---------------------------------------------

CLAIMS = tuple({"source": "001_409455fed8d25d77.txt, Empirical Validation", "claim": c,
                "verdict": v, "evidence": "at d_k = 256, unscaled vs sqrt (best rate each): "
                "sgd: unscaled trained worse; adam: unscaled trained worse",
                "robustness": r}
               for c, v, r in [('"training becomes unstable for large d_k"',
                             "holds as 'trains worse' (stalls; no more divergence than scaled)",
                             "robust"),
                            ('unscaled attention "requires much smaller learning rates"',
                             "not tested", "fragile: with the 1e-12 nudge, holds")])

GOLDEN_CLAIMS_80 = """\
claims
┏━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ claim                   ┃ verdict                  ┃ robust?                 ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ "training becomes       │ holds as 'trains worse'  │ robust                  │
│ unstable for large d_k" │ (stalls; no more         │                         │
│                         │ divergence than scaled)  │                         │
│ unscaled attention      │ not tested               │ fragile: with the 1e-12 │
│ "requires much smaller  │                          │ nudge, holds            │
│ learning rates"         │                          │                         │
└─────────────────────────┴──────────────────────────┴─────────────────────────┘
not shown: source, evidence (see --wide, or table.md)
"""


def test_claims_table_keeps_its_verdicts_at_80_columns() -> None:
    buf = io.StringIO()
    con = Console(file=buf, width=80, color_system=None, highlight=False)
    terminal.show_table(con, Table("claims", "claims", train_findings.CLAIM_COLUMNS, CLAIMS))
    assert "\n".join(x.rstrip() for x in buf.getvalue().splitlines()) + "\n" == \
        GOLDEN_CLAIMS_80


def test_a_table_the_study_keeps_off_the_terminal_is_not_printed() -> None:
    zeros = Table("sensitivity", "Learning-rate sensitivity", train_findings.CLAIM_COLUMNS,
                  CLAIMS, terminal=False)
    result = Result("train", "t", "t", "", "", {}, Table("t", "main", (), ()),
                    tables=(zeros,), notes=("learning-rate sensitivity not measured",))
    buf = io.StringIO()
    terminal.show(result, None, out=Console(file=buf, width=80, color_system=None))
    assert "Learning-rate sensitivity" not in buf.getvalue()
    assert "note: learning-rate sensitivity not measured" in buf.getvalue()


# --- item 3: --expand keeps the finding in view ------------------------------------------

def test_expand_fits_in_350_lines_with_every_step_panel(sdpa, monkeypatch) -> None:
    if not hasattr(terminal, "show_audit"):
        pytest.skip("the audit listing grouped by source (issue 28's branch) is not merged")
    monkeypatch.setenv("COLUMNS", "80")
    r = sdpa("worked-example", "money-bank-grows", "--expand", "--no-write")
    assert r.code == 0
    lines = r.out.splitlines()
    assert len(lines) <= 350
    panels = [line for line in lines if line.startswith("╭─ ")]
    # both parts' steps, each panel once: inputs, Q K V, stated vectors, scores, scaled,
    # variance, softmax, output; then the given scores' inputs, scaled, variance, exp, softmax
    assert len(panels) == 14 and len(set(panels)) == 14
    # the file once for the audit (and once per claim), not once per audited number (100)
    assert sum("000_0e5125495e9e" in line for line in lines) <= 10


# --- item 4: compare -----------------------------------------------------------------------

@pytest.mark.parametrize("args, missing", [((), "A"), (("outputs/variance",), "B")])
def test_compare_names_the_missing_folder(sdpa, args: tuple[str, ...], missing: str) -> None:
    r = sdpa("compare", *args)
    assert r.code == 2 and r.out == ""
    assert r.err == (f"sdpa compare: missing {missing} (usage: sdpa compare [OPTIONS] A B: "
                     "compare two run folders (or two batch folders): parameters, quantities, "
                     "figures)\n")


def test_compare_says_a_side_has_no_figures_instead_of_differs() -> None:
    none_in_b = [{"file": f, "same": False, "in_a": True, "in_b": False}
                 for f in ("histograms.png", "variance_vs_dim.png")]
    assert compare_text._figure_lines(none_in_b) == [
        "    no figures in B (run with --no-plots?); A has 2: not compared"]
    mixed = [{"file": "a.png", "same": False, "in_a": True, "in_b": True},
             {"file": "b.png", "same": False, "in_a": False, "in_b": True},
             {"file": "c.png", "same": True, "in_a": True, "in_b": True}]
    assert compare_text._figure_lines(mixed) == ["    figure a.png differs",
                                            "    figure b.png only in B"]


def test_a_run_from_flags_is_told_flags_not_spec_fields(sdpa) -> None:
    r = sdpa("softmax-sweep")
    assert r.code == 2
    assert r.err.startswith("sdpa softmax-sweep: say where the scores come from")
    assert "(--score-stds)" in r.err and "(--dims, or --d-model with --heads)" in r.err


# --- item 5: a scratch run joins a report (issue 37: it no longer does) ---------------------

def test_a_run_replacing_a_reported_folder_is_said() -> None:
    folder = Path("outputs/day74-dims")
    flags = batch_report.joined(folder, source="", from_flags=True, replaced=True)
    assert flags == ("updated outputs/index.md and report.html: day74-dims there is now this "
                     "run from flags (run the batch again to restore it)")
    shipped = batch_report.joined(folder, replaced=True, from_flags=False,
                                  source="000_0e5125495e9ebe01.txt, Results Visualization")
    assert shipped == "updated outputs/index.md and report.html (day74-dims replaced there)"


def test_scratch_run_beside_a_batch_leaves_its_report_alone(sdpa, workdir: Path) -> None:
    """Following the README: `sdpa run`, then example runs into outputs/: the report keeps
    its experiments, byte for byte, and nothing is said about it; a later batch leaves the
    scratch folders out too. Replacing a folder the report describes keeps it true."""
    out = workdir / "outputs"
    flags = ("--dims", "3", "--pairs", "50", "--no-plots", "--seed", "1")
    assert sdpa("run", "--out", "outputs", "--no-plots", str(_tiny_spec(workdir))).code == 0
    before = {f: (out / f).read_bytes() for f in ("index.md", "report.html")}
    first = sdpa("variance", *flags)
    assert first.code == 0 and (out / "variance" / "results.json").is_file()
    assert "index.md" not in first.out + first.err and "report.html" not in first.out
    assert {f: (out / f).read_bytes() for f in before} == before
    assert sdpa("run", "--out", "outputs", "--no-plots", str(_tiny_spec(workdir))).code == 0
    index = (out / "index.md").read_text(encoding="utf-8")
    assert "1 experiment:" in index and "(variance/table.md)" not in index
    replaced = sdpa("variance", *flags, "--out", "outputs/tiny")
    assert replaced.code == 0
    assert "updated outputs/index.md and report.html: tiny there is now this run from " \
        "flags" in " ".join(replaced.out.split())
    assert "seed 1" in (out / "report.html").read_text(encoding="utf-8")


def _tiny_spec(workdir: Path) -> Path:
    path = workdir / "tiny.yaml"
    path.write_text("study: variance\nseed: 3\ndims: [3]\npairs: 50\n", encoding="utf-8")
    return path


# --- item 9: seed, wrote line, notes -------------------------------------------------------

def test_a_drawn_seed_and_its_line_fit_in_80_columns() -> None:
    seeds = [fresh_entropy() for _ in range(200)]
    assert all(0 <= s < 2**32 for s in seeds) and len(set(seeds)) > 190
    widest = 2**32 - 1
    assert len(f"seed {widest} (give --seed {widest} to repeat this run exactly)") <= 80


def test_the_wrote_line_lists_the_manifest(tmp_path: Path) -> None:
    for name in ("manifest.json", "results.json", "a.png"):
        (tmp_path / name).write_text("{}", encoding="utf-8")
    assert terminal.written(tmp_path) == \
        f"wrote {tmp_path}/: manifest.json, results.json; figures: a.png"


def test_worked_example_notes_end_as_sentences(sdpa) -> None:
    r = sdpa("worked-example", "i-am-happy", "--no-write", "--format", "json")
    notes = json.loads(r.out)["notes"]
    assert notes and not any(n.rstrip().endswith("*") for n in notes)


# --- item 7: the gradient-norm figure ------------------------------------------------------

def _series(scaling: str, wq: list[float]) -> dict[str, Any]:
    part = {"mean": wq, "se": [0.01 * v for v in wq], "median": wq}
    return {"scaling": scaling, "dims": [16, 64, 256, 1024], "wq": part, "wk": part,
            "wv": part, "x": part, "slopes": {}}


def test_a_collapsing_rule_gets_a_row_of_its_own() -> None:
    collapsed = _series("none", [1.0, 0.5, 1e-9, 1e-69])
    sqrt = _series("sqrt", [30.0, 45.0, 20.0, 3.6])
    linear = _series("linear", [6.7, 6.6, 6.7, 6.7])
    assert gradient_figures._collapsed(collapsed)
    assert not gradient_figures._collapsed(sqrt) and not gradient_figures._collapsed(linear)
    figure = SimpleNamespace(title="norms", data={"series": [collapsed, sqrt, linear],
                                                  "sizes": "d_model = 32"})
    fig = gradient_figures.draw_norms(figure)  # type: ignore[arg-type]
    top = fig.axes[0]
    low, high = top.get_ylim()
    # the scaled rules' panel spans their own range (about one decade), not 70
    assert np.log10(high / low) < 2.0
    assert len(fig.axes) == 6
    flat = gradient_figures.draw_norms(SimpleNamespace(  # type: ignore[arg-type]
        title="norms", data={"series": [sqrt, linear], "sizes": ""}))
    assert len(flat.axes) == 4
