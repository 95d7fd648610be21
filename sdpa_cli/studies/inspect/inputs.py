"""Everything a run reads, validated before it starts: checkpoint, tokenizer, text, memory."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.errors import InputError, Problem
from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.spec import limits
from sdpa_cli.studies.inspect import gguf_tokenizer, interventions
from sdpa_cli.studies.inspect.checkpoint import Checkpoint, bad, find, open_checkpoint
from sdpa_cli.studies.inspect.models import rowstats
from sdpa_cli.studies.inspect.models.common import ATTEND_ELEMENTS
from sdpa_cli.studies.inspect.spec import InspectSpec
from sdpa_cli.studies.inspect.text import (
    Tokenizer,
    chunks,
    default_text,
    load_tokenizer,
    text_tokens,
    wrap,
)

EXTRA = "pip install 'sdpa[models]'"
RAM_SHARE = 0.8  # of the machine's memory a run may plan to hold
TOKENS_STREAM = 7  # spawn key of --random-tokens draws (weights use their own)


@dataclass(frozen=True)
class Inputs:
    ckpt: Checkpoint
    tok: Tokenizer
    ids: dict[int, NDArray[np.int64]]  # seq_len → (sequences, seq_len)
    text: str  # what the tokens came from, for the output
    weights_memory: int  # planned peak bytes of tensors held at once
    work_memory: int  # of activations and statistics


@dataclass(frozen=True)
class Skipped:
    reason: str


def require_extra() -> None:
    try:
        import gguf  # noqa: F401
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        raise InputError(Problem(f"reading real models needs the models extra: {EXTRA}",
                                 field="model")) from None


# The last spec prepared, with the state of every file it read: the cost estimate and the
# run each prepare the same spec, and a large vocabulary takes seconds to rebuild.
_LAST: list[tuple[str, tuple[tuple[str, int, int], ...], Inputs]] = []


def _stamp(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            return ()
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


def _read(got: Inputs, spec: InspectSpec) -> list[Path]:
    return [*got.ckpt.read_files(), *(Path(t) for t in spec.text)]


def prepare(spec: InspectSpec) -> Inputs | Skipped:
    """Open and check everything; Skipped when the model is not on this machine. The same
    spec prepared again, its files unchanged, gives the same Inputs without reading them."""
    key = spec.model_dump_json() + str(find(spec.model)[0])  # and where the name leads now
    for k, stamp, got in _LAST:
        if k == key and stamp and stamp == _stamp(_read(got, spec)):
            return got
    done = _prepare(spec)
    if isinstance(done, Inputs):
        _LAST[:] = [(key, _stamp(_read(done, spec)), done)]
    return done


def _prepare(spec: InspectSpec) -> Inputs | Skipped:
    folder, where = find(spec.model)
    if folder is None:  # a batch on a machine without the model (or the extra) skips it
        how = f"; get it with: {spec.fetch}" if spec.fetch else fetch_hint(spec.model)
        return Skipped(f"model {spec.model!r} is not on this machine (looked in {where}; "
                       f"sdpa never downloads){how}")
    require_extra()
    ckpt = open_checkpoint(folder)
    tok = tokenizer(ckpt)
    rows = ckpt.tensors[ckpt.family.embedding].shape[0]
    if tok.top >= rows:  # ids need not be dense: the highest one must have its row
        raise bad(f"the tokenizer's token ids reach {tok.top} but the embedding has only "
                  f"{rows} rows", ckpt.tokenizer)
    limit = _positions(ckpt)
    for i, n in enumerate(spec.seq_len):
        if limit is not None and n > limit:
            raise InputError(Problem(f"{n} is above the model's max_position_embeddings "
                                     f"{limit}", field=f"seq_len[{i}]"))
    interventions.check(spec, ckpt)
    ids, label = _tokens(spec, tok, rows)
    held, work = plan_memory(spec, ckpt)
    memory, have = held + work, physical_memory()
    if memory > RAM_SHARE * have:
        raise InputError(Problem(
            f"{ckpt.folder.name} would need about {memory / 1024**3:.3g} GB of memory "
            f"(estimated from its safetensors header); this machine has {have / 1024**3:.3g} GB",
            field="model"))
    return Inputs(ckpt, tok, ids, label, held, work)


def tokenizer(ckpt: Checkpoint) -> Tokenizer:
    """The checkpoint's own tokenizer: tokenizer.json, or rebuilt from GGUF metadata."""
    if ckpt.gguf is None:
        return load_tokenizer(ckpt.tokenizer)
    return wrap(gguf_tokenizer.build(ckpt.gguf.metadata, ckpt.folder), ckpt.folder,
                decoded=True, top=gguf_tokenizer.highest_id(ckpt.gguf.metadata))


def _positions(ckpt: Checkpoint) -> int | None:
    for name in ckpt.family.positions:
        value = ckpt.config.get(name)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _tokens(spec: InspectSpec, tok: Tokenizer, vocab: int
            ) -> tuple[dict[int, NDArray[np.int64]], str]:
    if spec.random_tokens:
        rng = block_generator(spec.entropy, (TOKENS_STREAM,))
        out = {}
        for n in spec.seq_len:
            body = rng.integers(0, vocab, size=(spec.sequences, n - tok.specials))
            out[n] = np.array([list(tok.prefix) + list(r) + list(tok.suffix) for r in body],
                              dtype=np.int64)
        return out, f"uniform random token ids (seed {spec.entropy})"
    if spec.text:  # only the tokens the run uses are read and tokenised
        need = spec.sequences * max(n - tok.specials for n in spec.seq_len)
        ids = text_tokens(tok, [Path(t) for t in spec.text], max(need, 0))
        where, label = ", ".join(spec.text), ", ".join(Path(t).name for t in spec.text)
    else:
        text, label = default_text()
        ids, where = tok.body(text), "sdpa's documentation"
    return {n: chunks(tok, ids, n, spec.sequences, where) for n in spec.seq_len}, label


def physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


def plan_memory(spec: InspectSpec, ckpt: Checkpoint) -> tuple[int, int]:
    """Peak bytes of tensors (the largest non-layer tensor and the largest layer, each held
    natively and converted) and of work (activations of the longest length, the forward's
    attention of one sequence, the statistics' blocks of rows and their per-row numbers)."""
    item = 8 if spec.dtype == "float64" else 4
    per_layer: dict[str, int] = {}
    loose = 0
    widest = 1
    for name, t in ckpt.tensors.items():
        count = math.prod(t.shape)
        # init draws float64 tensors; trained ones arrive as stored (GGUF: read, then
        # dequantised to float32); both are then converted
        stored = t.nbytes + (4 * count if ckpt.gguf is not None else 0)
        held = max(stored, 8 * count if spec.weights == "init" else 0) + count * item
        m = re.search(r"(?:^|\.)(?:layer|layers|h)\.(\d+)\.", name)
        if m:
            per_layer[m[1]] = per_layer.get(m[1], 0) + held
            widest = max(widest, *t.shape)
        else:
            loose = max(loose, held)
    _, count, _, dim = ckpt.shape
    # the text's sequences and the repeated random tokens run as one batch
    s, n = spec.sequences + spec.induction_sequences, max(spec.seq_len)
    acts = s * n * (12 * count * dim + 4 * widest) * item
    # the forward's scores (in place: as many heads as ATTEND_ELEMENTS holds) and its masks;
    # the statistics' block buffers, the layer's mask and induction pattern, and a few dozen
    # float64 numbers per (head, sequence, row)
    heads_at_once = max(1, min(count, ATTEND_ELEMENTS // (n * n)))
    attention = heads_at_once * n * n * item + 3 * n * n
    stats = (4 * rowstats.GROUP_ELEMENTS * item + spec.induction_sequences * n * n
             + 32 * 8 * count * spec.sequences * n)
    return (loose + max(per_layer.values(), default=0) + interventions.kept_weights(spec, ckpt),
            acts + attention + stats + interventions.memory(spec, ckpt, item))


def cost(spec: InspectSpec) -> limits.Cost:
    """Checks the inputs (exit 2 before anything runs) and estimates the work. The weights'
    memory is checked against this machine's memory in `prepare`, not against the Monte Carlo
    budget: a real checkpoint is as large as it is."""
    got = prepare(spec)
    kinds = 2 if spec.weights == "init" else 1
    rules = 1 + len(spec.scalings)
    if isinstance(got, Skipped):
        return limits.Cost(0, 0, 0, 0, ("model",), "", ("seq_len",), "", "")
    layers, count, _, dim = got.ckpt.shape
    params = sum(math.prod(t.shape) for t in got.ckpt.tensors.values())
    batch = spec.sequences + spec.induction_sequences
    tokens = batch * sum(spec.seq_len)
    # BLAS multiply-adds run ~100× faster than the drawn numbers MAX_WORK counts; the
    # weight-only bound takes a few d_k × d_k SVDs per head (~10 d_k³ each)
    flops = (kinds * (2 * tokens * params + rules * layers * count * batch
                      * sum(n * n * (dim + 40) for n in spec.seq_len)
                      + layers * count * 30 * dim ** 3)
             + interventions.work(spec, got.ckpt, params)) // 100
    heads = kinds * len(spec.seq_len) * layers * count * rules
    summary = kinds * len(spec.seq_len) * layers * rules
    # a head row is about 1.3 kB of JSON, CSV and Markdown; every token id is recorded
    return limits.Cost(flops, got.work_memory, heads * 1300 + tokens * 8, summary, ("seq_len",),
                       "lower seq_len or sequences", ("scalings",),
                       "weights × seq_len × layers × rules", "give fewer scalings or seq_len")



def check_model(target: str) -> None:
    """A MODEL named on the command line must be here (a spec's may be skipped instead)."""
    require_extra()
    folder, where = find(target)
    if folder is None:
        raise InputError(Problem(f"no model folder or cached model {target!r} (looked in "
                                 f"{where}; sdpa never downloads){fetch_hint(target)}",
                                 field="MODEL"))


def fetch_hint(model: str) -> str:
    """For a Hub name (ORG/NAME), the command that fetches only the files sdpa reads into the
    cache it looks in: config.json, tokenizer.json, the safetensors and their index."""
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", model) or Path(model).exists():
        return ""
    return f'; get it with: hf download {model} --include "*.json" "*.safetensors"'

