"""Start-up imports and memory, measured in fresh subprocesses (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("numpy", "pydantic", "matplotlib")


def _child(code: str, cwd) -> dict:
    """Run Python code in a fresh interpreter; it prints one JSON line we return."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=cwd, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_help_imports_nothing_heavy(tmp_path):
    got = _child(f"""
        import json, sys
        from sdpa_cli.cli import run
        code = run(["--help"]), run(["variance", "--help"])
        print(json.dumps({{"code": code, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
    """, tmp_path)
    assert got == {"code": [0, 0], "loaded": []}


@pytest.mark.parametrize("plots", [False, True])
def test_no_plots_never_imports_matplotlib(tmp_path, plots):
    flag = [] if plots else ["--no-plots"]
    got = _child(f"""
        import json, sys
        from sdpa_cli.cli import run
        code = run(["variance", "--dims", "3", "--pairs", "10", "-q", *{flag!r}])
        print(json.dumps({{"code": code, "mpl": "matplotlib" in sys.modules}}))
    """, tmp_path)
    assert got == {"code": 0, "mpl": plots}  # and drawing does load it: the probe works


def _peak_mb(args: list[str], cwd) -> float:
    got = _child(f"""
        import json, resource
        from sdpa_cli.cli import run
        code = run({args!r})
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({{"code": code, "peak": peak}}))
    """, cwd)
    assert got["code"] == 0
    return got["peak"]


def test_memory_stays_flat_in_pairs_and_dimension(tmp_path):
    base = ["variance", "--no-plots", "-q", "--seed", "1"]
    small = _peak_mb([*base, "--dims", "64", "--pairs", "1000", "--out", "a"], tmp_path)
    huge_d = _peak_mb([*base, "--dims", "1000000", "--pairs", "20", "--out", "b"], tmp_path)
    many = _peak_mb([*base, "--dims", "64", "--pairs", "20000000", "--method", "exact",
                     "--out", "c"], tmp_path)
    assert max(small, huge_d, many) < 300
    # 20 million pairs or a million dimensions cost at most the fixed working buffers
    # (a few blocks of 2^18 numbers per thread) over a tiny run, never memory ∝ pairs·d.
    assert huge_d - small < 60 and many - small < 60, (small, huge_d, many)
