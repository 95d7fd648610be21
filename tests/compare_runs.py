"""Compare two batch folders byte for byte (manifests aside); run: python tests/compare_runs.py A B.

Exit 0 when results.json, table.csv, table.md, spec.yaml, every PNG/SVG, index.md and
report.html are identical; exit 1 listing what differs. Used by .ci/run for the determinism
guarantee across runs and worker counts.
"""

from __future__ import annotations

import sys
from pathlib import Path


def files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")
            if p.is_file() and p.name not in ("manifest.json", "sdpa-batch.json")}


def main(a: str, b: str) -> int:
    ra, rb = Path(a), Path(b)
    fa, fb = files(ra), files(rb)
    problems = [f"only in {a}: {p}" for p in sorted(fa - fb)]
    problems += [f"only in {b}: {p}" for p in sorted(fb - fa)]
    problems += [f"differs: {p}" for p in sorted(fa & fb)
                 if (ra / p).read_bytes() != (rb / p).read_bytes()]
    for line in problems:
        print(line)
    print(f"{len(fa & fb)} files compared, {len(problems)} problems")
    return 1 if problems or not fa else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
