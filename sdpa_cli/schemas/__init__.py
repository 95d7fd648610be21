"""JSON Schemas of the documents sdpa prints: result, batch, examples, compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NAMES = ("result", "batch", "examples", "compare")
FOLDER = Path(__file__).parent


def load(name: str) -> dict[str, Any]:
    """The schema called `name` (one of NAMES) as a dict."""
    doc: dict[str, Any] = json.loads((FOLDER / f"{name}.json").read_text(encoding="utf-8"))
    return doc
