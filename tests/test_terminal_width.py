"""Tables fit the terminal: story columns kept, others left out whole, no number cut."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from sdpa_cli.framework.result import Column, Table
from sdpa_cli.report.fit import rank
from sdpa_cli.report.terminal import show_table

COLUMNS = (
    Column("dim", "d", "int", priority=0),
    Column("scaling", "scaling", "text", priority=0),
    Column("mean", "mean", priority=3),
    Column("variance", "variance", priority=0),
    Column("theory_variance", "theory", priority=0),
    Column("se", "se", priority=1),
    Column("z", "z", "f2", priority=0),
    Column("ratio", "var/theory", priority=2),
    Column("kurtosis", "kurtosis", priority=4),
    Column("theory_kurtosis", "theory kurt.", priority=4),
)
ROWS = tuple(
    {"dim": d, "scaling": s, "mean": -0.0123456 * d, "variance": v, "theory_variance": t,
     "se": 0.0448112 * t, "z": 1.2815, "ratio": v / t, "kurtosis": 3.01181,
     "theory_kurtosis": 3 + 6 / d}
    for d, s, v, t in [(3, "none", 3.45612, 3.0), (3, "sqrt", 1.15204, 1.0),
                       (1000, "none", 1057.31, 1000.0), (1000, "sqrt", 1.05731, 1.0)]
)
TABLE = Table("variance", "q·k by dimension and scaling", COLUMNS, ROWS)


def render(width: int, wide: bool = False) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False)
    show_table(con, TABLE, wide=wide)
    return buf.getvalue()


GOLDEN_80 = """\
q·k by dimension and scaling
┏━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━┓
┃    d ┃ scaling ┃ variance ┃ theory ┃       se ┃    z ┃ var/theory ┃
┡━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━┩
│    3 │ none    │   3.4561 │      3 │  0.13443 │ 1.28 │      1.152 │
│    3 │ sqrt    │    1.152 │      1 │ 0.044811 │ 1.28 │      1.152 │
│ 1000 │ none    │   1057.3 │   1000 │   44.811 │ 1.28 │     1.0573 │
│ 1000 │ sqrt    │   1.0573 │      1 │ 0.044811 │ 1.28 │     1.0573 │
└──────┴─────────┴──────────┴────────┴──────────┴──────┴────────────┘
not shown: mean, kurtosis, theory kurt. (see --wide, or table.md)
"""


def test_golden_render_at_80_columns() -> None:
    lines = [line.rstrip() for line in render(80).splitlines()]
    assert "\n".join(lines) + "\n" == GOLDEN_80


@pytest.mark.parametrize("width", [40, 60, 80, 100, 140, 200])
def test_no_number_is_cut_and_lines_fit(width: int) -> None:
    text = render(width)
    assert "…" not in text
    table_lines = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert all(len(line) <= width for line in table_lines)
    # every story column's numbers appear in full
    for needle in ("1057.3", "1000", "3.4561", "1.28"):
        if width >= 60:
            assert needle in text


def test_story_columns_kept_before_others() -> None:
    shown_60 = render(60).splitlines()[2]
    for header in ("d", "scaling", "variance", "theory", "z"):
        assert re.search(rf"┃\s+{re.escape(header)}\s+┃|┃ {re.escape(header)}\s+┃", shown_60)
    assert "mean" not in shown_60 and "kurtosis" not in shown_60


def test_wide_shows_every_column() -> None:
    text = render(80, wide=True)
    for c in COLUMNS:
        assert c.header in text
    assert "hidden" not in text


def test_columns_without_priority_rank_by_position() -> None:
    cols = (Column("keys", "n", "int"), Column("a", "a"), Column("b", "b"), Column("c", "c"))
    assert rank(cols) == [0, 1, 2, 3]
    cols2 = (Column("a", "a"), Column("b", "b", priority=0))
    assert rank(cols2) == [1, 0]


def test_error_lines_break_at_word_boundaries_on_a_terminal():
    """entry._say wraps an error to the terminal's width (a log keeps it one line): every
    piece fits, no word is cut or lost, and a word wider than the terminal stays whole."""
    from sdpa_cli.cli.entry import wrapped

    line = ("experiments/variance/day74-dims.yaml:2:1: pairz: unknown key (did you mean "
            "'pairs'?); the spec's fields are listed by sdpa help specs")
    for width in (50, 60, 80):
        out = wrapped(line, width).splitlines()
        assert len(out) > 1 and all(len(piece) <= width for piece in out)
        assert " ".join(out).split() == line.split()
    assert wrapped(line, 200) == line
    long = "x" * 50 + " tail"
    assert wrapped(long, 20).splitlines() == ["x" * 50, "  tail"]


# --- everything sdpa prints into an 80-column terminal (or a pipe read by a person) fits ----

def _long(text: str, width: int = 80) -> list[str]:
    from rich.cells import cell_len

    return [line for line in text.splitlines() if cell_len(line) > width]


def test_every_topic_page_fits_80_columns_code_lines_broken_at_spaces() -> None:
    """Code lines of `sdpa help ci`, `inspect`, `commands` ran past 80 and broke mid-word in
    the terminal: now a long command breaks before a word and ends in a backslash, so it
    still pastes as one command; a trailing comment wraps under its own column."""
    from sdpa_cli.io import topics

    for name, path in topics.pages().items():
        text = topics.plain(path.read_text(encoding="utf-8"), 80)
        assert _long(text) == [], name
    lines = topics.plain(topics.pages()["inspect"].read_text(encoding="utf-8"), 80)
    at = lines.index("sdpa inspect ./my-model")
    row = lines[at:].splitlines()[:2]
    assert row[0].endswith("# config.json, model.safetensors (or")
    assert row[1].strip() == "# shards), tokenizer.json"


def test_a_long_command_breaks_before_a_word_and_pastes_whole() -> None:
    from sdpa_cli.io.topics import code_lines

    line = "sdpa run experiments --check --out outputs --junit-xml reports/sdpa.xml --no-plots"
    got = code_lines(line, 60)
    assert got == ["sdpa run experiments --check --out outputs --junit-xml \\",
                   "    reports/sdpa.xml --no-plots"]
    assert " ".join(p.removesuffix(" \\").strip() for p in got) == line


def test_help_lists_topics_in_80_columns_without_backticks(sdpa, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    r = sdpa("help")
    assert r.code == 0 and _long(r.out) == [] and "`" not in r.out
    assert "Gradients through one attention layer: sdpa gradients" in r.out


@pytest.mark.parametrize("command", ["", "variance", "jacobian", "gradients", "inspect",
                                     "worked-example", "run", "compare"])
def test_every_commands_help_fits_80_columns(sdpa, monkeypatch, command) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    r = sdpa(*([command] if command else []), "--help")
    assert r.code == 0 and _long(r.out) == []


def test_a_piped_listing_is_wrapped_under_its_column(sdpa, monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS")
    r = sdpa("worked-example", "--list")
    assert r.code == 0 and _long(r.out) == []
    assert "                        source: Day 74: Why do we scale self-attention?" in r.out
