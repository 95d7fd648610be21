"""The part of JSON Schema that sdpa's own schemas use, checked without a dependency."""

from __future__ import annotations

import math
import re
from typing import Any

# What a reader says it expected, per JSON type name: "expected a whole number".
_WORDS = {"object": "an object", "array": "a list", "string": "a string",
          "integer": "a whole number", "number": "a number", "boolean": "true or false",
          "null": "null"}


def _is(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False  # NaN and ±inf are never written by sdpa (clean() makes them null)
    return kind == "number" or (isinstance(value, int) or value.is_integer())


def _field(path: tuple[str | int, ...]) -> str:
    """rows[2].se, as spec fields are named in messages."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the document)"


class Mismatch(ValueError):
    """Where a document departs from its schema: the field and what was expected there."""

    def __init__(self, path: tuple[str | int, ...], expected: str) -> None:
        self.field = _field(path)
        self.expected = expected
        super().__init__(f"{self.field}: expected {expected}")


def check(doc: Any, schema: dict[str, Any]) -> None:
    """Raise Mismatch at the first place `doc` departs from `schema` (draft 2020-12 subset:
    type, const, enum, required, properties, patternProperties, additionalProperties, items,
    minimum, minLength, pattern, $ref into $defs)."""
    _check(doc, schema, schema, ())


def finite(doc: Any) -> None:
    """Raise Mismatch at the first number that is NaN, ±inf or beyond float64 (Python's json
    reads NaN, Infinity and 1e400; sdpa writes null for them), walking without recursion."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in enumerate(value))
        elif _not_finite(value):
            raise Mismatch(path, "a finite number (sdpa writes null for NaN and ±inf)")


_FLOAT_MAX = 1.7976931348623157e308


def _not_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > _FLOAT_MAX


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any],
           path: tuple[str | int, ...]) -> None:
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref  # the only references sdpa's schemas make
        schema = root["$defs"][ref.rsplit("/", 1)[1]]
    if "const" in schema and (value != schema["const"] or type(value) is bool):
        raise Mismatch(path, repr(schema["const"]).replace("'", '"'))
    if "enum" in schema and value not in schema["enum"]:
        raise Mismatch(path, "one of " + ", ".join(f'"{v}"' if isinstance(v, str) else str(v)
                                                   for v in schema["enum"]))
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            raise Mismatch(path, " or ".join(_WORDS[k] for k in kinds))
    if isinstance(value, dict):
        _object(value, schema, root, path)
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], root, (*path, i))
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise Mismatch(path, "a non-empty string")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise Mismatch(path, f"a string matching {schema['pattern']}")
    elif _is(value, "number") and "minimum" in schema and value < schema["minimum"]:
        raise Mismatch(path, f"a number ≥ {schema['minimum']}")


def _object(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any],
            path: tuple[str | int, ...]) -> None:
    for key in schema.get("required", ()):
        if key not in value:
            raise Mismatch((*path, key), "a value (it is missing)")
    props = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        matched = False
        if key in props:
            _check(item, props[key], root, (*path, key))
            matched = True
        for pattern, sub in patterns.items():
            if re.search(pattern, key):
                _check(item, sub, root, (*path, key))
                matched = True
        if matched:
            continue
        if extra is False:
            raise Mismatch((*path, key), "no such field")
        if isinstance(extra, dict):
            _check(item, extra, root, (*path, key))
