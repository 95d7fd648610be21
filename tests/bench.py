"""Benchmark of the engine against NumPy's own fill rate; run: python tests/bench.py [--quick].

Prints ratios measured in one run on this machine (the two sides of each timed in turns,
best of 3) and its load average; not a test (pytest does not collect it). --quick: a
quarter of the sizes (about 30 s on an idle 2-core machine). SDPA_BENCH_TINY=1: a 64th
(the docs test, which compares only the output's shape, sets it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time

# As sdpa's main() does: one BLAS thread per process (set before NumPy loads).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from sdpa_cli.numerics.rng import BIT_GENERATOR, block_generator  # noqa: E402
from sdpa_cli.numerics.sampling import CHUNK, PairLaw  # noqa: E402
from sdpa_cli.studies.variance.engine import simulate_dots  # noqa: E402


def best_of(fn, repeat: int) -> float:
    return interleaved_best([fn], repeat)[0]


def interleaved_best(fns, repeat: int) -> list[float]:
    """The best (minimum) time of each function over `repeat` rounds in which the functions
    take turns: each ratio of two of them is measured under the same load."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t)
    return best


def floor(total: int) -> float:
    """NumPy alone: fill `total` standard normals into one preallocated buffer, same bit
    generator, same buffer size as the engine."""
    rng = block_generator(1, (0,))
    buf = np.empty(CHUNK)
    full, rest = divmod(total, CHUNK)
    for _ in range(full):
        rng.standard_normal(out=buf)
    if rest:
        rng.standard_normal(out=buf[:rest])
    return 0.0


def engine(d: int, pairs: int, workers: int = 1, method: str = "direct"):
    return simulate_dots(PairLaw("normal"), d, pairs, entropy=1, key=(0,), method=method,
                         workers=workers, dot_range=(-16 * d**0.5, 16 * d**0.5))


def peak_rss_mb(args: list[str]) -> tuple[float, float]:
    """Peak resident memory (MB) and wall time of `sdpa ARGS` in a fresh process."""
    # VmHWM: the high-water mark of the process's own memory (ru_maxrss survives fork and
    # exec on Linux, so it can report the parent's size instead).
    code = textwrap.dedent(f"""
        import time
        t = time.perf_counter()
        from sdpa_cli.cli.entry import run
        assert run({args!r}) == 0
        dt = time.perf_counter() - t
        hwm = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
        print(int(hwm) / 1024, dt)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=os.environ.get("TMPDIR", "/tmp")).stdout.split()
    return float(out[0]), float(out[1])


def startup(cmd: list[str], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def per_pair_loop(dims: list[int], pairs: int) -> float:
    """The documents' approach: one Python iteration per pair (np.random.randn + np.dot)."""
    t = time.perf_counter()
    for d in dims:
        products = []
        for _ in range(pairs):
            products.append(np.dot(np.random.randn(d), np.random.randn(d)))
        np.var(products)
    return time.perf_counter() - t


def filler(bit_generator: type[np.random.BitGenerator], total: int):
    """NumPy alone filling `total` standard normals with this bit generator."""
    rng = np.random.Generator(bit_generator(1))
    buf = np.empty(CHUNK)

    def fill() -> None:
        for _ in range(total // CHUNK):
            rng.standard_normal(out=buf)

    return fill


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (about 30 s)")
    opts = ap.parse_args()
    scale = 64 if os.environ.get("SDPA_BENCH_TINY") else 4 if opts.quick else 1
    print(f"sdpa engine benchmark, {time.strftime('%Y-%m-%d')}: {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, NumPy {np.__version__},\n"
          f"{BIT_GENERATOR}, blocks of {CHUNK} numbers; load average {load()} "
          "(1, 5, 15 min)")
    print()
    total = 64 * CHUNK // scale
    sfc, pcg = (total / s / 1e6 for s in interleaved_best(
        [filler(np.random.SFC64, total), filler(np.random.PCG64, total)], 3))
    print(f"NumPy alone, normals per µs: SFC64 {sfc:.0f}, PCG64 {pcg:.0f} "
          f"(SFC64 ×{sfc / pcg:.2f})")
    print()
    print(f"{'configuration':44} {'engine s':>9} {'floor s':>9} {'ratio':>7}")
    results = {}
    for d, pairs in ((1024, 60_000 // scale), (8192, 8_000 // scale)):
        total = 2 * d * pairs
        fl, one, two = interleaved_best([lambda t=total: floor(t),
                                         lambda d=d, p=pairs: engine(d, p, 1),
                                         lambda d=d, p=pairs: engine(d, p, 2)], 3)
        same = engine(d, pairs, 1).dot.moments == engine(d, pairs, 2).dot.moments
        results[d] = (one, two, same)
        print(f"{f'direct d={d} pairs={pairs}, 1 worker':44} {one:9.3f} {fl:9.3f} "
              f"{one / fl:7.3f}")
    print()
    print(f"{'two workers':44} {'1 worker':>9} {'2 workers':>9} {'speedup':>7} same")
    for d, (one, two, same) in results.items():
        print(f"{f'direct d={d}':44} {one:9.3f} {two:9.3f} {one / two:7.2f} {same}")
    print()
    normals = 2 * 2 * CHUNK * 4 // scale  # the same number of normals at both sizes
    per = dict(zip((1, 16), (s / normals * 1e9 for s in interleaved_best(
        [lambda d=d: engine(d, normals // (2 * d), 1) for d in (1, 16)], 3)), strict=True))
    print(f"small inputs, ns per normal drawn and summarised: d=1 {per[1]:.1f}, "
          f"d=16 {per[16]:.1f}")
    print()
    pairs = 2_000_000 // scale
    small, large = interleaved_best([lambda: engine(16, pairs, 1, "exact"),
                                     lambda: engine(1_000_000, pairs, 1, "exact")], 3)
    print(f"exact method, {pairs} pairs: d=16 {small:.3f} s, d=1e6 {large:.3f} s "
          f"(ratio {large / small:.2f})")
    print()
    print(f"{'peak memory, fresh process, whole CLI run':44} {'MB':>9} {'wall s':>9}")
    for args in (["variance", "--dims", "1000000", "--pairs", str(200 // scale),
                  "--no-plots", "-q", "--out", "bench-d1e6"],
                 ["variance", "--dims", "1024", "--pairs", str(100_000_000 // scale),
                  "--method", "exact", "--no-plots", "-q", "--out", "bench-exact"],
                 ["variance", "--dims", "3", "100", "1000", "-q", "--out", "bench-day74"]):
        mb, wall = peak_rss_mb(args)
        print(f"{' '.join(a for a in args[1:-3] if a != '--no-plots'):44} {mb:9.1f} "
              f"{wall:9.2f}")
    print("(the first two with --no-plots)")
    print()
    sdpa = [sys.executable, "-m", "sdpa_cli", "--help"]
    numpy_import = [sys.executable, "-c", "import numpy"]
    repeat = 7 if scale == 1 else 4  # the median of `repeat` starts each
    t_help, t_np = startup(sdpa, repeat), startup(numpy_import, repeat)
    print(f"start-up: `sdpa --help` {t_help * 1000:.0f} ms, `python -c 'import numpy'` "
          f"{t_np * 1000:.0f} ms\n(ratio {t_help / t_np:.2f})")
    print()
    print(f"{'against the per-pair Python loop':44} {'loop s':>9} {'sdpa s':>9} "
          f"{'speed-up':>9}")
    for name, dims, pairs in (("d = 3, 100, 1000", [3, 100, 1000], 1000),
                              ("d = 16…1024", [16, 64, 256, 512, 1024], 10_000 // scale)):
        name = f"{name} x {pairs} pairs"
        loop = per_pair_loop(dims, pairs)
        for method in ("direct", "exact"):
            ours = best_of(lambda dims=dims, p=pairs, m=method:
                           [engine(d, p, 2, m) for d in dims], 3)
            label = f"{name}, {method}"
            print(f"{label:44} {loop:9.3f} {ours:9.4f} {loop / ours:8.0f}x")
    print()
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
