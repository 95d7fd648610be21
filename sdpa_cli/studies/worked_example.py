"""Study: a document's worked examples replayed step by step, and an audit of its numbers."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdpa_cli.numerics import attention as att
from sdpa_cli.spec.common import Documented, Printed
from sdpa_cli.spec.worked import COMMON_FIELDS, FIELDS_BY_KIND, Part, WorkedExampleSpec
from sdpa_cli.studies.audit import audit_check, flatten, pick, run_audit, split_quantity
from sdpa_cli.studies.board import cell, cells, expansion, matrix_lines, num, vector
from sdpa_cli.studies.result import AuditEntry, Check, Column, Figure, Panel, Result, Table

COLUMNS = (
    Column("part", "part", "text"),
    Column("step", "step", "text"),
    Column("i", "i", "int"),
    Column("j", "j", "int"),
    Column("value", "value", "int"),  # whole numbers in full (1310720), others to 5 digits
    Column("expansion", "expansion", "text"),
)

# The steps of an attention part, in the order a teacher writes them on the board.
MAIN_STEPS = ("q", "k", "v", "scores", "scaled_scores", "unscaled_weights", "weights",
              "unscaled_output", "output")
EXP_STEPS = ("exp_scores", "exp_sums", "exp_scaled_scores", "exp_scaled_sums")
# Every quantity of one path (main, or embeddings·weights).
ALL_PATH = ("scores", "scaled_scores", "unscaled_weights", "weights", "unscaled_output",
            "output", "output_terms", "exp_scores", "exp_sums", "exp_scaled_scores",
            "exp_scaled_sums", "variance.scores.population", "variance.scores.sample",
            "variance.scaled_scores.population", "variance.scaled_scores.sample",
            "mean.scores", "mean.scaled_scores", "unscaled_weights.max",
            "unscaled_weights.min", "weights.max", "weights.min")
# What depends on the divisor: these are replayed under `printed.` with the document's own.
SCALED_STEPS = ("scaled_scores", "weights", "output", "output_terms", "exp_scaled_scores",
                "exp_scaled_sums", "variance.scaled_scores.population",
                "variance.scaled_scores.sample", "mean.scaled_scores", "weights.max",
                "weights.min")
PREFIXES = ("printed.", "from_weights.")
# A variance quoted without saying population or sample: compared with the closer of the two.
_BARE_VARIANCE = re.compile(r"^((?:printed\.|from_weights\.)?variance\.[a-z_]+)$")
_WEIGHT_ROW = re.compile(r"^(?:printed\.|from_weights\.)?(?:unscaled_)?weights$")


@dataclass
class PartRun:
    """Everything one part computes: the audit's quantities, table rows, panels, notes."""

    part: Part
    quantities: dict[str, Any]  # quantity name → float, np.ndarray or None
    steps: dict[str, Any] = field(default_factory=dict)  # main steps, for `steps` in JSON
    rows: list[dict[str, Any]] = field(default_factory=list)
    panels: list[Panel] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figure: dict[str, Any] | None = None


# --- computing each kind of part -------------------------------------------------------------


def _labels(part: Part, n: int, m: int) -> tuple[list[str], list[str]]:
    rows = list(part.tokens) if part.tokens else [str(i + 1) for i in range(n)]
    if part.key_tokens:
        cols = list(part.key_tokens)
    elif part.tokens and len(part.tokens) == m:
        cols = list(part.tokens)
    else:
        cols = [str(j + 1) for j in range(m)]
    return rows, cols


def _add_path(out: dict[str, Any], prefix: str, st: att.Steps, names: Iterable[str]) -> None:
    """The quantities of one path (main, printed divisor or weights), under a prefix."""
    exp_s, exp_sums = att.exp_table(st.scores)
    exp_ss, exp_ssums = att.exp_table(st.scaled_scores)
    pop, sample = att.variances(st.scores)
    spop, ssample = att.variances(st.scaled_scores)
    every = {
        "scores": st.scores,
        "scaled_scores": st.scaled_scores,
        "unscaled_weights": st.unscaled_weights,
        "weights": st.weights,
        "unscaled_output": st.unscaled_output,
        "output": st.output,
        "output_terms": st.output_terms,
        "exp_scores": exp_s,
        "exp_sums": exp_sums,
        "exp_scaled_scores": exp_ss,
        "exp_scaled_sums": exp_ssums,
        "variance.scores.population": pop,
        "variance.scores.sample": sample,
        "variance.scaled_scores.population": spop,
        "variance.scaled_scores.sample": ssample,
        "mean.scores": float(st.scores.mean()),
        "mean.scaled_scores": float(st.scaled_scores.mean()),
        "unscaled_weights.max": float(st.unscaled_weights.max()),
        "unscaled_weights.min": float(st.unscaled_weights.min()),
        "weights.max": float(st.weights.max()),
        "weights.min": float(st.weights.min()),
    }
    for name in names:
        if every[name] is not None:
            out[prefix + name] = every[name]




def _root_label(d_k: int) -> str:
    r = math.isqrt(d_k)
    return f"√{d_k} = {r}" if r * r == d_k else f"√{d_k}"


@dataclass
class _Replay:
    """The inputs and every path of one attention part, shared by its rows and panels."""

    part: Part
    e: np.ndarray | None  # embeddings
    stated: dict[str, np.ndarray]  # q, k, v as the document states them
    projected: dict[str, np.ndarray]  # E·W_Q, E·W_K, E·W_V where the weights are given
    q: np.ndarray | None  # the vectors the steps use (stated first, else projected)
    k: np.ndarray | None
    v: np.ndarray | None
    d_k: int
    root: float  # √d_k
    printed_div: float | None  # the document's own divisor, when it is not √d_k
    steps: att.Steps  # the main path, ÷√d_k
    printed: att.Steps | None  # the same with the document's divisor
    from_w: att.Steps | None  # the embeddings·weights path, when stated vectors exist too
    rows: list[str]  # query labels
    cols: list[str]  # key labels

    @property
    def root_label(self) -> str:
        return _root_label(self.d_k)

    def proj_expansion(self, x: str) -> Callable[[int, int], str] | None:
        if x not in self.projected or self.e is None:
            return None
        e, w, p = self.e, att.as_matrix(getattr(self.part, f"w_{x}")), self.projected[x]
        return lambda i, j: expansion(e[i], w[:, j], float(p[i, j]))


def _replay(part: Part) -> _Replay:
    m = att.as_matrix
    e = m(part.embeddings) if part.embeddings is not None else None
    stated = {x: m(getattr(part, x)) for x in "qkv" if getattr(part, x) is not None}
    projected = {x: att.project(e, m(getattr(part, f"w_{x}"))) for x in "qkv"
                 if e is not None and getattr(part, f"w_{x}") is not None}
    q, k, v = (stated.get(x, projected.get(x)) for x in "qkv")
    scores = m(part.scores) if part.scores is not None else q @ k.T
    d_k = part.d_k if part.d_k is not None else k.shape[1]
    root = math.sqrt(d_k)
    printed_div = part.scale if part.scale != "sqrt" else None
    from_w = None
    if any(x in stated and x in projected for x in "qkv"):
        qw, kw, vw = (projected.get(x, stated.get(x)) for x in "qkv")
        from_w = att.attend(qw @ kw.T, root, vw)
    rows, cols = _labels(part, *scores.shape)
    return _Replay(
        part=part, e=e, stated=stated, projected=projected, q=q, k=k, v=v, d_k=d_k,
        root=root, printed_div=printed_div, steps=att.attend(scores, root, v),
        printed=att.attend(scores, printed_div, v) if printed_div is not None else None,
        from_w=from_w, rows=rows, cols=cols,
    )


def _quantities(r: _Replay) -> dict[str, Any]:
    """Everything a documented entry of an attention part can name."""
    qty: dict[str, Any] = {"d_k": float(r.d_k), "sqrt_d_k": r.root}
    for x, mat in zip("qkv", (r.q, r.k, r.v), strict=True):
        if mat is not None:
            qty[x] = mat
    if r.q is not None and r.k is not None:
        qty["products"] = att.dot_terms(r.q, r.k)
    _add_path(qty, "", r.steps, ALL_PATH)
    if r.printed is not None:
        qty["printed.divisor"] = r.printed_div
        _add_path(qty, "printed.", r.printed, SCALED_STEPS)
    if r.from_w is not None:
        for x in "qkv":
            mat = r.projected.get(x, r.stated.get(x))
            if mat is not None:
                qty[f"from_weights.{x}"] = mat
        _add_path(qty, "from_weights.", r.from_w, ALL_PATH)
    return qty


def _attention_rows(r: _Replay, qty: dict[str, Any], show_exp: bool) -> list[dict[str, Any]]:
    """The long-format rows: every entry of every step, expansions where there is one."""
    name = r.part.name
    out: list[dict[str, Any]] = []

    def add(step: str, value: Any, text: Callable[[int, int], str] | None = None) -> None:
        arr = np.asarray(value, dtype=float)
        if arr.ndim == 0:
            out.append(_row(name, step, None, None, float(arr), ""))
        elif arr.ndim == 1:
            out.extend(_row(name, step, i, None, float(x), "") for i, x in enumerate(arr))
        elif arr.ndim == 2:
            out.extend(_row(name, step, i, j, float(arr[i, j]), text(i, j) if text else "")
                       for i in range(arr.shape[0]) for j in range(arr.shape[1]))

    def dots(qm: np.ndarray, km: np.ndarray, sm: np.ndarray) -> Callable[[int, int], str]:
        return lambda i, j: expansion(qm[i], km[j], float(sm[i, j]))

    def divided(sm: np.ndarray, div: float, label: str) -> Callable[[int, int], str]:
        return lambda i, j: f"{num(float(sm[i, j]))} / {label} = {num(float(sm[i, j] / div))}"

    scores = r.steps.scores
    for x in "qkv":
        if x in qty:
            add(x, qty[x], r.proj_expansion(x) if x not in r.stated else None)
    add("scores", scores, dots(r.q, r.k, scores) if r.q is not None and r.k is not None
        else None)
    add("scaled_scores", r.steps.scaled_scores, divided(scores, r.root, r.root_label))
    for step in ("unscaled_weights", "weights", "unscaled_output", "output",
                 *(EXP_STEPS if show_exp else ())):
        if step in qty:
            add(step, qty[step])
    for q_name, value in qty.items():
        if "." in q_name and not q_name.startswith(PREFIXES):  # variance.*, mean.*, *.max
            add(q_name, value)
    add("d_k", float(r.d_k))
    add("sqrt_d_k", r.root)
    for q_name, value in qty.items():
        if not q_name.startswith(PREFIXES) or q_name.endswith("_terms"):
            continue
        text = None
        if q_name == "from_weights.scores" and r.from_w is not None:
            text = dots(qty["from_weights.q"], qty["from_weights.k"], r.from_w.scores)
        elif q_name == "printed.scaled_scores" and r.printed_div is not None:
            text = divided(scores, r.printed_div, num(r.printed_div))
        elif q_name in ("from_weights.q", "from_weights.k", "from_weights.v"):
            text = r.proj_expansion(q_name[-1])
        add(q_name, value, text)
    return out


def attention(part: Part, expand: bool, wanted: set[str]) -> PartRun:
    """Replay one attention example; `wanted` names the quantities documents refer to."""
    r = _replay(part)
    qty = _quantities(r)
    # exp tables are shown when asked for, or when the document's numbers include them
    show_exp = part.exp_tables or any(w.split(".")[-1].startswith("exp_") for w in wanted)
    run = PartRun(part, qty)
    run.steps = {s: qty[s] for s in (*MAIN_STEPS, *(EXP_STEPS if show_exp else ()))
                 if s in qty}
    run.rows = _attention_rows(r, qty, show_exp)
    run.panels = _attention_panels(r, expand, show_exp, run.notes)
    if r.printed_div is not None and not math.isclose(r.printed_div, r.root, rel_tol=1e-12):
        run.notes.append(f"{part.name}: the document divides by {num(r.printed_div)}, not "
                         f"√{r.d_k} = {r.root:.6g}; the steps follow √{r.d_k} and the "
                         "document's divisor is replayed as printed.*")
    run.figure = {"name": part.name, "rows": r.rows, "cols": r.cols,
                  "description": part.description,
                  "scores": r.steps.scores.tolist(),
                  "scaled_scores": r.steps.scaled_scores.tolist(),
                  "unscaled": r.steps.unscaled_weights.tolist(),
                  "scaled": r.steps.weights.tolist(), "root": r.root_label}
    return run


def _attention_panels(r: _Replay, expand: bool, show_exp: bool, notes: list[str]
                      ) -> list[Panel]:
    """The steps as a teacher writes them on the board, numbered in the order shown."""
    part, st = r.part, r.steps
    scores = st.scores
    n, n_keys = scores.shape
    panels: list[Panel] = []
    number = iter(range(1, 100))

    def step(title: str, lines: list[str], style: str = "plain", numbered: bool = True
             ) -> None:
        head = f"{part.name} · {next(number)}. {title}" if numbered else \
            f"{part.name} · {title}"
        panels.append(Panel(head, tuple(lines), style))

    def cols_of(mat: np.ndarray) -> list[str]:
        return [str(c + 1) for c in range(mat.shape[1])]

    inputs = [part.description] if part.description else []
    if r.e is not None:
        labels = r.rows if len(r.rows) == r.e.shape[0] else [str(i + 1)
                                                              for i in range(r.e.shape[0])]
        inputs += ["embeddings E (one row per token):", *matrix_lines(r.e, labels,
                                                                      cols_of(r.e))]
        for x in "qkv":
            w = getattr(part, f"w_{x}")
            if w is not None:
                wm = att.as_matrix(w)
                inputs += [f"W_{x.upper()}:", *matrix_lines(
                    wm, [str(i + 1) for i in range(wm.shape[0])], cols_of(wm))]
    if part.scores is not None:
        inputs.append(f"QKᵀ is given directly (no Q or K behind it); d_k = {r.d_k}.")
    if inputs:
        step("inputs", inputs, numbered=False)

    lines: list[str] = []
    for x, mat in (("q", r.q), ("k", r.k), ("v", r.v)):
        if mat is None:
            continue
        how = "as stated" if x in r.stated else f"= E·W_{x.upper()} (row vectors)"
        labels = r.rows if x == "q" else r.cols
        lines += [f"{x.upper()} {how}:", *matrix_lines(mat, labels, cols_of(mat))]
        fn = r.proj_expansion(x) if expand and x not in r.stated else None
        if fn is not None:
            lines += [f"  {x}_{labels[i]}[{j + 1}] = {fn(i, j)}"
                      for i in range(mat.shape[0]) for j in range(mat.shape[1])]
    if lines:
        step("Q, K, V" if r.q is not None else "V", lines)
    if r.from_w is not None:
        warn = _weights_path_panel(r, notes)
        step(warn.title, list(warn.lines), warn.style, numbered=False)

    lines = matrix_lines(scores, r.rows, r.cols)
    if r.q is not None and r.k is not None:
        if expand:
            lines.append("")
            lines += [f"q_{r.rows[i]}·k_{r.cols[j]} = "
                      f"{expansion(r.q[i], r.k[j], float(scores[i, j]))}"
                      for i in range(n) for j in range(n_keys)]
        else:
            lines.append("(--expand shows every entry as its dot-product expansion)")
    step("scores QKᵀ" + (" (given)" if r.q is None else ""), lines)

    lines = matrix_lines(st.scaled_scores, r.rows, r.cols)
    if r.printed is not None and r.printed_div is not None:
        gap = r.printed_div - r.root
        diff = float(np.abs(r.printed.scaled_scores - st.scaled_scores).max())
        lines += ["", f"÷ {num(r.printed_div)} as the document divides ({num(r.printed_div)} "
                  f"− √{r.d_k} = {'−' if gap < 0 else '+'}{abs(gap):.2g}):",
                  *matrix_lines(r.printed.scaled_scores, r.rows, r.cols),
                  f"largest difference from ÷√{r.d_k}: {cell(diff)}"]
    step(f"scaled scores = QKᵀ / {r.root_label} (= {cell(r.root)})", lines)

    step("variance of the scores", _variance_lines(scores, st.scaled_scores, r.root_label,
                                                   r.d_k, r.printed, r.printed_div))

    if show_exp:
        exp_s, exp_sums = att.exp_table(scores)
        exp_ss, exp_ssums = att.exp_table(st.scaled_scores)
        lines = ["exp(QKᵀ), not shifted (as documents print it):",
                 *matrix_lines(exp_s, r.rows, r.cols, ("sum", exp_sums)), "",
                 f"exp(QKᵀ / {r.root_label}):",
                 *matrix_lines(exp_ss, r.rows, r.cols, ("sum", exp_ssums))]
        if not np.isfinite(exp_s).all():
            lines.append("overflow: exp(score) exceeds the largest float64; softmax itself "
                         "subtracts each row's maximum first and is not affected")
        step("exp tables", lines)

    def softmax_line(i: int, z: np.ndarray, w: np.ndarray) -> str:
        return f"{r.rows[i]}: softmax({', '.join(cells(z[i]))}) = {vector(w[i])}"

    lines = [softmax_line(i, st.scaled_scores, st.weights) for i in range(n)]
    lines += ["", "without scaling, for comparison:"]
    lines += [softmax_line(i, scores, st.unscaled_weights) for i in range(n)]
    lines += ["", f"largest weight: {cell(float(st.weights.max()))} scaled, "
              f"{cell(float(st.unscaled_weights.max()))} unscaled"]
    if r.printed is not None:
        lines += ["", f"with ÷ {num(r.printed_div)}:",
                  *matrix_lines(r.printed.weights, r.rows, r.cols)]
    step("softmax weights, row by row", lines)

    if r.v is not None and st.output is not None:
        lines = []
        for i in range(n):
            combo = " + ".join(f"{cell(float(st.weights[i, j]), False)}·v_{r.cols[j]}"
                               for j in range(n_keys))
            lines += [f"{r.rows[i]}: {combo}", f"{' ' * len(r.rows[i])}  = "
                      f"{vector(st.output[i])}"]
        step("output = weights · V", lines)
    return panels


def _weights_path_panel(r: _Replay, notes: list[str]) -> Panel:
    """The stated vectors beside E·W (a finding when they differ): both paths are shown."""
    lines: list[str] = []
    differs = []
    for x in "qkv":
        if x not in r.stated or x not in r.projected:
            continue
        s, p = r.stated[x], r.projected[x]
        labels = r.rows if x == "q" else r.cols
        if len(labels) != s.shape[0]:
            labels = [str(i + 1) for i in range(s.shape[0])]
        same = np.allclose(s, p, rtol=1e-12, atol=1e-12)
        lines.append(f"{x.upper()}: stated vs E·W_{x.upper()} — {'agree' if same else 'DIFFER'}")
        for i in range(s.shape[0]):
            mark = "" if np.allclose(s[i], p[i], rtol=1e-12, atol=1e-12) else "   ≠"
            lines.append(f"  {x}_{labels[i]}: stated {vector(s[i])}   "
                         f"E·W_{x.upper()} {vector(p[i])}{mark}")
        if same:
            continue
        differs.append(x)
        w = att.as_matrix(getattr(r.part, f"w_{x}"))
        assert r.e is not None
        # The column convention q = W·e: does the document perhaps multiply the other way?
        column = (w @ r.e.T).T if w.shape[1] == r.e.shape[1] else None
        if column is not None and np.allclose(column, s, rtol=1e-12, atol=1e-12):
            conv = f"W_{x.upper()}·eᵀ (column vectors) does reproduce the stated {x}"
        else:
            conv = f"W_{x.upper()}·eᵀ (column vectors) does not reproduce them either"
        if r.e.shape == s.shape and np.allclose(r.e, s, rtol=1e-12, atol=1e-12):
            conv += (f"; the stated {x} vectors are the embeddings themselves (as if "
                     f"W_{x.upper()} were the identity)")
        lines.append(f"  {conv}")
        notes.append(f"{r.part.name}: the stated {x} vectors are not E·W_{x.upper()}; {conv}.")
    if differs and r.from_w is not None:
        lines += ["", "The steps follow the stated vectors (the document's later numbers derive "
                  "from them). The weights path gives:", "QKᵀ:",
                  *matrix_lines(r.from_w.scores, r.rows, r.cols), "softmax weights:",
                  *matrix_lines(r.from_w.weights, r.rows, r.cols)]
    return Panel("stated vectors versus embeddings · weights", tuple(lines),
                 style="warn" if differs else "ok")


def _variance_lines(scores: np.ndarray, scaled: np.ndarray, root_label: str, d_k: int,
                    printed: att.Steps | None, printed_div: float | None) -> list[str]:
    n = scores.size
    pop, sample = att.variances(scores)
    spop, ssample = att.variances(scaled)
    mean = float(scores.mean())
    pop_label, sample_label = f"population (÷N = {n})", f"sample (÷(N−1) = {n - 1})"
    width = max(len(pop_label), len(sample_label))
    lines = [f"all {n} entries: {', '.join(num(float(x)) for x in scores.ravel())}",
             f"mean = {cell(mean)}",
             f"{pop_label.ljust(width)}  {cell(pop, False)}"]
    if sample is not None:
        lines.append(f"{sample_label.ljust(width)}  {cell(sample, False)}")
    lines += ["", f"after ÷ {root_label} (variance ÷ {d_k}):",
              f"{'population'.ljust(width)}  {cell(spop, False)}"]
    if ssample is not None:
        lines.append(f"{'sample'.ljust(width)}  {cell(ssample, False)}")
    if printed is not None and printed_div is not None:
        ppop, psample = att.variances(printed.scaled_scores)
        lines += ["", f"after ÷ {num(printed_div)} (variance ÷ {num(printed_div ** 2)}): "
                  f"population {cell(ppop)}"
                  + (f", sample {cell(psample)}" if psample is not None else "")]
    return lines


def variance_part(part: Part) -> PartRun:
    assert part.values is not None
    x = np.asarray(part.values, dtype=float)
    div = part.divisor
    qty: dict[str, Any] = {"values": x, "mean.values": float(x.mean())}
    pop, sample = att.variances(x)
    qty["variance.values.population"], qty["variance.values.sample"] = pop, sample
    lines = [f"values: {', '.join(num(float(v)) for v in x)}  (N = {x.size})",
             f"mean = {num(float(x.mean()))}",
             f"population variance (÷N = {x.size}):   {num(pop)}",
             f"sample variance (÷(N−1) = {x.size - 1}):  {num(sample)}"]
    if div is not None:
        y = x / div
        spop, ssample = att.variances(y)
        qty.update({"divisor": div, "scaled_values": y, "mean.scaled_values": float(y.mean()),
                    "variance.scaled_values.population": spop,
                    "variance.scaled_values.sample": ssample})
        lines += ["", f"÷ {num(div)}: {', '.join(num(float(v)) for v in y)}",
                  f"mean = {num(float(y.mean()))}",
                  f"population variance: {num(spop)}   (= {num(pop)} / {num(div)}²)",
                  f"sample variance:     {num(ssample)}   (= {num(sample)} / {num(div)}²)"]
    run = PartRun(part, qty)
    if part.description:
        lines.insert(0, part.description)
    run.panels.append(Panel(f"{part.name} · variance before and after scaling", tuple(lines)))
    run.steps = {"values": x, **({"scaled_values": qty["scaled_values"]} if div else {})}
    for name, value in qty.items():
        arr = np.asarray(value, dtype=float)
        if arr.ndim == 0:
            run.rows.append(_row(part.name, name, None, None, float(arr), ""))
        else:
            for i, val in enumerate(arr):
                text = f"{num(float(x[i]))} / {num(div)} = {num(float(val))}" \
                    if name == "scaled_values" and div is not None else ""
                run.rows.append(_row(part.name, name, i, None, float(val), text))
    return run


def scaling_part(part: Part) -> PartRun:
    assert part.dims is not None and part.variances is not None
    dims = np.asarray(part.dims, dtype=float)
    var = np.asarray(part.variances, dtype=float)
    factor = 1.0 / np.sqrt(dims)
    scaled = var / dims  # (1/√d)² · Var = Var / d, exactly
    qty: dict[str, Any] = {
        "dims": dims, "variances": var, "factor": factor, "scaled_variance": scaled,
        "ratio": var / var[0], "expected_ratio": dims / dims[0],
    }
    lines = [part.description] if part.description else []
    lines.append("each row: the document's variance at d, the factor 1/√d, and (1/√d)²·Var")
    texts: dict[str, list[str]] = {"scaled_variance": [], "printed.scaled_variance": [],
                                   "ratio": []}
    for i, d in enumerate(part.dims):
        s = f"{num(var[i])} × (1/√{d})² = {num(var[i])} / {d} = {num(float(scaled[i]))}"
        texts["scaled_variance"].append(s)
        lines.append(f"{d}-D: Var = {num(var[i])}; 1/√{d} = {cell(float(factor[i]))}; {s}")
        if part.factors is not None:
            f = part.factors[i]
            p = f * f * var[i]
            t = f"({num(f)})² × {num(var[i])} = {num(p)}"
            texts["printed.scaled_variance"].append(t)
            lines.append(f"      with the printed factor: {t}")
        r = f"{num(var[i])} / {num(var[0])} = {num(float(var[i] / var[0]))}"
        texts["ratio"].append(r)
    if part.factors is not None:
        fac = np.asarray(part.factors, dtype=float)
        qty["printed.factor"] = fac
        qty["printed.scaled_variance"] = fac * fac * var
    lines += ["", f"the claim Var(d-D) = d × Var({part.dims[0]}-D), against the document's "
              "own numbers:"]
    for i, d in enumerate(part.dims[1:], start=1):
        lines.append(f"  Var({d}-D) / Var({part.dims[0]}-D) = {texts['ratio'][i]}   "
                     f"(the claim: {num(d / part.dims[0])})")
    run = PartRun(part, qty)
    run.panels.append(Panel(f"{part.name} · per-dimension variances and 1/√d scaling",
                            tuple(lines)))
    run.steps = {k: v for k, v in qty.items()}
    for name, value in qty.items():
        for i, val in enumerate(np.asarray(value, dtype=float)):
            text = texts[name][i] if name in texts and i < len(texts[name]) else ""
            run.rows.append(_row(part.name, name, i, None, float(val), text))
    return run


def cost_part(part: Part) -> PartRun:
    assert part.n is not None and part.d is not None and part.h is not None
    n, d, h = part.n, part.d, part.h
    dk = d // h
    table = [
        ("d_k", dk, f"d / h = {d} / {h}", "width of one head"),
        ("projection", n * d * d, f"n·d² = {n} · {d}²", "one of Q, K, V: (n×d)·(d×d)"),
        ("projections", 3 * n * d * d, f"3·n·d² = 3 · {n} · {d}²", "Q, K and V"),
        ("scores_per_head", n * n * dk, f"n²·d_k = {n}² · {dk}", "QKᵀ of one head"),
        ("scores", n * n * d, f"n²·d = {n}² · {d}", "QKᵀ of all heads"),
        ("softmax_per_head", n * n, f"n² = {n}²", "exponentials of one head"),
        ("softmax", h * n * n, f"h·n² = {h} · {n}²", "exponentials of all heads"),
        ("weighted_sum_per_head", n * n * dk, f"n²·d_k = {n}² · {dk}", "weights·V, one head"),
        ("weighted_sum", n * n * d, f"n²·d = {n}² · {d}", "weights·V, all heads"),
        ("output_projection", n * d * d, f"n·d² = {n} · {d}²", "concat·W_O"),
        ("quadratic_term", n * n * d, f"n²·d = {n}² · {d}", "grows with the square of n"),
        ("linear_term", n * d * d, f"n·d² = {n} · {d}²", "grows linearly with n"),
        ("crossover_n", d, "n²·d = n·d² when n = d", "n²·d dominates only for n > d"),
    ]
    total = 4 * n * d * d + 2 * n * n * d + h * n * n
    table.append(("total", total, f"4·n·d² + 2·n²·d + h·n² = 4·{n}·{d}² + 2·{n}²·{d} + "
                  f"{h}·{n}²", "multiply-adds and exponentials per layer"))
    qty: dict[str, Any] = {name: float(value) for name, value, _, _ in table}
    width = max(len(name) for name, *_ in table)
    lines = [part.description] if part.description else []
    lines.append(f"n = {n}, d = {d}, h = {h}")
    lines += [f"{name.ljust(width)}  {f'{text} = {value:,}'.ljust(46)}  {why}"
              for name, value, text, why in table]
    run = PartRun(part, qty)
    run.panels.append(Panel(f"{part.name} · operation counts", tuple(lines)))
    run.steps = dict(qty)
    for name, value, text, _ in table:
        run.rows.append(_row(part.name, name, None, None, float(value), f"{text} = {value:,}"))
    lead = "n·d²" if n * d * d > n * n * d else "n²·d"
    ratio = (n * d * d) / (n * n * d)
    run.notes.append(
        f"{part.name}: at n = {n}, d = {d} the projections' n·d² = {n * d * d:,} and the "
        f"attention matrix's n²·d = {n * n * d:,}: {lead} dominates by {ratio:.4g}× "
        f"(= d/n); n²·d dominates only for sequences longer than d = {d}.")
    return run


def _row(part: str, step: str, i: int | None, j: int | None, value: float, text: str
         ) -> dict[str, Any]:
    return {"part": part, "step": step, "i": i, "j": j,
            "value": value if math.isfinite(value) else None, "expansion": text}


# --- the whole example ----------------------------------------------------------------------


def _wanted(spec: WorkedExampleSpec) -> dict[str, set[str]]:
    """Quantity names each part's documented entries mention (to show their exp tables)."""
    out: dict[str, set[str]] = {p.name: set() for p in spec.parts}
    for entry in spec.documented:
        name = entry.part if entry.part is not None else (
            spec.parts[0].name if len(spec.parts) == 1 else None)
        if name in out:
            out[name].add(split_quantity(entry.quantity)[0])
    return out


def compute(spec: WorkedExampleSpec) -> list[PartRun]:
    wanted = _wanted(spec)
    runs = []
    for part in spec.parts:
        if part.kind == "attention":
            runs.append(attention(part, spec.expand, wanted[part.name]))
        elif part.kind == "variance":
            runs.append(variance_part(part))
        elif part.kind == "scaling-arithmetic":
            runs.append(scaling_part(part))
        else:
            runs.append(cost_part(part))
    return runs


def _part_of(spec: WorkedExampleSpec, entry: Documented) -> str | None:
    if entry.part is not None:
        return entry.part
    return spec.parts[0].name if len(spec.parts) == 1 else None


def _shape_text(value: Any) -> str:
    arr = np.asarray(value, dtype=float) if value is not None else None
    if arr is None or arr.ndim == 0:
        return "one number"
    return "×".join(str(s) for s in arr.shape)


def documented_problem(spec: WorkedExampleSpec, entry: Documented) -> str | None:
    """Why an entry names no existing part, quantity or entry (None when it does)."""
    names = [p.name for p in spec.parts]
    if entry.row:
        return "worked examples pick a number by part: and quantity:, not row:"
    part_name = _part_of(spec, entry)
    if part_name is None:
        return f"name the part (part: …): one of {', '.join(names)}"
    if part_name not in names:
        close = difflib.get_close_matches(part_name, names, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"no part named {part_name!r}{hint}; parts: {', '.join(names)}"
    run = _runs_for(spec)[part_name]
    name, _ = split_quantity(entry.quantity)
    qty = run.quantities
    if _BARE_VARIANCE.match(name) and f"{name}.population" in qty:
        if isinstance(entry.value, list):
            return f"{name} is one number; document one value"
        return None
    if name not in qty:
        close = difflib.get_close_matches(name, list(qty), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        plain = ", ".join(n for n in qty if "." not in n)
        dotted = sorted({re.sub(r"^(printed|from_weights)\..*", r"\1.*", n)
                         for n in qty if "." in n})
        return (f"no quantity {name!r} in {run.part.kind} part {part_name!r}{hint}; "
                f"quantities: {plain}" + (f"; also {', '.join(dotted)}" if dotted else ""))
    for quantity, _printed in flatten(entry.value, entry.quantity):
        _, idx = split_quantity(quantity)
        value = pick(_listed(qty[name]), idx)
        if not isinstance(value, int | float):
            return (f"{quantity} does not name one number: {name} is "
                    f"{_shape_text(qty[name])}")
    return None


def _listed(value: Any) -> Any:
    """NumPy to nested lists (±inf stay floats; the audit turns them into 'nothing')."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


_CACHE: dict[int, tuple[WorkedExampleSpec, dict[str, PartRun]]] = {}


def _runs_for(spec: WorkedExampleSpec) -> dict[str, PartRun]:
    """The computed parts of a spec; kept for the spec being checked, which asks once per
    documented entry (the spec itself is kept too, so its id cannot be reused meanwhile)."""
    hit = _CACHE.get(id(spec))
    if hit is None or hit[0] is not spec:
        _CACHE.clear()
        hit = (spec, {r.part.name: r for r in compute(spec)})
        _CACHE[id(spec)] = hit
    return hit[1]


def _resolve_bare(entry: Documented, qty: dict[str, Any]) -> Documented:
    """'variance.scores' (the document does not say which) → the closer of population and
    sample, named, with the other value in the note."""
    name, _ = split_quantity(entry.quantity)
    if not _BARE_VARIANCE.match(name) or f"{name}.population" not in qty or \
            isinstance(entry.value, list):
        return entry
    printed = entry.value
    pop, sample = qty[f"{name}.population"], qty.get(f"{name}.sample")
    kind, other = "population", sample
    if sample is not None and abs(sample - printed.value) < abs(pop - printed.value):
        kind, other = "sample", pop
    other_kind = "sample" if kind == "population" else "population"
    other_text = "undefined" if other is None else f"{other:.4g}"
    why = (f"the document does not say population or sample; compared with the closer, "
           f"{kind} ({other_kind}: {other_text})")
    note = f"{why}. {entry.note}" if entry.note else why
    return entry.model_copy(update={"quantity": f"{name}.{kind}", "note": note})


def _lookup(runs: dict[str, PartRun], spec: WorkedExampleSpec):
    def lookup(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
        part = _part_of(spec, entry)
        run = runs.get(part or "")
        if run is None:
            return None, None
        name, idx = split_quantity(quantity)
        value = pick(_listed(run.quantities.get(name)), idx)
        if not isinstance(value, int | float) or not math.isfinite(value):
            return None, None
        return float(value), None

    return lookup


def _explain_by_printed_divisor(a: AuditEntry, run: PartRun) -> AuditEntry:
    """A finding that the document's own divisor reproduces says so in its note."""
    if a.status != "mismatch" or "printed.divisor" not in run.quantities:
        return a
    name, idx = split_quantity(a.quantity)
    if name.startswith(PREFIXES) or f"printed.{name}" not in run.quantities:
        return a
    alt = pick(_listed(run.quantities[f"printed.{name}"]), idx)
    if not isinstance(alt, float) or abs(alt - a.documented) > a.tolerance * (1 + 1e-9):
        return a
    div = num(run.quantities["printed.divisor"])
    why = f"÷ {div} (the document's divisor) gives {alt:.6g}, which matches"
    return dataclasses.replace(a, note=f"{a.note}; {why}" if a.note else why)


def _sum_findings(spec: WorkedExampleSpec) -> list[str]:
    """Printed rows of softmax weights that cannot sum to 1, whatever the rounding."""
    out = []
    for entry in spec.documented:
        name, _ = split_quantity(entry.quantity)
        if not _WEIGHT_ROW.match(name) or not isinstance(entry.value, list) or \
                any(isinstance(v, list) for v in entry.value):
            continue
        vals: list[Printed] = entry.value
        total = sum(v.value for v in vals)
        slack = sum(v.unit if (v.approx or entry.approx) else v.unit / 2 for v in vals)
        if abs(total - 1.0) > slack * (1 + 1e-9):
            shown = ", ".join(v.text for v in vals)
            out.append(f"{entry.where}: the printed weights [{shown}] sum to {total:.4g}; "
                       f"softmax weights sum to 1, and rounding can move the sum by at most "
                       f"{slack:.3g}")
    return out


def run(spec: WorkedExampleSpec, *, workers: int = 1) -> Result:
    """Replay every part, audit every documented number; `workers` is unused (tiny work)."""
    del workers
    runs = {r.part.name: r for r in compute(spec)}
    audit: list[AuditEntry] = []
    lookup = _lookup(runs, spec)
    for entry in spec.documented:
        part = _part_of(spec, entry)
        run_ = runs.get(part or "")
        resolved = _resolve_bare(entry, run_.quantities) if run_ else entry
        for a in run_audit([resolved], lookup, 1.0, spec.document):
            a = _explain_by_printed_divisor(a, run_) if run_ else a
            if len(spec.parts) > 1:  # the same quantity exists in every part: say whose
                a = dataclasses.replace(a, quantity=f"{part}/{a.quantity}")
            audit.append(a)
    checks = [_sanity(r) for r in runs.values() if r.part.kind == "attention"]
    check = audit_check(audit)
    if check:
        checks.append(check)
    rows = [row for r in runs.values() for row in r.rows]
    panels = [p for r in runs.values() for p in r.panels]
    notes = [n for r in runs.values() for n in r.notes]
    sums = _sum_findings(spec)
    notes += sums
    if sums:
        panels.append(Panel("printed weights that cannot be softmax outputs", tuple(sums),
                            style="warn"))
    figures = _figures(runs)
    first = next((r for r in runs.values() if r.part.kind == "attention"), None)
    extra = {
        "steps": _jsonable(first.steps) if first else {},
        "parts": {name: {"kind": r.part.kind, "description": r.part.description,
                         "steps": _jsonable(r.steps),
                         "quantities": _jsonable(r.quantities)} for name, r in runs.items()},
    }
    return Result(
        study="worked-example",
        name=spec.name or "worked-example",
        title=spec.title or "Worked example",
        source=spec.source,
        description=spec.description,
        spec=_spec_json(spec),
        table=Table("steps", "Every computed entry (long format)", COLUMNS, tuple(rows),
                    terminal=False),
        checks=tuple(checks),
        audit=tuple(audit),
        theory=_theory(runs.values()),
        notes=tuple(notes),
        figures=figures,
        panels=tuple(panels),
        extra=extra,
    )


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in values.items():
        if isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, float | int) or v is None:
            out[k] = v
    return out


def _spec_json(spec: WorkedExampleSpec) -> dict[str, Any]:
    """The resolved spec; each part keeps only the fields of its kind."""
    doc = spec.model_dump(mode="json")
    doc["parts"] = [
        {k: v for k, v in p.items() if k in COMMON_FIELDS or
         (k in FIELDS_BY_KIND[p["kind"]] and (v is not None or k == "d_k"))}
        for p in doc["parts"]
    ]
    return doc


def _sanity(r: PartRun) -> Check:
    """Identities the steps must satisfy whatever the inputs (a guard on the numerics)."""
    q = r.quantities
    worst = max(float(np.abs(q[w].sum(axis=-1) - 1.0).max())
                for w in ("weights", "unscaled_weights"))
    ratio_ok = math.isclose(q["variance.scaled_scores.population"] * q["d_k"],
                            q["variance.scores.population"], rel_tol=1e-9, abs_tol=1e-300)
    ok = worst <= 1e-12 and ratio_ok
    return Check(f"{r.part.name}: identities", ok,
                 f"softmax rows sum to 1 (worst |Σ−1| = {worst:.1e}); Var(QKᵀ/√d_k) = "
                 f"Var(QKᵀ)/d_k {'holds' if ratio_ok else 'FAILS'}")


def _theory(runs: Iterable[PartRun]) -> tuple[str, ...]:
    kinds = {r.part.kind for r in runs}
    lines = []
    if "attention" in kinds:
        lines += [
            "Attention(Q, K, V) = softmax(QKᵀ/√d_k)·V; softmax(z)_i = e^(z_i)/Σ_j e^(z_j) row "
            "by row, so every row of weights sums to 1.",
            "Dividing every score by c divides their variance by c²: ÷√d_k divides it by d_k.",
        ]
    if kinds & {"attention", "variance"}:
        lines.append("Population variance divides the squared deviations by N, sample variance "
                     "by N − 1; a documented variance that says neither is compared with the "
                     "closer, and the audit names which.")
    if "scaling-arithmetic" in kinds:
        lines.append("iid components: Var(q·k) = d·σ⁴, so (1/√d)²·Var(q·k) = σ⁴ at every d.")
    if "cost" in kinds:
        lines.append("Per layer: 3·n·d² (Q, K, V) + n²·d (QKᵀ) + n²·d (weights·V) + n·d² (W_O) "
                     "multiply-adds: O(n²·d + n·d²), quadratic in n only once n > d.")
    return tuple(lines)


def _figures(runs: dict[str, PartRun]) -> tuple[Figure, ...]:
    panels = [r.figure for r in runs.values() if r.figure is not None]
    if not panels:
        return ()
    return (Figure("weights", "worked.weights",
                   "Attention weights without and with scaling", {"parts": panels}),)
