"""How a spec field's type reads on the command line: a bool, one value, or a list of values."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

FlagShape = Literal["bool", "value", "list"]


def flag_shape(annotation: Any) -> FlagShape | None:
    """How a field of this type reads on the command line: a bool, one value, a list of
    values; None for types no flag can carry (mappings, records)."""
    args = [a for a in _union(annotation) if a is not type(None)]
    if not args:
        return None
    shapes = {_shape_of(a) for a in args} - {None}
    if "list" in shapes:  # a list, or a list-or-mapping (train's learning_rates)
        return "list"
    if len(shapes) == 1:
        return shapes.pop()
    return None


def _union(annotation: Any) -> list[Any]:
    annotation = _strip(annotation)
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return [_strip(a) for a in get_args(annotation)]
    return [annotation]


def _strip(annotation: Any) -> Any:
    while get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _shape_of(t: Any) -> FlagShape | None:
    if t is bool:
        return "bool"
    if get_origin(t) is list:
        inner = [a for a in _union(get_args(t)[0]) if a is not type(None)]
        return "list" if all(_scalar(a) for a in inner) else None
    if get_origin(t) is dict or (isinstance(t, type) and issubclass(t, BaseModel)):
        return None
    return "value" if _scalar(t) else None


def _scalar(t: Any) -> bool:
    return t in (int, float, str) or get_origin(t) is Literal or (
        isinstance(t, type) and not issubclass(t, BaseModel) and t.__module__.startswith(
            "sdpa_cli.numerics"))  # a parsed value type such as Scaling
