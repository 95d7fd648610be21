"""`sdpa run` keeps run folders whose spec, code, libraries and figure settings are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_spec

from sdpa_cli.report import unchanged

OK = "study: variance\ndims: [4]\npairs: 200\nseed: 1\n"
FAILING = "study: variance\ndims: [4]\npairs: 200\nseed: 1\nse_tolerance: 0.001\n"


@pytest.fixture
def specs(workdir: Path) -> Path:
    folder = workdir / "specs"
    folder.mkdir()
    write_spec(folder, "a-ok.yaml", OK)
    write_spec(folder, "b-failing.yaml", FAILING)
    return folder


def _run(sdpa, specs: Path, *extra: str) -> dict[str, dict]:
    r = sdpa("run", str(specs), "--no-plots", "-q", "--format", "json", *extra)
    assert r.code in (0, 1), r.err
    return {e["name"]: e for e in r.json()["experiments"]}


def _stamp(workdir: Path, name: str) -> int:
    return (workdir / "outputs" / name / "manifest.json").stat().st_ino


def test_second_run_keeps_everything_and_force_reruns(sdpa, specs, workdir):
    first = _run(sdpa, specs)
    assert not any(e["kept"] for e in first.values())
    manifest = json.loads((workdir / "outputs" / "a-ok" / "manifest.json").read_text())
    assert manifest["code_sha256"] == unchanged.code_digest()
    assert manifest["render"] == {"plots": False, "svg": False, "dpi": None}
    before = _stamp(workdir, "a-ok")
    second = _run(sdpa, specs)
    assert all(e["kept"] for e in second.values())
    assert {n: e["status"] for n, e in second.items()} == {"a-ok": "passed",
                                                           "b-failing": "failed"}
    assert _stamp(workdir, "a-ok") == before  # the folder was not rewritten
    index = (workdir / "outputs" / "index.md").read_text()
    # still reported whole: its verdict and its failed check, linked to its folder's detail
    assert "(b-failing/table.md)\n\n**failed**" in index
    assert "- failed check " in index
    forced = _run(sdpa, specs, "--force")
    assert not any(e["kept"] for e in forced.values())
    assert _stamp(workdir, "a-ok") != before


def test_a_kept_failure_still_fails_the_check_and_the_junit_report(sdpa, specs, workdir):
    _run(sdpa, specs)
    xml = workdir / "j.xml"
    r = sdpa("run", str(specs), "--no-plots", "-q", "--check", "--junit-xml", str(xml))
    assert r.code == 1
    text = xml.read_text()
    assert 'name="b-failing"' in text and 'failures="2"' in text and 'name="kept"' in text


@pytest.mark.parametrize("change", ["spec", "code", "figures", "library"])
def test_any_change_reruns_the_spec(sdpa, specs, workdir, monkeypatch, change):
    _run(sdpa, specs)
    extra: tuple[str, ...] = ()
    if change == "spec":
        write_spec(specs, "a-ok.yaml", OK.replace("pairs: 200", "pairs: 201"))
    elif change == "code":
        monkeypatch.setattr(unchanged, "code_digest", lambda: "0" * 64)
    elif change == "figures":
        extra = ("--svg",)
    else:
        from sdpa_cli.report import manifest

        real = manifest.versions
        monkeypatch.setattr(manifest, "versions", lambda: {**real(), "numpy": "0.0"})
    again = _run(sdpa, specs, *extra)
    assert again["a-ok"]["kept"] is False
    assert again["b-failing"]["kept"] is (change == "spec")


def test_a_folder_changed_by_hand_is_never_kept(sdpa, specs, workdir):
    _run(sdpa, specs)
    folder = workdir / "outputs" / "a-ok"
    m = json.loads((folder / "manifest.json").read_text())
    same = {"input_sha256": m["input_sha256"], "render": m["render"], "versions": m["versions"]}
    assert unchanged.kept_status(folder, **same) == "passed"
    csv = folder / "table.csv"
    csv.write_text(csv.read_text() + "edited\n")
    assert unchanged.kept_status(folder, **same) is None
    r = sdpa("run", str(specs), "--no-plots", "-q")
    assert r.code == 2 and "files were changed since sdpa wrote them (table.csv)" in r.err


def test_code_digest_covers_every_source_file():
    import sdpa_cli

    root = Path(sdpa_cli.__file__).parent
    assert len(unchanged.code_digest()) == 64
    assert unchanged.code_digest() is unchanged.code_digest()  # computed once
    assert sum(1 for _ in root.rglob("*.py")) > 30


def test_the_summary_says_unchanged_kept(sdpa, specs):
    _run(sdpa, specs)
    r = sdpa("run", str(specs), "--no-plots")
    # the spec's progress line, and the summary's headline (each row marks it "=" and "kept")
    assert "a-ok passed (unchanged, kept" in r.err
    assert "2 experiments: 1 passed, 1 failed (2 unchanged, kept)" in r.out


def test_quiet_still_names_a_kept_failure(sdpa, specs):
    _run(sdpa, specs)
    r = sdpa("run", str(specs), "--no-plots", "-q")
    assert r.err.splitlines() == [f"sdpa: {specs / 'b-failing.yaml'}: FAIL d=4 none, d=4 sqrt"]


# --- a run is unchanged only if what it read is: a skip is never kept ---------------------

TINY = ("study: inspect\nmodel: org/tiny\ntext: [t.txt]\nseq_len: [8]\nsequences: 2\n"
        "induction_sequences: 0\n")


def _tiny_model(workdir: Path) -> None:
    """A tiny BERT in the Hugging Face cache layout under $HF_HOME, as the fetcher puts one."""
    import inspect_fixtures as fx

    repo = workdir / "hf" / "hub" / "models--org--tiny"
    fx.bert(repo / "snapshots" / "r1")
    fx.write_tokenizer(repo / "snapshots" / "r1", "bert")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("r1", encoding="utf-8")


def test_a_skipped_run_is_never_kept_once_its_model_is_here(sdpa, workdir, monkeypatch):
    pytest.importorskip("safetensors")
    pytest.importorskip("tokenizers")
    import inspect_fixtures as fx

    monkeypatch.setenv("HF_HOME", str(workdir / "hf"))
    folder = workdir / "specs"
    folder.mkdir()
    write_spec(folder, "tiny.yaml", TINY)
    (folder / "t.txt").write_text(fx.text(100), encoding="utf-8")
    first = _run(sdpa, folder)["tiny"]
    assert first["status"] == "skipped" and not first["kept"]
    assert _run(sdpa, folder)["tiny"]["kept"] is False  # still missing: asked again
    _tiny_model(workdir)  # the model arrives (python -m sdpa_cli.fetch, say)
    again = _run(sdpa, folder)["tiny"]
    assert again["status"] == "passed" and again["kept"] is False
    assert _run(sdpa, folder)["tiny"]["kept"] is True  # now unchanged: kept
    # what the run read is part of it: a text edited in place, or new weights, rerun it
    (folder / "t.txt").write_text(fx.text(100)[::-1], encoding="utf-8")
    assert _run(sdpa, folder)["tiny"]["kept"] is False
    assert _run(sdpa, folder)["tiny"]["kept"] is True
    weights = workdir / "hf" / "hub" / "models--org--tiny" / "snapshots" / "r1"
    fx.bert(weights, seed=1)
    assert _run(sdpa, folder)["tiny"]["kept"] is False
