"""Issue 30's listed cases: sdpa's own files read as input, leftovers of killed runs, derived
names, and the numeric extremes and shapes that used to pass silently."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from conftest import write_spec

from sdpa_cli import schemas
from sdpa_cli.report import manifest
from sdpa_cli.schemas.validate import Mismatch, check

jsonschema = pytest.importorskip("jsonschema")

SMALL = ("--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q")
FAILING = "study: variance\ndims: [4]\npairs: 100\nseed: 1\nse_tolerance: 0.001\n"


def _mutations(doc: dict) -> list[object]:
    """Documents near `doc`: each field dropped, or set to a value of each JSON type."""
    out: list[object] = [doc, [], "x", None]
    values = [None, True, -1, 1.5, "", [1], {"a": 1}]
    stack: list[tuple[tuple, object]] = [((), doc)]
    while stack:
        path, value = stack.pop()
        children = value.items() if isinstance(value, dict) else \
            enumerate(value) if isinstance(value, list) else ()
        for key, child in list(children)[:6]:
            stack.append(((*path, key), child))
        if not path:
            continue
        for v in values:
            changed = copy.deepcopy(doc)
            target = changed
            for p in path[:-1]:
                target = target[p]
            target[path[-1]] = v
            out.append(changed)
        if isinstance(path[-1], str):
            dropped = copy.deepcopy(doc)
            target = dropped
            for p in path[:-1]:
                target = target[p]
            del target[path[-1]]
            out.append(dropped)
    return out


def _agrees(doc: object, name: str) -> None:
    schema = schemas.load(name)
    reference = jsonschema.Draft202012Validator(schema).is_valid(doc)
    try:
        check(doc, schema)
        ours = True
    except Mismatch:
        ours = False
    assert ours == reference, (name, json.dumps(doc)[:300])


def test_the_validator_agrees_with_jsonschema_on_sdpa_s_own_files(sdpa, workdir):
    """An independent reference: jsonschema judges every near-miss of a real results.json,
    manifest, batch manifest and last-failed record the same way sdpa's small validator
    does (hundreds of documents, both verdicts)."""
    write_spec(workdir, "one.yaml", FAILING)
    assert sdpa("run", "one.yaml", "--out", "B", "--no-plots", "-q", "--check").code == 1
    docs = {"result": json.loads((workdir / "B/one/results.json").read_text()),
            "manifest": json.loads((workdir / "B/one/manifest.json").read_text()),
            "batch-manifest": json.loads((workdir / "B/sdpa-batch.json").read_text()),
            "lastfailed": json.loads((workdir / "B/.sdpa-lastfailed.json").read_text())}
    verdicts = set()
    for name, doc in docs.items():
        check(doc, schemas.load(name))  # what sdpa writes fits
        for near in _mutations(doc):
            _agrees(near, name)
            verdicts.add(jsonschema.Draft202012Validator(schemas.load(name)).is_valid(near))
    assert verdicts == {True, False}


def _leftover(folder: Path, name: str, pid: int, files: dict[str, str]) -> Path:
    tmp = folder / f".{name}.tmp-{pid}-deadbeef"
    tmp.mkdir()
    for n, text in files.items():
        (tmp / n).write_text(text, encoding="utf-8")
    return tmp


def _dead_pid() -> int:
    pid = 4_000_000  # above any live PID here (pid_max is 4194304 at most)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1


def test_compare_ignores_a_killed_runs_leftovers(sdpa, workdir):
    write_spec(workdir, "one.yaml", "study: variance\ndims: [4]\npairs: 100\nseed: 1\n")
    for side in ("A", "B"):
        assert sdpa("run", "one.yaml", "--out", side, "--no-plots", "-q").code == 0
    dead = _dead_pid()
    half = (workdir / "A/one/results.json").read_text()[:100]
    _leftover(workdir / "A", "one", dead, {"results.json": half})  # one on each side,
    _leftover(workdir / "B", "one", dead + 1, {"results.json": "{"})  # each half-written
    _leftover(workdir / "B", "two", dead, {"results.json": half})  # one in B only
    (workdir / "B" / f".index.md.tmp-{dead}-deadbeef").write_text("# half")
    r = sdpa("compare", "A", "B")
    assert r.code == 0 and "only in" not in r.out, r.err
    r = sdpa("compare", "A", "B", "--exact")
    assert r.code == 0, r.err


def test_a_later_batch_removes_only_leftovers_that_are_provably_sdpa_s(sdpa, workdir):
    write_spec(workdir, "one.yaml", "study: variance\ndims: [4]\npairs: 100\nseed: 1\n")
    assert sdpa("run", "one.yaml", "--out", "B", "--no-plots", "-q").code == 0
    dead, b = _dead_pid(), workdir / "B"
    gone = [_leftover(b, "one", dead, {"results.json": "{"}),
            _leftover(b, "other", dead, {"table.md": "x", "spec.yaml": "y"})]
    for name in ("index.md", "report.html", "sdpa-batch.json", ".sdpa-lastfailed.json"):
        gone.append(b / f".{name}.tmp-{dead}-0123abcd")
        gone[-1].write_text("half")
    kept = [_leftover(b, "mine", dead, {"notes.txt": "my notes"}),  # not a file sdpa writes
            _leftover(b, "live", os.getpid(), {"results.json": "{"}),  # its writer is alive
            b / f".notes.txt.tmp-{dead}-0123abcd"]  # not one of the batch's own files
    kept[-1].write_text("mine")
    assert sdpa("run", "one.yaml", "--out", "B", "--no-plots", "-q").code == 0
    assert [p.name for p in gone if os.path.lexists(p)] == []
    assert [p.name for p in kept if not os.path.lexists(p)] == []


def test_an_edited_status_fails_run_check_and_keeps_the_record(sdpa, workdir):
    write_spec(workdir, "one.yaml", FAILING)
    assert sdpa("run", "one.yaml", "--out", "B", "--no-plots", "-q", "--check").code == 1
    path = workdir / "B/one/manifest.json"
    written = path.read_bytes()
    again = sdpa("run", "one.yaml", "--out", "B", "--no-plots", "-q", "--check")
    assert again.code == 1 and path.read_bytes() == written  # the control: kept, failed
    record = (workdir / "B/.sdpa-lastfailed.json").read_bytes()
    path.write_text(path.read_text().replace('"status": "failed"', '"status": "passed"'))
    r = sdpa("run", "one.yaml", "--out", "B", "--no-plots", "-q", "--check")
    assert r.code == 2 and "passed (unchanged" not in r.err
    assert r.err.strip() == (
        "output folder: B/one/manifest.json: manifest_sha256: expected the digest of the other "
        "fields; they were edited since sdpa wrote them; the run folder is damaged and sdpa "
        "neither keeps nor replaces it: move it away or delete it")
    assert (workdir / "B/.sdpa-lastfailed.json").read_bytes() == record


def test_a_manifest_before_the_digest_is_run_again_not_kept(sdpa, workdir):
    write_spec(workdir, "one.yaml", FAILING)
    assert sdpa("run", "one.yaml", "--out", "B", "--no-plots", "-q").code == 0
    path = workdir / "B/one/manifest.json"
    doc = json.loads(path.read_text())
    del doc[manifest.SELF_DIGEST]
    path.write_text(json.dumps(doc))
    r = sdpa("run", "one.yaml", "--out", "B", "--no-plots", "-q", "--check")
    assert r.code == 1, r.err
    assert manifest.SELF_DIGEST in json.loads(path.read_text())  # run again, written anew


def _fake(folder: Path, se: object, variance: float) -> None:
    folder.mkdir()
    doc = {"schema_version": 1, "sdpa_version": "0", "study": "variance", "name": "r",
           "title": "", "source": "", "spec": {"study": "variance"}, "checks": [], "audit": [],
           "passed": True, "theory": [], "notes": [],
           "rows": [{"dim": 4, "variance": variance, "se": se}]}
    (folder / "results.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(("se_a", "se_b"), [(None, None), (0.0, 0.0), (None, 0.0)])
def test_no_standard_error_on_either_side_is_judged_exactly(sdpa, workdir, se_a, se_b):
    _fake(workdir / "A", se_a, 3.35)
    _fake(workdir / "B", se_b, 1e6)
    r = sdpa("compare", "A", "B")
    assert r.code == 1 and "variance: 3.35 vs 1e+06 (differs ✗)" in r.out
    _fake(workdir / "C", se_b, 3.35)
    assert sdpa("compare", "A", "C").code == 0  # equal values agree


def test_a_nan_standard_error_is_a_damaged_file_not_agreement(sdpa, workdir):
    _fake(workdir / "A", 0.1, 3.35)
    _fake(workdir / "B", 0.1, 1e6)
    path = workdir / "B/results.json"
    path.write_text(path.read_text().replace('"se": 0.1', '"se": NaN'))
    r = sdpa("compare", "A", "B")
    assert r.code == 2 and r.err.strip().startswith("B/results.json: rows[0].se: expected a "
                                                    "number or null")


def test_a_dotdot_spec_gets_a_folder_of_its_own(sdpa, workdir):
    write_spec(workdir, "..yaml", "study: variance\nname: null\ndims: [3]\npairs: 10\nseed: 1\n")
    for _ in range(2):  # the second run used to be refused: the batch folder was the run's
        r = sdpa("run", "..yaml", "--no-plots", "-q")
        assert r.code == 0, r.err
    out = workdir / "outputs"
    assert sorted(p.name for p in out.iterdir()) == [".sdpa-lastfailed.json", "index.md",
                                                     "report.html", "sdpa-batch.json", "spec"]
    assert manifest.run_folder_problem(out / "spec") == ""


def test_run_dot_does_not_run_its_own_outputs(sdpa, workdir):
    write_spec(workdir, "one.yaml", "study: variance\nname: one\ndims: [3]\npairs: 10\n"
                                    "seed: 1\n")
    for _ in range(3):
        r = sdpa("run", ".", "--no-plots", "--format", "json", "-q")
        assert r.code == 0, r.err
        assert [e["name"] for e in r.json()["experiments"]] == ["one"]
    shutil.copytree(workdir / "outputs/one", workdir / "copy")  # a user's copy, edited:
    (workdir / "copy/notes.txt").write_text("mine")  # still a run folder by its marker
    assert [e["name"] for e in sdpa("run", ".", "--no-plots", "--format", "json",
                                    "-q").json()["experiments"]] == ["one"]


def test_names_are_derived_in_one_place():
    from sdpa_cli.io import names

    assert names.derive(".") == "spec" and names.derive("") == "spec"
    assert names.derive("a b/ü") == "a-b" and names.derive("-.x.-") == "x"
    assert names.derive("n" * 300) == "n" * 100
    assert names.check_derived("index.md", "index.md.yaml") is not None
    assert names.check_derived("index", "index.yaml") is None


@pytest.mark.parametrize("margin", [-1e308, -1e100, -1e3, -40.0, -3.0, 0.0, 3.0, 40.0, 700.0])
@pytest.mark.parametrize("n", [2, 4, 1000])
def test_leading_key_matches_mpmath_at_every_margin(margin, n):
    """Against 50-digit arithmetic (mpmath's exponent never overflows): margin −1e100 used to
    give ‖J‖_F = 4.24 and entropy 0 at n = 4, where the truth is 0.471 and ln 3."""
    mpmath = pytest.importorskip("mpmath")
    from sdpa_cli.studies.saturation.keys import leading_key

    mpmath.mp.dps = 50
    g = mpmath.mpf(margin)
    p = [1 / (1 + (n - 1) * mpmath.exp(-g))]
    p += [mpmath.exp(-g) * p[0]] * (n - 1)
    entropy = -sum(x * mpmath.log(x) for x in p if x > 0)
    if n <= 4:  # every entry of J = diag(p) − ppᵀ
        frob2 = sum(((x if i == j else 0) - x * y) ** 2
                    for i, x in enumerate(p) for j, y in enumerate(p))
    else:  # the four kinds of entry, counted
        p1, p0 = p[0], p[1]
        frob2 = (p1 - p1 * p1) ** 2 + (n - 1) * (p0 - p0 * p0) ** 2 \
            + 2 * (n - 1) * (p1 * p0) ** 2 + (n - 1) * (n - 2) * (p0 * p0) ** 2
    got = leading_key([n], margin)
    for value, ref in ((got.entropy[0], entropy), (got.frobenius[0], mpmath.sqrt(frob2)),
                       (got.max_prob[0], p[0])):
        assert math.isclose(float(value), float(ref), rel_tol=1e-12, abs_tol=1e-300), \
            (float(value), float(ref))


def test_a_spec_at_the_shape_limits_passes_the_shape_check():
    from sdpa_cli.errors import InputError
    from sdpa_cli.spec.shape import MAX_COMMAS, MAX_LINES, check

    text = "study: variance\n" + "#\n" * (MAX_LINES - 2) + "x: [" + "1," * MAX_COMMAS + "1]\n"
    assert text.count("\n") == MAX_LINES and text.count(",") == MAX_COMMAS
    check(text, "s.yaml")  # exactly at both limits: accepted
    for more in (text + "\n", text.replace("]", ",]")):
        with pytest.raises(InputError):
            check(more, "s.yaml")


@pytest.mark.slow  # PyYAML reads 10000 lines and 20000 items: seconds on a busy machine
def test_a_spec_at_the_shape_limits_is_parsed(workdir):
    from sdpa_cli.spec.shape import MAX_COMMAS, MAX_LINES
    from sdpa_cli.spec.yamlio import parse

    text = "study: variance\n" + "#\n" * (MAX_LINES - 2) + "x: [" + "1," * MAX_COMMAS + "1]\n"
    assert len(parse(text, "s.yaml").data["x"]) == MAX_COMMAS + 1
