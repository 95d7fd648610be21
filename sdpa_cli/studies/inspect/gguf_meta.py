"""A GGUF file's metadata read by type: every key sdpa uses is checked where it is read."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.errors import InputError, Problem

_MISSING: Any = object()


def describe(value: Any) -> str:
    """A metadata value as a message shows it: 'text', 7, nan, true, an array of 3 strings."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:60]) + "…"
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, list):
        return f"an array of {len(value)} strings"
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return f"an array of {value.size} booleans"
        return f"an array of {value.size} numbers ({value.dtype.name})"
    return repr(value)


class Metadata:
    """Typed reads of a GGUF header's metadata: the value of the type asked for, else one
    line naming the file and the key (InputError). An absent key gives the default, or the
    line 'GGUF metadata has no KEY' when there is none."""

    def __init__(self, meta: Mapping[str, Any], path: Path) -> None:
        self.meta, self.path = meta, path

    def __contains__(self, key: str) -> bool:
        return key in self.meta

    def refuse(self, key: str, message: str) -> InputError:
        return InputError(Problem(message, file=str(self.path), field=key))

    def _value(self, key: str, default: Any) -> Any:
        if key in self.meta:
            return self.meta[key]
        if default is _MISSING:
            raise self.refuse(key, f"GGUF metadata has no {key}")
        return default

    def _wrong(self, key: str, value: Any, want: str) -> InputError:
        return self.refuse(key, f"GGUF metadata {key} is {describe(value)}, expected {want}")

    def string(self, key: str, default: Any = _MISSING) -> Any:
        value = self._value(key, default)
        if key in self.meta and not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        return value

    def integer(self, key: str, default: Any = _MISSING) -> Any:
        value = self._value(key, default)
        if key in self.meta and (isinstance(value, bool) or not isinstance(value, int)):
            raise self._wrong(key, value, "an integer")
        return value

    def number(self, key: str, default: Any = _MISSING) -> Any:
        """A finite int or float (NaN and ±inf refused: every such value sdpa reads is a size,
        a rate or a constant of the model)."""
        value = self._value(key, default)
        if key not in self.meta:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(key, value, "a number")
        if not math.isfinite(value):
            raise self._wrong(key, value, "a finite number")
        return value

    def flag(self, key: str, default: Any = _MISSING) -> Any:
        """true or false (a GGUF bool; an integer 0 or 1 is taken as one)."""
        value = self._value(key, default)
        if key not in self.meta or isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise self._wrong(key, value, "true or false")

    def token_id(self, key: str, count: int, default: Any = _MISSING) -> Any:
        """An integer id of one of `count` tokens."""
        value = self.integer(key, default)
        if key in self.meta and not 0 <= value < count:
            raise self.refuse(key, f"{key} is {value}, not a token id (0 to {count - 1})")
        return value

    def strings(self, key: str, default: Any = _MISSING) -> Any:
        value = self._value(key, default)
        if key in self.meta and not isinstance(value, list):
            raise self._wrong(key, value, "an array of strings")
        return value

    def numbers(self, key: str, count: int, what: str, integers: bool = False
                ) -> NDArray[Any]:
        """An array of `count` numbers (integers only with `integers`); `what` names its items
        in the message about its length ("scores", "types")."""
        value = self._value(key, _MISSING)
        want = "an array of integers" if integers else "an array of numbers"
        if not isinstance(value, np.ndarray) or value.dtype == bool or \
                (integers and value.dtype.kind not in "iu"):
            raise self._wrong(key, value, want)
        if value.shape != (count,):
            raise self.refuse(key, f"{key} gives {value.size} {what} for {count} tokens")
        return value
