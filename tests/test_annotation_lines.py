"""CI annotations at the right spec line: every audited number of every study at
its `documented:` entry, flow or block style; a failed check at the field it checks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXPERIMENTS

WRONG = 987654  # no document prints this; every number audited against it is a mismatch

# One shipped spec with `documented:` entries per study that has them (a worked example
# rewrites quantities, e.g. variance.values → variance.values.sample, and names parts).
SPECS = ["variance/dims-1-2-3.yaml", "softmax-sweep/dk512-example.yaml",
         "jacobian/jacobian-table.yaml", "worked-example/i-am-happy.yaml",
         "worked-example/cost-arithmetic.yaml"]

_ERROR = re.compile(r"^::error file=([^,]+),line=(\d+),col=(\d+),title=sdpa audit::")


def _wrong(value: Any) -> Any:
    return [_wrong(v) for v in value] if isinstance(value, list) else WRONG


def _count(value: Any) -> int:
    return sum(_count(v) for v in value) if isinstance(value, list) else 1


def _rewrite(source: Path, style: str) -> tuple[str, list[tuple[int, int]]]:
    """The spec with every documented value made wrong and unaccepted, written in `style`;
    and, per entry, (line of its value, how many numbers it holds), counted as written."""
    text = source.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    head = text[:text.index("\ndocumented:")].rstrip("\n").split("\n")
    lines, expected = list(head), []
    lines.append("documented:")
    for e in data["documented"]:
        e = {k: v for k, v in e.items() if k not in ("accepted", "note", "value")}
        value = _wrong(data["documented"][len(expected)]["value"])
        flow = yaml.safe_dump(e, default_flow_style=True, width=10**6).strip()[1:-1]
        if style == "flow":
            lines.append(f"  - {{{flow}, value: {json.dumps(value)}}}")
            expected.append((len(lines), _count(value)))
        else:
            block = yaml.safe_dump(e, default_flow_style=False, width=10**6).strip().split("\n")
            lines.append(f"  - {block[0]}")
            lines += [f"    {b}" for b in block[1:]]
            lines.append(f"    value: {json.dumps(value)}")
            expected.append((len(lines), _count(value)))
    return "\n".join(lines) + "\n", expected


# The case (a worked example, both styles) and one other study in the quick tier.
QUICK = {("worked-example/i-am-happy.yaml", "flow"), ("worked-example/i-am-happy.yaml", "block"),
         ("variance/dims-1-2-3.yaml", "flow")}


@pytest.mark.parametrize("name, style", [
    pytest.param(n, s, marks=() if (n, s) in QUICK else pytest.mark.slow)
    for n in SPECS for s in ("flow", "block")])
def test_every_audited_number_is_annotated_at_its_entry(sdpa, workdir: Path, name, style):
    text, expected = _rewrite(EXPERIMENTS / name, style)
    (workdir / "specs").mkdir()
    (workdir / "specs" / "wrong.yaml").write_text(text, encoding="utf-8")
    r = sdpa("run", "specs/wrong.yaml", "--annotations", "github", "--no-write", "--no-plots",
             "-q")
    assert r.code in (0, 1), r.err
    found = [_ERROR.match(line) for line in r.out.splitlines() + r.err.splitlines()]
    lines = sorted(int(m.group(2)) for m in found if m)
    assert all(m.group(1) == "specs/wrong.yaml" for m in found if m)
    # one annotation per number, each on the line its entry's value was written on
    assert lines == sorted(line for line, n in expected for _ in range(n)), text


def test_a_scalar_value_is_annotated_at_its_column(sdpa, workdir: Path):
    spec = ("study: worked-example\ntitle: t\nsource: s\nparts:\n  - name: p\n"
            "    kind: variance\n    values: [1, 2, 3, 4]\ndocumented:\n"
            "  - {where: here, quantity: variance.values, value: 123}\n"
            "  - where: there\n    quantity: variance.values\n    value: 456\n")
    (workdir / "s.yaml").write_text(spec, encoding="utf-8")
    r = sdpa("worked-example", "s.yaml", "--annotations", "github", "--no-write", "-q")
    got = [m.group(2, 3) for m in map(_ERROR.match, r.out.splitlines() + r.err.splitlines())
           if m]
    # 123 on line 9 at column 1 + its offset; 456 on line 12 after "    value: "
    assert got == [("9", str(spec.split("\n")[8].index("123") + 1)), ("12", "12")]


@pytest.mark.parametrize("scalings", [True, False])
def test_a_failed_check_points_at_the_field_it_checks(sdpa, workdir: Path, scalings):
    # se_tolerance 1e-9: every check fails. With scalings written, each points at its rule's
    # entry; without, at its entry of `dims:`; never at line 1 (a comment here).
    spec = ("# a comment\nstudy: variance\npairs: 10\nse_tolerance: 1.0e-9\ndims: [3, 10]\n"
            + ("scalings: [none, sqrt]\n" if scalings else ""))
    (workdir / "s.yaml").write_text(spec, encoding="utf-8")
    r = sdpa("variance", "s.yaml", "--annotations", "github", "--no-write", "-q", "--seed", "1")
    got = re.findall(r"::error file=s\.yaml,line=(\d+),col=(\d+),title=sdpa check failed::"
                     r"s: d=(\d+) (\w+):", r.out + r.err)
    assert len(got) == 4, r.out + r.err
    text = spec.split("\n")
    for line, col, d, rule in got:
        key, item = ("scalings", rule) if scalings else ("dims", d)
        row = next(i for i, t in enumerate(text) if t.startswith(f"{key}:"))
        want = (row + 1, re.search(rf"\b{item}\b", text[row]).start() + 1)
        assert (int(line), int(col)) == want, (line, col, d, rule)
