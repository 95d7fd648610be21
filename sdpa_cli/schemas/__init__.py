"""JSON Schemas of the documents sdpa prints: result, batch, examples, compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sdpa_cli.jsonio import load_json

NAMES = ("result", "batch", "examples", "compare")
FOLDER = Path(__file__).parent


def load(name: str) -> dict[str, Any]:
    """The schema called `name` (one of NAMES) as a dict."""
    doc: dict[str, Any] = load_json(FOLDER / f"{name}.json", what=f"the {name} schema")
    return doc
