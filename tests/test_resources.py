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
        from sdpa_cli.cli.entry import run
        code = run(["--help"])
        print(json.dumps({{"code": code, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
    """, tmp_path)
    assert got == {"code": 0, "loaded": []}


def test_a_study_commands_help_loads_its_spec_model_but_never_matplotlib(tmp_path):
    # A study's flags are derived from its spec model's fields, so its --help needs pydantic
    # (and the numerics its spec validates with), never the figures.
    got = _child(f"""
        import json, sys
        from sdpa_cli.cli.entry import run
        code = run(["variance", "--help"])
        print(json.dumps({{"code": code, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
    """, tmp_path)
    assert got == {"code": 0, "loaded": ["numpy", "pydantic"]}


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
@pytest.mark.parametrize("plots", [False, True])
def test_no_plots_never_imports_matplotlib(tmp_path, plots):
    flag = [] if plots else ["--no-plots"]
    got = _child(f"""
        import json, sys
        from sdpa_cli.cli.entry import run
        code = run(["variance", "--dims", "3", "--pairs", "10", "-q", *{flag!r}])
        print(json.dumps({{"code": code, "mpl": "matplotlib" in sys.modules}}))
    """, tmp_path)
    assert got == {"code": 0, "mpl": plots}  # and drawing does load it: the probe works


def _peak_mb(args: list[str], cwd) -> float:
    # VmHWM is the high-water mark of this process's own memory. (ru_maxrss would not do:
    # Linux carries it over fork and exec, so a child of a large pytest reports pytest's.)
    got = _child(f"""
        import json
        from sdpa_cli.cli.entry import run
        code = run({args!r})
        status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
        print(json.dumps({{"code": code, "peak": int(status) / 1024}}))
    """, cwd)
    assert got["code"] == 0
    return got["peak"]


@pytest.mark.slow
def test_memory_stays_flat_in_pairs_and_dimension(tmp_path):
    base = ["variance", "--no-plots", "-q", "--seed", "1"]
    runs = {
        "pairs 2e6": [*base, "--dims", "64", "--pairs", "2000000", "--method", "exact"],
        "pairs 2e7": [*base, "--dims", "64", "--pairs", "20000000", "--method", "exact"],
        "d 1e5": [*base, "--dims", "100000", "--pairs", "20"],
        "d 1e6": [*base, "--dims", "1000000", "--pairs", "20"],
    }
    peak = {k: _peak_mb([*v, "--out", str(i)], tmp_path) for i, (k, v) in enumerate(runs.items())}
    assert max(peak.values()) < 300, peak
    # Ten times the pairs, or ten times the dimension, costs no more memory: everything is
    # accumulated per block (fixed working buffers of a few blocks per thread).
    assert abs(peak["pairs 2e7"] - peak["pairs 2e6"]) < 40, peak
    assert abs(peak["d 1e6"] - peak["d 1e5"]) < 40, peak
