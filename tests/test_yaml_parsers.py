"""Specs are composed by libyaml when PyYAML has it, and by PyYAML's Python parser otherwise
(and for every text libyaml refuses, so that each error reads the same): on any text both
accept, the two must give the same node tree, marks included (the builder reports them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdpa_cli.spec import yamlio

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(yamlio._CLoader is None, reason="PyYAML without libyaml")


def _tree(node: yaml.Node | None) -> object:
    """What the builder reads of a node: kind, tag, scalar text and style, start line and
    column (recursively; an alias is the same node object, shown once more). End marks are
    left out: libyaml ends a collection at the end of the text where PyYAML ends it at its
    last character, and the builder compares them only for nodes that start inside the
    collection, where both end it after them."""
    if node is None:
        return None
    where = (node.start_mark.line, node.start_mark.column)
    if isinstance(node, yaml.ScalarNode):
        return ("scalar", node.tag, node.value, node.style or None, where)  # plain: None or ""
    if isinstance(node, yaml.SequenceNode):
        return ("seq", node.tag, where, [_tree(n) for n in node.value])
    return ("map", node.tag, where, [(_tree(k), _tree(v)) for k, v in node.value])


def _python(text: str) -> object:
    try:
        return _tree(yaml.compose(text, Loader=yamlio._Loader))
    except (yaml.YAMLError, ValueError) as e:
        return f"refused: {type(e).__name__}"


def _same(text: str) -> bool:
    """Whether libyaml read the text; if Python reads it too, the trees must be equal. A few
    malformed texts libyaml reads and Python refuses (`>#`: a comment with no space before
    it) are read as libyaml, YAML's reference parser, reads them."""
    fast = yamlio._fast(text)
    if fast is None:
        return False
    python = _python(text)
    assert _tree(fast) == python or python == "refused: ScannerError", text
    return True


@pytest.mark.parametrize("path", sorted(ROOT.glob("experiments/**/*.yaml")),
                         ids=lambda p: p.stem)
def test_every_shipped_spec_composes_alike(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _same(text)


# YAML's syntax characters, spaces and breaks, letters, digits and a few beyond ASCII
# (marks count characters: é, ü, ÷, √ and an astral one).
ALPHABET = list(" \n\t:-[]{},#&*!|>'\"%@`?.0123456789abcxyzTNe+_é÷√\U0001d465\\")
lines = st.lists(st.text(alphabet=ALPHABET, max_size=30), max_size=8).map("\n".join)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(alphabet=ALPHABET, max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(alphabet="abcxyz_é", min_size=1, max_size=6), inner, max_size=4),
    max_leaves=12)
dumped = st.tuples(values, st.sampled_from([None, True, False]), st.booleans()).map(
    lambda v: yaml.safe_dump(v[0], default_flow_style=v[1], allow_unicode=v[2]))
# 150 examples a test here; SDPA_YAML_EXAMPLES=20000 for a longer hunt (passed when written)
SETTINGS = settings(max_examples=int(os.environ.get("SDPA_YAML_EXAMPLES", "150")),
                    deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(lines)
def test_random_texts_compose_alike_or_go_to_python(text: str) -> None:
    _same(text)


@SETTINGS
@given(dumped)
def test_dumped_documents_compose_alike(text: str) -> None:
    if "\t" not in text and ": \n" not in text and "\n- \n" not in text:
        assert _same(text)  # libyaml reads what PyYAML writes (empty values go to Python)
    else:
        _same(text)


@pytest.mark.parametrize("text", [
    "a: &x [1, 2]\nb: *x\n", "a: |\n  two\n  lines\n", "a: >-\n  folded\n  text\n",
    "'quoted': \"é\\u00e9\"\n", "a: 1 # note\n", "\ufeffstudy: variance\n",
    "a: [[[[1]]]]\n", "? [1, 2]\n: x\n", "a: b\r\nc: d\r\n", "a: \u2028b\n", "a: x\x85y\n"])
def test_edges_compose_alike(text: str) -> None:
    _same(text)


def test_a_nesting_libyaml_would_recurse_on_goes_to_python() -> None:
    deep = "[" * (yamlio.MAX_DEPTH + 1) + "]" * (yamlio.MAX_DEPTH + 1)
    assert yamlio._fast(deep) is None
    with pytest.raises(yamlio.InputError, match="nested more than"):
        yamlio.parse(deep, "deep.yaml")
