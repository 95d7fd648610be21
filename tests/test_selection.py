"""`sdpa run -k EXPR` and `--last-failed`."""

from __future__ import annotations

import json

import pytest
from conftest import OK, write_spec

from sdpa_cli.errors import InputError
from sdpa_cli.runner.selection import LAST_FAILED, keyword, select, updated_last_failed, words

SPECS = [("day74-dims", "variance"), ("unit-vectors", "variance"),
         ("softmax-demo", "softmax-sweep"), ("jacobian-table", "jacobian")]


def _chosen(expr: str) -> list[str]:
    return [n for (n, _), ok in zip(SPECS, select(SPECS, expr=expr), strict=True) if ok]


@pytest.mark.parametrize(("expr", "expected"), [
    ("variance", ["day74-dims", "unit-vectors"]),
    ("VARIANCE and not unit", ["day74-dims"]),
    ("demo or jacobian", ["softmax-demo", "jacobian-table"]),
    ("not (variance or jacobian)", ["softmax-demo"]),
    ("table", ["jacobian-table"]),  # a substring of the name
    ("sweep and demo or dims", ["day74-dims", "softmax-demo"]),  # and binds tighter than or
    ("not not jacobian", ["jacobian-table"]),
])
def test_keyword_expressions(expr, expected):
    assert _chosen(expr) == expected


@pytest.mark.parametrize("expr", ["", "variance and", "(variance", "variance)", "and dims",
                                  "not", "a b"])
def test_bad_expressions_are_one_line_exit_2(expr):
    with pytest.raises(InputError) as e:
        keyword(expr)
    assert e.value.exit_code == 2
    assert e.value.lines()[0].startswith("-k: ")


def test_last_failed_record_follows_pytest():
    assert updated_last_failed({"a", "b"}, [("a", "passed"), ("c", "error"), ("d", "skipped")]) \
        == {"b", "c"}
    assert words("Day74", "variance") == {"day74", "variance"}


def _ran(r) -> list[str]:
    return [e["name"] for e in r.json()["experiments"]]


def test_k_on_the_command_line(sdpa, specs):
    r = sdpa("run", str(specs), "--no-plots", "-q", "--format", "json", "-k", "ok and not c-ok")
    assert r.code == 0 and _ran(r) == ["a-ok"]
    r = sdpa("run", str(specs), "--no-plots", "-k", "(ok or")
    assert r.code == 2 and r.err.strip().splitlines() == [
        "-k: '(ok or' ends where a name or '(' was expected"]
    r = sdpa("run", str(specs), "--no-plots", "-k", "jacobian")
    assert r.code == 2 and "selects none of the 3 specs" in r.err


def test_last_failed_reruns_only_what_failed(sdpa, specs, workdir):
    r = sdpa("run", str(specs), "--no-plots", "-q")
    assert r.code == 0
    record = json.loads((workdir / "outputs" / LAST_FAILED).read_text())
    assert record["failed"] == ["b-failing"]
    r = sdpa("run", str(specs), "--no-plots", "-q", "--format", "json", "--last-failed")
    assert _ran(r) == ["b-failing"]
    # fixed: it passes and leaves the record
    write_spec(specs, "b-failing.yaml", OK.format(seed=3))
    sdpa("run", str(specs), "--no-plots", "-q", "--lf")
    assert json.loads((workdir / "outputs" / LAST_FAILED).read_text())["failed"] == []
    r = sdpa("run", str(specs), "--no-plots", "-q", "--format", "json", "--lf")
    assert _ran(r) == ["a-ok", "b-failing", "c-ok"]  # nothing failed: everything runs
