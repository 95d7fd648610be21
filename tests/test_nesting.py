"""Untrusted nesting and size (issues 24, 25): every reader fed 10⁵ levels ends in one line."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from sdpa_cli.cli.group import cli
from sdpa_cli.errors import InputError
from sdpa_cli.io import jsonio
from sdpa_cli.runner import selection
from sdpa_cli.spec import yamlio

LEVELS = 100_000


def _one_line(r) -> str:
    lines = r.err.strip().splitlines()
    assert r.code == 2, r.err
    assert len(lines) == 1 and r.out == "", r.err
    assert "internal error" not in r.err and "Traceback" not in r.err
    assert len(lines[0]) < 400, lines[0]
    return lines[0]


# --- YAML after aliases -----------------------------------------------------------------------


def _alias_chain(anchors: int, per: int) -> str:
    """`anchors` anchors, each nesting `per` levels around the one before: depth anchors×per
    once expanded, though no line nests deeper than `per`."""
    lines = ["study: variance"]
    for i in range(anchors):
        inner = f"*a{i - 1}" if i else "1"
        lines.append(f"a{i}: &a{i} " + "[" * per + inner + "]" * per)
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_an_alias_chain_of_1e5_levels_is_refused_at_the_alias():
    # 3226 anchors × 31 levels: over 10⁵ levels once expanded, every line within the literal
    # limit. The limit is broken on line 3 (a1 holds *a0), and the message says so. Slow
    # only because PyYAML's pure-Python parser reads these 260 kB in ~20 s; the recursive
    # alias below is the quick tier's unbounded case.
    text = _alias_chain(LEVELS // 31 + 1, 31)
    with pytest.raises(InputError) as e:
        yamlio.parse(text, "s.yaml")
    line = e.value.lines()[0]
    assert line.startswith("s.yaml:3:") and "a1:" in line, line
    assert f"nested more than {yamlio.MAX_DEPTH} levels deep once aliases" in line


def test_the_alias_limit_counts_levels_exactly():
    # The control: an alias that expands to exactly MAX_DEPTH levels under its key is built
    # (and equals the same text written out); one more level is refused.
    # Levels count as the literal check counts them: the top mapping, then each list.
    anchored = "a: &a " + "[" * 31 + "1" + "]" * 31 + "\n"
    ok = yamlio.parse(anchored + "b: *a\n", "s.yaml")
    assert ok.data["b"] == json.loads("[" * 31 + "1" + "]" * 31)
    with pytest.raises(InputError, match="nested more than 32 levels deep;"):
        yamlio.parse("b: " + "[" * 32 + "1" + "]" * 32 + "\n", "s.yaml")  # written out
    with pytest.raises(InputError, match="once aliases"):
        yamlio.parse(anchored + "b: [*a]\n", "s.yaml")  # the same depth, through an alias


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: [*a]}\n", "a: &a [1, [2, *a]]\n"])
def test_a_recursive_alias_is_refused(text):
    # Unbounded depth from a few bytes: the composer builds a cycle, the walk would recurse
    # forever (10⁵ levels and more).
    with pytest.raises(InputError, match="once aliases") as e:
        yamlio.parse(text, "s.yaml")
    assert e.value.lines()[0].startswith("s.yaml:1:")


@pytest.mark.slow  # builds 10⁵ values first (~1 s); the corpus has the quick case
def test_alias_fan_out_is_bounded_by_the_node_count():
    # 10 × 10 × … : 10⁶ values from 6 short lines; refused at the line whose aliases pass
    # the count, not at the anchor they name.
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 6)]
    with pytest.raises(InputError) as e:
        yamlio.parse("\n".join(lines) + "\n", "s.yaml")
    line = e.value.lines()[0]
    assert f"more than {yamlio.MAX_NODES} values once aliases" in line
    assert line.startswith(("s.yaml:5:", "s.yaml:6:")), line  # 10⁴ in l4, 10⁵ reached in l5


# --- JSON ----------------------------------------------------------------------------------
# (sdpa compare, --last-failed, a run folder's and a batch folder's manifest, each fed 10⁵
# levels end to end: the corpus cases compare-deep-*, last-failed-deep-*, *-manifest-deep in
# test_bad_input_3.py)


@pytest.mark.parametrize("opener", ["[", '{"a": '])
def test_json_1e5_levels_is_refused_at_the_first_bracket_too_deep(opener):
    closer = "]" if opener == "[" else "}"
    text = opener * LEVELS + "1" + closer * LEVELS
    with pytest.raises(jsonio.JsonError) as e:
        jsonio.load_json(text, what="results.json", file="x/results.json")
    assert e.value.reason == "depth" and isinstance(e.value, ValueError)
    col = len(opener) * jsonio.MAX_DEPTH + 1  # the (MAX_DEPTH + 1)-th opener
    assert e.value.lines()[0].startswith(f"x/results.json:1:{col}: results.json nests more "
                                         f"than {jsonio.MAX_DEPTH} levels deep")


def test_the_depth_scan_agrees_with_json_on_what_it_reads():
    # Brackets inside strings (escaped quotes too) are text; exactly MAX_DEPTH levels load,
    # and the result is json's own.
    deep = "[" * jsonio.MAX_DEPTH + '"]]]\\"[[[{{{"' + "]" * jsonio.MAX_DEPTH
    assert jsonio.load_json(deep, what="t") == json.loads(deep)
    text = json.dumps({"rows": [{"s": "[[[[" * 100, "v": [[1, 2], [3]]}] * 50})
    assert jsonio.load_json(text, what="t") == json.loads(text)
    with pytest.raises(jsonio.JsonError, match="nests more than"):
        jsonio.load_json("[" + deep + "]", what="t")


def test_an_unterminated_string_of_escaped_quotes_is_scanned_in_linear_time():
    import time

    raw = b"[" * 100 + b'"' + b'\\"' * 500_000  # each quote would restart a naive scan
    started = time.perf_counter()
    with pytest.raises(jsonio.JsonError):
        jsonio.load_json(raw, what="t")
    assert time.perf_counter() - started < 2.0


# --- the -k expression ------------------------------------------------------------------------


@pytest.mark.parametrize("expr, says", [
    ("(" * LEVELS + "dims" + ")" * LEVELS, "characters long; at most"),
    ("not " * LEVELS + "dims", "characters long; at most"),
    ("(" * (selection.MAX_DEPTH + 1) + "dims" + ")" * (selection.MAX_DEPTH + 1),
     "nested more than"),
    ("x" * (selection.MAX_LENGTH + 1), "characters long"),
])
def test_k_is_bounded_in_length_and_depth(expr, says):
    with pytest.raises(InputError) as e:
        selection.keyword(expr)
    line = e.value.lines()[0]
    assert line.startswith("-k: ") and says in line and len(line) < 200


def test_k_within_the_limits_means_what_it_says():
    # The controls: MAX_DEPTH parentheses and a long chain of `not` (now a loop) select as
    # the plain expression does; each `not` flips.
    words = selection.words("dims-1-2-3", "variance")
    deep = "(" * selection.MAX_DEPTH + "dims" + ")" * selection.MAX_DEPTH
    assert selection.keyword(deep)(words) is True
    for n in (0, 1, 2, 199, 200):
        assert selection.keyword("not " * n + "dims")(words) is (n % 2 == 0)
        assert selection.keyword("not " * n + "zzz")(words) is (n % 2 == 1)


# --- number flags beyond float64's range --------------------------------------------------------


def _value_flags() -> list[tuple[str, str]]:
    """(command, flag) for every option that takes a value, paths aside (a number is a
    valid file name)."""
    out = []
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):  # every command, studies built from the registry
        command = cli.get_command(ctx, name)
        assert command is not None
        for p in command.params:
            if isinstance(p, click.Option) and not p.is_flag and not p.count and \
                    not isinstance(p.type, click.Path):
                out.append((name, max(p.opts, key=len)))
    return out


HUGE = ["1" + "0" * 400, "-1" + "0" * 400, "9" * 5000, "0x" + "f" * 300, "1e400",
        "local:" + "9" * 5000]  # the last: --scheduler local:N parsed N whole


def _refuses(sdpa, workdir: Path, command: str, flag: str, values: list[str]) -> None:
    (workdir / "s.yaml").write_text(f"study: {command}\n")
    (workdir / "A").mkdir()
    base = {"run": ["run", "s.yaml", "--no-write"], "compare": ["compare", "A", "A"],
            "worked-example": ["worked-example", "--no-write"]}.get(command,
                                                                    [command, "--no-write"])
    for value in values:
        line = _one_line(sdpa(*base, flag, value))
        assert "int too large" not in line and "set_int_max_str_digits" not in line, line
    assert sorted(p.name for p in workdir.iterdir()) == ["A", "s.yaml"]  # nothing written


FLAGS = _value_flags()


@pytest.mark.parametrize("i", range(len(FLAGS)), ids=lambda i: "-".join(FLAGS[i]))
def test_a_number_beyond_float_range_is_one_line_for_every_flag(sdpa, workdir: Path, i):
    # Every flag meets one of the huge values, taking turns, so each value meets every kind
    # of flag; the slow tier gives every value to every flag.
    _refuses(sdpa, workdir, *FLAGS[i], [HUGE[i % len(HUGE)]])


@pytest.mark.slow
@pytest.mark.parametrize("command, flag", FLAGS, ids=lambda v: v)
def test_every_huge_value_is_one_line_for_every_flag(sdpa, workdir: Path, command, flag):
    _refuses(sdpa, workdir, command, flag, HUGE)


@pytest.mark.parametrize("value", ["9" * 5000, "1" + "0" * 30, "²", "٣٣", "-80", "80 "])
def test_a_terminal_size_no_terminal_has_is_forgotten(value):
    from sdpa_cli.cli.entry import _drop_impossible_sizes

    environ = {"COLUMNS": value, "LINES": value, "OTHER": value}
    _drop_impossible_sizes(environ)
    assert environ == {"OTHER": value}
    environ = {"COLUMNS": "132", "LINES": "50"}  # the control: a real size stays
    _drop_impossible_sizes(environ)
    assert environ == {"COLUMNS": "132", "LINES": "50"}


def test_a_strange_terminal_size_falls_back_to_the_default(sdpa, workdir: Path, monkeypatch):
    # COLUMNS and LINES are read as numbers (by sdpa and by rich): 5000 digits passed
    # isdigit() and then failed int() (an internal error); so does "²" at any length.
    monkeypatch.setenv("COLUMNS", "9" * 5000)
    monkeypatch.setenv("LINES", "²")
    r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-write")
    assert r.code == 0, r.err
    assert max(len(line) for line in r.out.splitlines()) <= 140
