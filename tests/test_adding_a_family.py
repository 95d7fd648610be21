"""The recipe of sdpa_cli/docs/adding-a-family.md, followed: its module (a fused layout) and its
one FAMILIES entry, registered under a new model_type in this process, read a tiny fused
checkpoint as the same weights stored unfused read through Mistral's forward, and `sdpa
inspect` runs on it, trained and at initialisation."""

from __future__ import annotations

import ast
import json
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import inspect_fixtures as fx
from conftest import ROOT
from safetensors.numpy import load_file

from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint
from sdpa_cli.studies.inspect.models import families
from sdpa_cli.studies.inspect.tiny import save_checkpoint

PAGE = ROOT / "sdpa_cli" / "docs" / "adding-a-family.md"
MODULE = re.compile(r"<!-- file: (\S+) -->\n```python\n(.*?)```", re.S)
ENTRY = re.compile(r"```python\n# add to: (\S+)\n(.*?)```", re.S)
NEW = "fusedllama"  # the model_type the test registers the page's family under


def _page() -> tuple[str, str, str, str]:
    """(module path, module text, entry's file, entry line) as the page gives them."""
    text = PAGE.read_text(encoding="utf-8")
    (path, module), = MODULE.findall(text)
    (where, entry), = ENTRY.findall(text)
    return path, module, where, entry


def test_the_page_shows_the_shipped_module_and_its_entry():
    path, module, where, entry = _page()
    assert (ROOT / path).read_text(encoding="utf-8") == module
    assert entry.strip() in (ROOT / where).read_text(encoding="utf-8")


@pytest.fixture
def page_family(monkeypatch: pytest.MonkeyPatch) -> str:
    """The page's module loaded afresh (not the shipped one) and registered with the page's
    entry under a new model_type."""
    _, module, _, entry = _page()
    name = "sdpa_cli.studies.inspect.models.page_family"
    mod = types.ModuleType(name)
    exec(compile(module, "adding-a-family.md", "exec"), mod.__dict__)
    monkeypatch.setitem(sys.modules, name, mod)
    parsed = ast.parse("{" + entry.strip() + "}", mode="eval").body
    assert isinstance(parsed, ast.Dict) and len(parsed.values) == 1
    key, value = parsed.keys[0], parsed.values[0]
    assert isinstance(key, ast.Constant) and key.value == "phi3"
    scope = {**vars(families), "phi3": mod}
    family = eval(compile(ast.Expression(value), "entry", "eval"), scope)
    monkeypatch.setitem(families.FAMILIES, NEW, family)
    return NEW


def _fused_copy(plain: Path, dest: Path, model_type: str) -> Path:
    """The tiny Mistral's weights with q, k, v and gate, up each stored as one tensor."""
    tensors = load_file(str(plain / "model.safetensors"))
    config = json.loads((plain / "config.json").read_text())
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors[p + "self_attn.qkv_proj.weight"] = np.concatenate(
            [tensors.pop(f"{p}self_attn.{x}_proj.weight") for x in "qkv"])
        tensors[p + "mlp.gate_up_proj.weight"] = np.concatenate(
            [tensors.pop(f"{p}mlp.{x}_proj.weight") for x in ("gate", "up")])
    save_checkpoint(dest, {**config, "model_type": model_type}, tensors)
    fx.write_tokenizer(dest, "llama")
    return dest


def _mistral(tmp_path: Path) -> Path:
    """A tiny Mistral (Llama's layout with a window on every layer), no biases."""
    folder = fx.llama(tmp_path / "plain", bias=False, model_type="mistral",
                      rope={"rope_theta": 500.0, "sliding_window": 5})
    fx.write_tokenizer(folder, "llama")
    return folder


def test_the_page_family_reads_fused_tensors_as_the_unfused_forward(tmp_path: Path,
                                                                    page_family: str):
    plain = _mistral(tmp_path)
    fused = _fused_copy(plain, tmp_path / "fused", page_family)
    a, b = open_checkpoint(plain), open_checkpoint(fused)
    assert b.family.name == "phi3" and "layers.0.self_attn.qkv_proj.weight" in b.tensors
    ids = np.random.default_rng(4).integers(0, 44, (2, 11))
    want = list(a.family.forward(a.config, Weights(a), ids, np.float64))
    got = list(b.family.forward(b.config, Weights(b), ids, np.float64))
    assert len(got) == 2 and got[0].window == 5
    for x, y in zip(want, got, strict=True):
        for field in ("q", "k", "v", "hidden"):
            np.testing.assert_allclose(getattr(y, field), getattr(x, field), rtol=1e-12,
                                       atol=1e-12)


def test_inspect_runs_on_the_page_family_trained_and_at_init(sdpa, workdir: Path,
                                                             page_family: str):
    _fused_copy(_mistral(workdir), workdir / "m", page_family)
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--weights", "init", "--no-plots", "--format", "json")
    assert got.code == 0, got.err
    rows = [r for r in got.json()["rows"] if r["scaling"] == "model"]
    assert {r["weights"] for r in rows} == {"trained", "init"}
    assert len(rows) == 2 * 2 * 4  # weights × layers × heads
    assert all(r["logit_bound"] is not None and r["qk_spectral"] > 0 for r in rows)


def test_a_fused_checkpoint_missing_a_part_is_one_line(sdpa, workdir: Path,
                                                        page_family: str):
    folder = _fused_copy(_mistral(workdir), workdir / "m", page_family)
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["model.layers.1.self_attn.qkv_proj.weight"] = \
        tensors["model.layers.1.self_attn.qkv_proj.weight"][:-1]
    save_checkpoint(folder, json.loads((folder / "config.json").read_text()), tensors)
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2")
    assert got.code == 2
    assert "'layers.1.self_attn.qkv_proj.weight' has shape [47, 16]; the config implies " \
           "[48, 16]" in got.err, got.err
