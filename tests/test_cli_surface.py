"""What a user sees around the numbers: help, -q, spec names, --wide, findings."""

from __future__ import annotations

import pytest

from sdpa_cli.cli import group as cli_module

SMALL = ["--dims", "3", "1000", "--pairs", "400", "--seed", "5", "--no-plots"]


def test_bare_sdpa_prints_the_help_laid_out(sdpa):
    r = sdpa()
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0].startswith("Usage: sdpa")
    # one command per line, as --help lays them out (not squashed onto one line)
    assert sum(1 for line in lines if line.strip().startswith(("variance ", "run "))) == 2


def test_help_shows_each_command_description_whole(sdpa, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = sdpa("--help")
    commands = cli_module.cli.commands
    for name, command in commands.items():
        short = command.short_help
        assert short, name
        assert len(short) <= 55, name  # fits beside the name at 80 columns
        assert short in " ".join(r.out.split()), name
    commands_part = r.out.split("Commands:")[1]
    assert "..." not in commands_part and "…" not in commands_part


def test_quiet_still_reports_a_failed_check_in_one_line(sdpa):
    # --se-tolerance 0.001 makes the z checks fail for almost any sample
    r = sdpa("variance", *SMALL, "--se-tolerance", "0.001", "-q")
    assert r.code == 0  # without --check a failed check is reported, not an exit code
    fails = [line for line in r.err.splitlines() if "FAIL" in line]
    assert fails and all(line.startswith("sdpa: variance: FAIL d=") for line in fails)
    assert "┃" not in r.err  # and no table
    r = sdpa("variance", *SMALL, "--se-tolerance", "0.001", "-q", "--check")
    assert r.code == 1 and "FAIL" in r.err


def test_quiet_run_is_silent_when_all_passes(sdpa):
    r = sdpa("variance", *SMALL, "-q")
    assert r.code == 0 and r.err == ""


@pytest.mark.parametrize("study,name", [("variance", "day74-dims"),
                                        ("worked-example", "money-bank-grows")])
def test_a_shipped_spec_is_named_by_its_name(sdpa, workdir, study, name):
    extra = ["--pairs", "300"] if study == "variance" else []
    r = sdpa(study, name, *extra, "--no-plots", "-q")
    assert r.code == 0, r.err
    assert (workdir / "outputs" / name / "results.json").is_file()


def test_a_local_file_with_that_name_still_wins_when_given_as_a_path(sdpa, workdir):
    (workdir / "day74-dims").mkdir()  # a folder of that name is not a spec name
    r = sdpa("variance", "day74-dims", "--no-plots", "-q")
    assert r.code == 2


def test_wide_shows_every_column_and_narrow_names_the_rest(sdpa, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    narrow = sdpa("variance", *SMALL)
    assert "not shown: mean, kurtosis, theory kurt." in narrow.out
    assert all(len(line) <= 80 for line in narrow.out.splitlines() if line[:1] in "┏┃│└")
    wide = sdpa("variance", *SMALL, "--wide")
    header = next(line for line in wide.out.splitlines() if line.startswith("┃"))
    for column in ("mean", "kurtosis", "theory kurt."):
        assert column in header
    assert "not shown" not in wide.out


def test_findings_follow_the_data(sdpa):
    r = sdpa("variance", *SMALL)
    found = [line for line in r.out.splitlines() if line.startswith("found:")]
    assert found[0].startswith("found: raw q·k: the variance grows like d")
    assert "stays flat" in found[1]
    assert sdpa("variance", *SMALL, "--format", "json").json()["findings"] == [
        line.removeprefix("found: ") for line in found]


def test_plain_words_by_default_exact_forms_under_explain(sdpa):
    plain = sdpa("variance", *SMALL)
    assert "expect:" in plain.out and "theory:" not in plain.out
    explained = sdpa("variance", *SMALL, "--explain")
    assert "theory:" in explained.out and "variance-gamma" in explained.out


def test_quiet_batch_names_each_failed_spec_in_one_line(sdpa, workdir):
    (workdir / "specs").mkdir()
    (workdir / "specs" / "bad.yaml").write_text(
        "study: variance\ndims: [3, 1000]\npairs: 400\nseed: 5\nse_tolerance: 0.001\n")
    (workdir / "specs" / "good.yaml").write_text(
        "study: variance\ndims: [3]\npairs: 400\nseed: 5\n")
    r = sdpa("run", "specs", "--out", "batch", "--no-plots", "-q")
    assert r.code == 0
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sdpa: specs/bad.yaml: FAIL d=3 none")


@pytest.mark.parametrize("args,first", [
    (["softmax-sweep", "--scores", "1", "0.5", "0", "--scales", "1", "10"], "Softmax turns"),
    (["jacobian", "--score-stds", "0.5", "4", "--keys", "16", "--trials", "200"],
     "With n random scores"),
])
def test_saturation_studies_speak_plainly_first(sdpa, args, first):
    r = sdpa(*args, "--seed", "1", "--no-plots")
    expect = [line for line in r.out.splitlines() if line.startswith("expect:")]
    assert expect and expect[0].startswith(f"expect: {first}")
    assert "secular equation" not in r.out  # jargon only under --explain
    assert "secular equation" in sdpa(*args, "--seed", "1", "--no-plots", "--explain").out \
        or args[0] == "softmax-sweep"


def _found(r) -> list[str]:
    return [line.removeprefix("found: ") for line in r.out.splitlines()
            if line.startswith("found:")]


def test_saturation_findings_are_decided_by_the_data(sdpa):
    """softmax-sweep and jacobian say what happened, with values recomputed here from the
    definitions: softmax([1, .5, 0, -.5]·c) and ‖diag(p) − ppᵀ‖_F."""
    import numpy as np

    def probs(c: float) -> np.ndarray:
        e = np.exp(c * np.array([1.0, 0.5, 0.0, -0.5]))
        return e / e.sum()

    r = sdpa("softmax-sweep", "--scores", "1", "0.5", "0", "-0.5", "--scales", "1", "20",
             "--no-write", "--format", "json")
    assert r.json()["findings"] == [
        f"the scores: the largest weight rises from {probs(1).max():.3f} at ×1 "
        f"to {probs(20).max():.3f} at ×20."]

    def frob(c: float) -> float:
        p = probs(c)
        return float(np.linalg.norm(np.diag(p) - np.outer(p, p)))

    r = sdpa("jacobian", "--scores", "1", "0.5", "0", "-0.5", "--scales", "1", "20",
             "--no-write")
    assert _found(r) == [f"the scores: ‖J‖_F falls from {frob(1):.3f} at ×1 to "
                         f"{frob(20):.3g} at ×20."]
    # Random scores: the unscaled largest weight rises with d_k, ÷√d_k holds it within 3 se.
    r = sdpa("softmax-sweep", "--dims", "16", "256", "--keys", "10", "--trials", "300",
             "--seed", "1", "--no-write", "--format", "json")
    found = r.json()["findings"]
    assert found[0].startswith("none (n = 10): the mean largest weight rises from")
    assert found[1].startswith("sqrt (n = 10): the mean largest weight stays level")
    # N(0, s²) scores: the peak of ‖J‖_F, with its standard error, beside √(2 ln n).
    r = sdpa("jacobian", "--score-stds", "0.5", "1", "2", "4", "--keys", "16", "--trials",
             "400", "--seed", "1", "--no-write", "--format", "json")
    (peak,) = r.json()["findings"]
    assert peak.startswith("n = 16: ‖J‖_F peaks at s* = ") and "± " in peak
    assert peak.endswith(f"falls on both sides (√(2 ln n) = {np.sqrt(2 * np.log(16)):.2f}).")


@pytest.mark.parametrize("typed,meant", [("varience", "variance"), ("inspct", "inspect"),
                                         ("compair", "compare")])
def test_a_misspelled_command_gets_a_did_you_mean(sdpa, typed, meant):
    r = sdpa(typed)
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == (f"sdpa: No such command {typed!r} (did you mean {meant!r}?); "
                             "`sdpa --help` lists them.")
    assert sdpa("xyzzy").err.strip() == "sdpa: No such command 'xyzzy'."  # nothing near it
