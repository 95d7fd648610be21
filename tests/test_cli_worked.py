"""`sdpa worked-example` end to end: --list, NAME lookup, --all, --check, user specs, errors."""

from __future__ import annotations

import json
import re

import pytest
from conftest import write_spec

SHIPPED = ["money-bank-grows", "variance-10-to-70", "variance-by-dimension",
           "d512-numerical-example", "visual-summary", "i-am-happy", "cost-arithmetic"]

# A teacher's own notes: one attention example with two printed numbers, the second wrong.
NOTES = """\
study: worked-example
title: My notes
source: "lecture-3.md, attention by hand"
parts:
  - name: two-tokens
    kind: attention
    tokens: [a, b]
    q: [[2, 1, 3], [1, 0, 1]]
    k: [[1, 0, 2], [2, 1, 0]]
    v: [[1, 0], [0, 1]]
documented:
  - {where: "QKᵀ row 1", quantity: "scores[0]", value: [8, 5]}
  - {where: "weights row 1", quantity: "weights[0]", value: [0.90, 0.10]%s}
"""


def notes(workdir, extra: str = "", name: str = "my-notes.yaml"):
    return write_spec(workdir, name, NOTES % extra)


def test_list_names_describes_and_sources_every_example(sdpa):
    r = sdpa("worked-example", "--list")
    assert r.code == 0 and r.err == ""
    for name in SHIPPED:
        assert name in r.out
    # each document by its short title, with its file name beside it
    assert "source: Day 74: Why do we scale self-attention? (000_0e5125495e9ebe01.txt)" in r.out
    doc = sdpa("worked-example", "--list", "--format", "json").json()
    listed = [e["name"] for e in doc["examples"]]
    assert sorted(listed) == sorted(SHIPPED)
    assert listed[0] == "money-bank-grows"  # grouped by document, 000 first
    assert all(e["description"] and e["source"] for e in doc["examples"])


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_run_by_name(sdpa, workdir):
    r = sdpa("worked-example", "money-bank-grows")
    assert r.code == 0, r.err
    assert r.err == ""  # the result is the command's product: stdout
    for text in ("stated vectors versus embeddings · weights", "scores QKᵀ",
                 "2×1 + 1×0 + 3×2 = 8", "softmax weights, row by row",
                 "audit: 8 errors of its own, 1 inconsistency", "inconsistent",
                 "Detailed Softmax Comparison, Original Matrix"):
        assert text in r.out, text
    folder = workdir / "outputs" / "money-bank-grows"
    for name in ("results.json", "table.csv", "table.md", "spec.yaml", "manifest.json",
                 "weights.png"):
        assert (folder / name).is_file(), name
    doc = json.loads((folder / "results.json").read_text())
    assert {"scores", "scaled_scores", "weights", "output"} <= set(doc["steps"])
    assert doc["steps"]["scores"] == [[8, 5, 8], [3, 4, 8], [4, 1, 5]]
    assert set(doc["parts"]) == {"stated-vectors", "softmax-tables"}
    assert doc["parts"]["softmax-tables"]["steps"]["scores"] == [[5, 10, 7], [6, 5, 3],
                                                                  [4, 7, 2]]
    assert {"documented", "computed", "tolerance", "status"} <= set(doc["audit"][0])
    assert set(doc["rows"][0]) == {"part", "step", "i", "j", "value", "expansion"}
    assert doc["spec"]["seed"] is None  # nothing random: no seed drawn
    # Panels are headed as the document names the part, never by the spec's identifier.
    page = (folder / "table.md").read_text()
    assert "### Steps 1-5 · 2. scores QKᵀ" in page
    assert "### Detailed Softmax Comparison · 1. scores QKᵀ (given)" in page
    assert "### stated-vectors" not in page and "### softmax-tables" not in page


def test_unknown_name_is_exit_2_with_a_suggestion(sdpa):
    r = sdpa("worked-example", "money-bank")
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "did you mean 'money-bank-grows'?" in lines[0]


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_all_as_one_json_document(sdpa, workdir):
    r = sdpa("worked-example", "--all", "--format", "json", "--no-plots", "--check")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [e["name"] for e in doc["examples"]] == [
        "money-bank-grows", "variance-10-to-70", "variance-by-dimension",
        "d512-numerical-example", "visual-summary", "i-am-happy", "cost-arithmetic"]
    assert doc["passed"] is True
    for example in doc["examples"]:
        assert example["study"] == "worked-example" and example["audit"]
        assert (workdir / "outputs" / example["name"] / "results.json").is_file()
    numbers = [a for e in doc["examples"] for a in e["audit"] if a["kind"] == "number"]
    found = sum(a["status"] == "mismatch" for a in numbers)
    assert r.err == ""  # the document replaces the summary; nothing failed to say
    # for people (no --format): every finding still reported, root errors first, then how
    # many match
    r = sdpa("worked-example", "--all", "--no-plots", "--no-write")
    assert found > 0 and f"{len(numbers) - found} of {len(numbers)} match" in r.out
    assert "errors of their own" in r.out


def test_all_into_one_folder_and_as_csv(sdpa, workdir):
    r = sdpa("worked-example", "--all", "--format", "csv", "--no-plots", "-q", "--out",
             "batch")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0] == "example,part,step,i,j,value,expansion"
    assert {line.split(",")[0] for line in lines[1:]} == set(SHIPPED)
    assert sorted(p.name for p in (workdir / "batch").iterdir()) == sorted(SHIPPED)


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_all_check_fails_when_a_local_example_disagrees(sdpa, workdir):
    # A local experiments/worked-example/ joins (and may shadow) the shipped examples.
    (workdir / "experiments" / "worked-example").mkdir(parents=True)
    notes(workdir / "experiments" / "worked-example", name="mine.yaml")
    r = sdpa("worked-example", "--all", "--format", "json", "--no-plots", "--check")
    assert r.code == 1
    doc = json.loads(r.out)
    assert len(doc["examples"]) == len(SHIPPED) + 1 and doc["passed"] is False
    assert "sdpa: mine: FAIL audit" in r.err  # beside the document, one line
    assert sdpa("worked-example", "mine", "--no-plots", "-q", "--check").code == 1


def test_user_spec_check(sdpa, workdir):
    path = notes(workdir)
    # softmax((8, 5)/√3) = (0.8477, 0.1523): the printed 0.90 and 0.10 are wrong.
    r = sdpa("worked-example", str(path), "--check", "--no-plots")
    assert r.code == 1
    assert "FAIL audit: 2 unaccepted mismatch(es)" in r.out
    assert (workdir / "outputs" / "my-notes" / "results.json").is_file()  # still written
    assert sdpa("worked-example", str(path), "--no-plots", "-q").code == 0  # no --check
    accepted = notes(workdir, ', accepted: "slide 4 rounds wrongly"')
    assert sdpa("worked-example", str(accepted), "--check", "--no-plots", "-q").code == 0


def test_stale_acceptance_fails_the_check(sdpa, workdir):
    text = (NOTES % "").replace("[0.90, 0.10]", "[0.85, 0.15]") + \
        '  - {where: x, quantity: "scores[1][0]", value: 3, accepted: "was wrong once"}\n'
    path = write_spec(workdir, "fixed.yaml", text)
    r = sdpa("worked-example", str(path), "--check", "--no-plots", "--format", "json")
    assert r.code == 1
    check = next(c for c in r.json()["checks"] if c["name"] == "audit")
    assert "now match" in check["detail"]


def test_expand_flag_and_spec_field(sdpa, workdir):
    path = notes(workdir)
    r = sdpa("worked-example", str(path), "--no-plots")
    assert "with expand, every entry is shown" in r.out and "2×1 + 1×0 + 3×2 = 8" not in r.out
    r = sdpa("worked-example", str(path), "--no-plots", "--expand")
    assert "q_a·k_a = 2×1 + 1×0 + 3×2 = 8" in r.out
    assert "q_b·k_b = 1×2 + 0×1 + 1×0 = 2" in r.out


def test_results_are_identical_run_to_run(sdpa, workdir):
    outs = []
    for out in ("a", "b"):
        assert sdpa("worked-example", "visual-summary", "--out", out, "-q").code == 0
        outs.append({n: (workdir / out / n).read_bytes() for n in
                     ("results.json", "table.csv", "table.md", "weights.png")})
    assert outs[0] == outs[1]


@pytest.mark.parametrize("body,located", [
    ("  - {name: a, kind: attention, q: [[1, 2], [3]], k: [[1, 2]]}\n",
     "notes.yaml:3:44: parts[0].q[1]: has 1 number but row 0 has 2 numbers"),
    ("  - {name: a, kind: attention, q: [[1, 2]], k: [[1, 2, 3]]}\n",
     "notes.yaml:3:48: parts[0].k: gives keys of width 3 but queries have width 2"),
    ("  - {name: a, kind: attention, embeddings: [[1, 2, 3]], w_q: [[1], [2]], k: [[1]]}\n",
     "parts[0].w_q: has 2 rows but the embeddings have 3 columns"),
    ("  - {name: a, kind: attention, q: [[1]], k: [[1]], v: [[1], [2]]}\n",
     "parts[0].v: gives 2 value rows for 1 keys"),
    ("  - {name: a, kind: attention, q: [], k: [[1]]}\n", "parts[0].q: must not be empty"),
    ("  - {name: a, kind: attention, scores: [[1, 2]]}\n",
     "parts[0].d_k: is required with scores given directly"),
    ("  - {name: a, kind: attention, scores: [[1, 2]], d_k: 2, scale: sqr}\n",
     "parts[0].scale: must be sqrt or a positive number (the divisor the document used), "
     "got 'sqr' (did you mean 'sqrt'?)"),
    ("  - {name: a, kind: attentoin}\n", "(did you mean 'attention'?)"),
    ("  - {name: a, kind: attention, values: [1, 2]}\n",
     "parts[0].values: belongs to a variance part, not to this attention part"),
    ("  - {name: a, kind: cost, n: 5, d: 512, h: 7}\n",
     "parts[0].h: d = 512 is not divisible by 7 heads"),
    ("  - {name: a, kind: variance, values: [1, 2], toknes: [x]}\n",
     "unknown key (did you mean 'tokens'?)"),
])
def test_bad_spec_is_one_located_line_and_exit_2(sdpa, workdir, body, located):
    path = write_spec(workdir, "notes.yaml", "study: worked-example\nparts:\n" + body)
    r = sdpa("worked-example", str(path))
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and located in lines[0], r.err
    assert not (workdir / "outputs").exists()  # nothing ran


@pytest.mark.parametrize("documented,message", [
    ("{where: x, quantity: weight, value: 1}", "no quantity 'weight' in attention part 'a' "
                                              "(did you mean 'weights'?)"),
    ("{where: x, quantity: 'weights[0][5]', value: 1}",
     "weights[0][5] does not name one number: weights is 1×2"),
    ("{where: x, part: b, quantity: scores, value: 1}", "no part named 'b'"),
    ("{where: x, row: {i: 0}, quantity: scores, value: 1}", "not row:"),
])
def test_documented_entries_must_name_a_number(sdpa, workdir, documented, message):
    text = ("study: worked-example\nparts:\n  - {name: a, kind: attention, scores: [[1, 2]], "
            f"d_k: 2}}\ndocumented:\n  - {documented}\n")
    r = sdpa("worked-example", str(write_spec(workdir, "notes.yaml", text)))
    assert r.code == 2
    assert r.err.strip() == f"notes.yaml: documented[0]: {message}" or message in r.err


@pytest.mark.parametrize("args,needle", [
    (["--list", "money-bank-grows"], "--list: takes no NAME, SPEC or --all"),
    (["--all", "money-bank-grows"], "--all: runs every named spec"),
    ([], "give a spec NAME or a SPEC file"),
    (["missing.yaml"], "missing.yaml: no such file"),
])
def test_usage_errors_are_one_line_and_exit_2(sdpa, args, needle):
    r = sdpa("worked-example", *args)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.err


def test_terminal_report_stays_readable(sdpa):
    r = sdpa("worked-example", "visual-summary", "--no-plots")
    # The long-format table goes to the files; the terminal says where.
    assert "Every computed entry (long format): 28 rows in table.csv" in r.out
    # A note shared by a printed row is said once, under the row's root error, which names
    # the row and its printed and computed values together.
    assert r.out.count("the printed weights sum to 1.11; no softmax output can") == 1
    assert re.search(r"own +With Scaling, After Softmax: weights printed 0\.12 0\.32 0\.47 "
                     r"0\.20", r.out)


def test_overflowing_exp_tables_are_null_never_nan(sdpa, workdir):
    text = ("study: worked-example\nparts:\n  - {name: big, kind: attention, "
            "scores: [[1000, 0]], d_k: 4, exp_tables: true}\ndocumented:\n"
            "  - {where: x, quantity: 'exp_scores[0][0]', value: 1}\n")
    r = sdpa("worked-example", str(write_spec(workdir, "big.yaml", text)), "--format", "json",
             "--no-plots")
    assert r.code == 0 and "FAIL audit" in r.err  # beside the document, one line
    doc = json.loads(r.out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert doc["parts"]["big"]["steps"]["exp_scores"] == [[None, 1.0]]
    assert doc["steps"]["weights"][0] == pytest.approx([1.0, 0.0])
    assert doc["audit"][0]["computed"] is None and doc["audit"][0]["status"] == "mismatch"
