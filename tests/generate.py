"""What the studies' packages and the registry decide, written where the project keeps it: each
study's results.schema.json (derived from its row types) and the pages' regions that list the
studies or the shipped specs (tests/test_docs.py's FROM_REGISTRY: the README's table of studies,
commands.md's rows, timing.md's batch estimate). No study runs; it takes seconds.

Run: python tests/generate.py     after adding a study or a shipped spec, or changing a row type
                                   (sdpa help adding-a-study); it names each file it rewrote.
Not a test (pytest does not collect it). The quick tier fails, naming this command, when any
of these is stale.
"""

from __future__ import annotations

from pathlib import Path

import test_docs  # the pages' regions and how to write them (tests/ is this script's folder)

from sdpa_cli import registry
from sdpa_cli.framework import schema


def main() -> None:
    changed: list[Path] = []
    for name in registry.NAMES:
        study = registry.get(name)
        path, text = schema.shipped(study), schema.text(study)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    for page, codes in test_docs.FROM_REGISTRY.items():
        if test_docs.write(test_docs.BY_NAME[page], only=codes):
            changed.append(test_docs.BY_NAME[page])
    for path in changed:
        print(f"wrote {path.relative_to(test_docs.ROOT)}")
    if not changed:
        print("nothing to write: every schema and generated region is current")


if __name__ == "__main__":
    main()
