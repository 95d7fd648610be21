"""What the system limits: names past NAME_MAX, paths past PATH_MAX, folders 2000 deep (no
recursion), and the environment variables sdpa reads. One line naming the flag or variable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from attack import Bad, check

SMALL = ("--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q")
TINY = ("variance", *SMALL)
V = "study: variance\ndims: [3]\npairs: 10\nseed: 1\n"
LONG = "a" * 300  # one path component over Linux's NAME_MAX (255 bytes)
EDGE = "b" * 240  # fits NAME_MAX, but not with its 24-byte temporary sibling `.NAME.tmp-…`
DEEP = "/".join(["c" * 200] * 25)  # every component fits; the whole path is over PATH_MAX

CORPUS = [
    # --- names and paths --------------------------------------------------------------------------
    Bad("out-component-300", ["variance", *SMALL, "--out", LONG], "(NAME_MAX)", where="--out: "),
    Bad("out-component-240", ["variance", *SMALL, "--out", EDGE],
        "24 of them for its temporary sibling: at most 231", where="--out: "),
    Bad("out-parent-300", ["variance", *SMALL, "--out", f"x/{LONG}/y"], "is 300 bytes",
        where="--out: "),
    Bad("out-path-max", ["variance", *SMALL, "--out", DEEP], "(PATH_MAX)", where="--out: "),
    Bad("batch-out-300", ["run", "s.yaml", "--out", LONG, "-q"], "(NAME_MAX)", {"s.yaml": V}, None),
    Bad("junit-300", ["variance", *SMALL, "--junit-xml", LONG], "(NAME_MAX)",
        where="--junit-xml: "),
    Bad("codequality-300", ["variance", *SMALL, "--codequality", LONG], "(NAME_MAX)",
        where="--codequality: "),
    Bad("compare-a-300", ["compare", LONG, "B"], "(NAME_MAX)", where="A: "),
    Bad("compare-exact-b-300", ["compare", "A", LONG, "--exact"], "(NAME_MAX)", {"A/x": "1"},
        "B: "),
    Bad("spec-name-300", ["variance", f"{LONG}.yaml"], "(NAME_MAX)", where=f"{LONG}.yaml: "),
    Bad("run-path-300", ["run", LONG], "(NAME_MAX)", where=f"{LONG}: "),
    Bad("example-name-300", ["worked-example", LONG], "(NAME_MAX)", where=f"{LONG}: "),
    Bad("study-name-300", ["jacobian", LONG], "(NAME_MAX)", where=f"{LONG}: "),
    # --- the environment --------------------------------------------------------------------------
    Bad("source-date-epoch-word", ["variance", *SMALL, "--svg"], "SOURCE_DATE_EPOCH: 'abc' is "
        "not a whole number of seconds", where="SOURCE_DATE_EPOCH: ",
        env={"SOURCE_DATE_EPOCH": "abc"}),
    Bad("source-date-epoch-negative", ["variance", *SMALL], "from 0 to 253402300799",
        where="SOURCE_DATE_EPOCH: ", env={"SOURCE_DATE_EPOCH": "-1"}),
    Bad("source-date-epoch-huge", ["variance", *SMALL], "(the end of year 9999)",
        where="SOURCE_DATE_EPOCH: ", env={"SOURCE_DATE_EPOCH": "1" + "0" * 30}),
    Bad("numpy-hugepage-word", ["variance", *SMALL], "is not a whole number (NumPy reads",
        where="NUMPY_MADVISE_HUGEPAGE: ", env={"NUMPY_MADVISE_HUGEPAGE": "x"}),
    Bad("mplbackend-unknown", ["variance", *SMALL], "is not a backend matplotlib knows",
        where="MPLBACKEND: ", env={"MPLBACKEND": "nonsense"}),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 15
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=lambda b: b.id)
def test_a_path_or_variable_past_its_limit_is_one_line(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


# --- folders deeper than Python's recursion limit -------------------------------------------------


def _remove_deep(path: Path) -> None:
    """Remove a folder tree of any depth, one folder open at a time (shutil.rmtree, which
    pytest's own clean-up of old temporary folders uses, recurses once per level and fails
    on 2000 of them, for every later session)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
    if not path.is_dir():
        return
    cur, names = os.open(path, flags), []
    while True:
        sub = None
        with os.scandir(cur) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    sub = e.name
                    break
                os.unlink(e.name, dir_fd=cur)
        if sub is not None:
            below = os.open(sub, flags, dir_fd=cur)
            os.close(cur)
            cur, names = below, [*names, sub]
            continue
        if not names:
            os.close(cur)
            break
        parent = os.open("..", flags, dir_fd=cur)
        os.close(cur)
        os.rmdir(names.pop(), dir_fd=parent)
        cur = parent
    path.rmdir()


@pytest.fixture
def deep(workdir: Path):
    """'a/a/…/a', as many folders as PATH_MAX leaves room for below the test's folder (about
    2000; Python's recursion limit is 1000), removed after the test."""
    levels = (4096 - len(os.fsencode(workdir)) - 80) // 2
    assert levels > 1500
    yield "/".join(["a"] * levels)
    _remove_deep(workdir / "a")


def test_a_deep_run_folder_is_checked_and_made_without_recursion(sdpa, workdir):
    """The quick form of the 2000-level case below: 400 levels under a recursion limit that
    leaves 150 frames (Path.mkdir(parents=True) recursed once per level)."""
    import inspect
    import sys

    target = "/".join(["a"] * 400)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 150)
    try:
        got = sdpa(*TINY, "--out", target)
    finally:
        sys.setrecursionlimit(limit)
    try:
        assert got.code == 0, got.err
        assert (workdir / target / "results.json").is_file()
    finally:
        _remove_deep(workdir / "a")


@pytest.mark.slow
def test_out_2000_levels_deep_is_made_without_recursion(sdpa, workdir, deep):
    got = sdpa(*TINY, "--out", deep, "--junit-xml", deep + "-j/r.xml")
    assert got.code == 0, got.err
    assert (workdir / deep / "results.json").is_file() and (workdir / (deep + "-j/r.xml")).is_file()


@pytest.mark.slow
def test_a_batch_2000_levels_deep_is_made_without_recursion(sdpa, workdir, deep):
    spec = workdir / "s.yaml"
    spec.write_text("study: variance\ndims: [3]\npairs: 10\nseed: 1\n", encoding="utf-8")
    got = sdpa("run", "s.yaml", "--out", deep + "-b", "--no-plots", "-q")
    assert got.code == 0, got.err
    assert (workdir / (deep + "-b") / "index.md").is_file()


def test_a_deep_path_is_checked_in_steps_proportional_to_its_depth(monkeypatch, tmp_path):
    """environment.path_problem looked up NAME_MAX by walking up from every component: 2000
    folders cost 2 million stat calls (70 s) before the run even started; now two per level."""
    from sdpa_cli.io import environment

    calls = 0
    real = os.stat

    def counted(path, *args, **kw):
        nonlocal calls
        calls += 1
        return real(path, *args, **kw)

    monkeypatch.setattr(os, "stat", counted)  # Path.is_dir and os.path.isdir both call it
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a" / "a").mkdir(parents=True)
    for depth in (100, 1500):
        calls = 0
        assert environment.path_problem(Path("/".join(["a"] * depth))) is None
        assert calls <= 2 * depth + 4, (depth, calls)
