"""`sdpa variance` end to end: flags, files, formats, exit codes, determinism."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import EXPERIMENTS, per_spec, write_spec

ROW_FIELDS = {"dim", "scaling", "factor", "pairs", "mean", "variance", "std", "theory_mean",
              "theory_variance", "se", "ci_low", "ci_high", "z", "min", "max", "kurtosis"}


def test_the_first_command_a_user_types(sdpa, workdir):
    r = sdpa("variance", "--dims", "3", "100", "1000")
    assert r.code == 0, r.err
    assert r.err == ""  # the result goes to stdout, as pytest's and git's do
    assert "q·k by dimension and scaling" in r.out
    folder = workdir / "outputs" / "variance"
    for name in ("results.json", "table.csv", "table.md", "spec.yaml", "manifest.json",
                 "histograms.png", "variance_vs_dim.png"):
        assert (folder / name).is_file(), name
    doc = json.loads((folder / "results.json").read_text())
    assert [r["dim"] for r in doc["rows"]] == [3, 3, 100, 100, 1000, 1000]


def test_commas_and_spaces_both_work(sdpa):
    a = sdpa("variance", "--dims", "3,100", "1000", "--seed", "5", "--no-plots", "--format",
             "json").json()
    b = sdpa("variance", "--dims", "3", "100", "1000", "--seed", "5", "--no-plots",
             "--format", "json").json()
    assert a["rows"] == b["rows"]


def test_json_contract(sdpa):
    r = sdpa("variance", "--dims", "16", "64", "256", "512", "1024", "--pairs", "10000",
             "--format", "json", "--no-plots", "--seed", "1")
    assert r.code == 0
    doc = json.loads(r.out)  # stdout is exactly one JSON document
    for key in ("study", "name", "spec", "rows", "checks", "audit"):
        assert key in doc
    assert doc["study"] == "variance" and doc["name"] == "variance"
    assert doc["audit"] == []
    for row in doc["rows"]:
        assert set(row) >= ROW_FIELDS
        assert row["pairs"] == 10000
    for check in doc["checks"]:
        assert set(check) >= {"name", "passed", "detail"}


def test_unscaled_variance_grows_and_scaled_stays_near_one(sdpa):
    doc = sdpa("variance", "--dims", "16", "1024", "--pairs", "20000", "--format", "json",
               "--no-plots", "--seed", "3").json()
    rows = {(r["dim"], r["scaling"]): r for r in doc["rows"]}
    for d in (16, 1024):
        raw, scaled = rows[(d, "none")], rows[(d, "sqrt")]
        assert raw["theory_variance"] == d and scaled["theory_variance"] == pytest.approx(1.0)
        assert abs(raw["variance"] - d) <= 4 * raw["se"]
        assert abs(scaled["variance"] - 1) <= 4 * scaled["se"]
        assert scaled["variance"] == pytest.approx(raw["variance"] / d, rel=1e-12)


def test_spec_file_with_flag_override(sdpa, workdir):
    path = write_spec(workdir, "mine.yaml", "study: variance\ndims: [8]\npairs: 100\nseed: 2\n")
    doc = sdpa("variance", str(path), "--pairs", "5000", "--format", "json",
               "--no-plots").json()
    assert doc["name"] == "mine"
    assert doc["spec"]["pairs"] == 5000 and doc["rows"][0]["pairs"] == 5000
    assert (workdir / "outputs" / "mine" / "results.json").is_file()


@pytest.mark.parametrize("fmt,starts", [("csv", "dim,scaling,factor"), ("markdown", "# ")])
def test_other_formats_on_stdout_match_the_files(sdpa, workdir, fmt, starts):
    r = sdpa("variance", "--dims", "4", "--pairs", "50", "--seed", "1", "--no-plots",
             "--format", fmt)
    assert r.out.startswith(starts)
    name = {"csv": "table.csv", "markdown": "table.md"}[fmt]
    assert r.out == (workdir / "outputs" / "variance" / name).read_text()


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_same_seed_twice_gives_identical_results(sdpa, workdir):
    outs = []
    for out in ("a", "b"):
        assert sdpa("variance", "--dims", "3", "50", "--seed", "9", "--out", out, "-q",
                    "--workers", "1" if out == "a" else "2").code == 0
        outs.append({n: (workdir / out / n).read_bytes() for n in
                     ("results.json", "table.csv", "table.md", "histograms.png",
                      "variance_vs_dim.png")})
    assert outs[0] == outs[1]


def test_check_fails_with_exit_1_but_still_writes(sdpa, workdir):
    # A tolerance of 0.01 se cannot hold: the check fails, the folder is still written.
    r = sdpa("variance", "--dims", "5", "--pairs", "200", "--seed", "1", "--se-tolerance",
             "0.01", "--check", "--no-plots")
    assert r.code == 1
    assert "FAIL" in r.out
    assert json.loads((workdir / "outputs/variance/results.json").read_text())["passed"] is False
    r = sdpa("variance", "--dims", "5", "--pairs", "200", "--seed", "1", "--se-tolerance",
             "0.01", "--no-plots", "-q")
    assert r.code == 0  # without --check a failed check is reported, not fatal


@pytest.mark.parametrize("args,needle", [
    (["--dims", "3", "x"], "--dims: dims[1]: must be a whole number, got 'x'"),
    (["--dims", "0"], "--dims: dims[0]: must be ≥ 1, got 0"),
    (["--pairs", "1"], "--pairs: pairs: must be ≥ 2, got 1"),
    (["--correlation", "-2"], "--correlation: correlation: must be ≥ -1, got -2"),
    (["--format", "xml"], "--format"),
    (["--workers", "0"], "--workers"),
    (["--dimz", "3"], "No such option '--dimz'. (Did you mean one of: '--dims'"),
    (["missing.yaml"], "missing.yaml: no such file"),
])
def test_bad_usage_is_one_line_and_exit_2(sdpa, workdir, args, needle):
    r = sdpa("variance", *args)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.err
    assert "Traceback" not in r.err
    assert not (workdir / "outputs").exists()  # nothing ran, nothing written


def test_negative_numbers_are_values_not_options(sdpa):
    doc = sdpa("variance", "--dims", "4", "--mean", "-0.5", "--correlation", "-0.3",
               "--pairs", "100", "--no-plots", "--format", "json").json()
    assert doc["spec"]["mean"] == -0.5 and doc["spec"]["correlation"] == -0.3


def test_refuses_to_replace_a_folder_it_did_not_make(sdpa, workdir):
    precious = workdir / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("keep me")
    r = sdpa("variance", "--dims", "3", "--out", str(precious))
    assert r.code == 2 and "not an sdpa run folder" in r.err
    assert (precious / "thesis.tex").read_text() == "keep me"


def test_manifest_records_seed_versions_and_hashes(sdpa, workdir):
    assert sdpa("variance", "--dims", "3", "--pairs", "20", "-q").code == 0
    folder = workdir / "outputs" / "variance"
    man = json.loads((folder / "manifest.json").read_text())
    assert man["seed"]["bit_generator"] == "SFC64" and isinstance(man["seed"]["entropy"], int)
    assert man["spec"]["seed"] == man["seed"]["entropy"]
    assert man["versions"]["numpy"] and man["status"] == "passed"
    import hashlib
    for entry in man["outputs"]:
        data = (folder / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]


@pytest.mark.parametrize("spec_file", per_spec(sorted((EXPERIMENTS / "variance").glob("*.yaml"))),
                         ids=lambda p: p.stem)
def test_shipped_variance_specs_pass_their_checks(sdpa, spec_file):
    r = sdpa("variance", str(spec_file), "--check", "--no-plots", "-q", "--format", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["source"].split(",")[0].endswith(".txt")


def test_module_entry_point_and_version():
    done = subprocess.run([sys.executable, "-m", "sdpa_cli", "--version"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("sdpa ")


def test_help_shows_a_runnable_example(sdpa):
    r = sdpa("variance", "--help")
    assert r.code == 0 and "sdpa variance --dims 3 100 1000" in r.out


def test_running_again_says_which_run_it_replaced(sdpa, workdir, monkeypatch):
    args = ("variance", "--dims", "3", "--pairs", "50", "--seed", "11")
    monkeypatch.setattr("sys.argv", ["/venv/bin/sdpa", *args])  # as the manifest records it
    first = sdpa(*args)
    assert first.code == 0 and "replaced" not in first.out
    again = sdpa("variance", "--dims", "3", "5", "--pairs", "50", "--seed", "12", "--no-plots")
    assert again.code == 0
    said = " ".join(again.out.split())
    assert ("replaced the earlier run in outputs/variance/: sdpa variance --dims 3 --pairs 50 "
            "--seed 11 (") in said
    assert "seed 11, passed, 2 figures)" in said
