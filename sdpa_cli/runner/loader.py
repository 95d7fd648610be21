"""Load a spec: YAML text → the study's typed model, every problem as one line (exit 2)."""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from sdpa_cli import registry
from sdpa_cli.errors import InputError, Problem, SpecFieldError
from sdpa_cli.framework.declaration import Study
from sdpa_cli.io import names
from sdpa_cli.numerics.rng import fresh_entropy
from sdpa_cli.runner import siblings
from sdpa_cli.spec import limits
from sdpa_cli.spec.common import SpecBase
from sdpa_cli.spec.yamlio import (
    MAX_DEPTH,
    MAX_NODES,
    Document,
    field_name,
    given_problem,
    parse,
    read_text,
)


def model_for(study: str) -> type[SpecBase]:
    """The spec model the registry names for `study` (a name from registry.NAMES)."""
    return registry.get(study).spec


@dataclass
class Origin:
    """Where a spec's values came from, to point error messages at the right place."""

    file: str | None = None
    doc: Document | None = None
    flags: dict[str, str] = field(default_factory=dict)  # field → flag that set it


def read_document(path: Path) -> Document:
    """Parse a spec file (no validation yet)."""
    return parse(read_text(path), str(path))


def load(
    path: Path | None,
    *,
    study: str | None = None,
    overrides: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
    default_name: str | None = None,
    with_siblings: bool = True,
) -> SpecBase:
    """The resolved spec: built-in defaults < the YAML file < the flags.

    `study` is the command's study (None for `sdpa run`, which reads it from the file).
    Every problem raises InputError with one located line per problem. The spec carries its
    siblings (sdpa_cli.runner.siblings: shipped specs printing the same document's numbers into the
    same rows), unless `with_siblings` is False (a sibling read for another spec).
    """
    origin = Origin(file=str(path) if path else None, flags=dict(flags or {}))
    data: dict[str, Any] = {}
    if path is not None:
        origin.doc = read_document(path)
        data = _with_printed_text(origin.doc)
    given = data.get("study")
    if study is None:
        if given is None:
            raise InputError(_problem(origin, ("study",), "missing; say which study this is: "
                                      + ", ".join(registry.NAMES)))
        study = given
    elif given is not None and given != study:
        raise InputError(_problem(origin, ("study",),
                                  f"this spec is for {given!r}; run it with `sdpa {given}` or "
                                  "`sdpa run`"))
    if not isinstance(study, str) or study not in registry.NAMES:
        raise InputError(_problem(origin, ("study",),
                                  f"unknown study {study!r}{_did_you_mean(study, registry.NAMES)}; "
                                  "one of " + ", ".join(registry.NAMES)))
    data["study"] = study
    cls = model_for(study)
    if path is not None:  # file names inside a spec are relative to the spec's folder
        data = cls.resolve_paths(data, path.parent)
    for key, value in (overrides or {}).items():  # the API's values are Python's own
        _check_given(value, (key,), origin)
    data.update(overrides or {})
    if data.get("name") is None:  # absent, or `name:` / `name: null`: from the file name
        data["name"] = names.derive(path.stem if path is not None else (default_name or study))
        why = names.check_derived(data["name"], path.name) if path is not None else None
        if why:
            raise InputError(Problem(why, file=str(path), field="name"))
    if data.get("seed") is None and cls.needs_seed(data):
        data["seed"] = fresh_entropy()
    try:
        resolved = cls.model_validate(data)
        # the one place every resolved spec passes: work, memory and output guards
        limits.check(resolved, registry.get(study).cost)
    except ValidationError as e:
        raise InputError(_translate(e, cls, origin)) from None
    except SpecFieldError as e:
        message = e.message
        if path is None and not e.loc:  # a run from flags, and nothing names a flag or field
            message = f"sdpa {study}: {_as_flags(message, registry.get(study))}"
        raise InputError(_problem(origin, e.loc, message)) from None
    if with_siblings:
        resolved._siblings = siblings.find(resolved, _sibling)
    return resolved


def _sibling(path: Path) -> SpecBase:
    return load(path, study=None, with_siblings=False)


def _check_given(value: Any, loc: tuple[str | int, ...], origin: Origin) -> None:
    """Refuse, as a spec file or flag would be refused, a value no YAML or flag could give:
    a whole number beyond float64's range, text with a control character (lists and
    mappings walked, without recursion: a value nested 10⁵ deep must not overflow)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, loc)]
    seen = 0
    while stack:
        item, where = stack.pop()
        seen += 1
        if seen > MAX_NODES or len(where) - len(loc) > MAX_DEPTH:
            raise InputError(_problem(origin, loc, f"holds more than {MAX_NODES} values or "
                                      f"nests more than {MAX_DEPTH} levels deep, as no spec "
                                      "may; give the values a spec file would hold"))
        if isinstance(item, list | tuple):
            stack.extend((v, (*where, i)) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            stack.extend((v, (*where, str(k))) for k, v in reversed(list(item.items())))
        else:
            why = given_problem(item)
            if why:
                raise InputError(_problem(origin, where, why))


def _as_flags(message: str, study: Study) -> str:
    """A spec's message for a run from flags alone: the fields it names in parentheses
    become the command's flags (one per field, `score_stds` → `--score-stds`), since the
    reader has no spec file to put them in."""
    fields = set(study.spec.model_fields)

    def flags(m: re.Match[str]) -> str:
        return re.sub(r"\b[a-z][a-z_]*\b", lambda w: study.flag_name(w[0])
                      if w[0] in fields else w[0], m[0])

    return re.sub(r"\([^()]*\)", flags, message)


def _with_printed_text(doc: Document) -> dict[str, Any]:
    """A copy of the data in which documented values keep their printed text ("0.9970")."""
    data = dict(doc.data)
    entries = data.get("documented")
    if not isinstance(entries, list):
        return data
    fixed = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and "value" in entry:
            entry = dict(entry)
            entry["value"] = _texts(entry["value"], ("documented", i, "value"), doc)
        fixed.append(entry)
    data["documented"] = fixed
    return data


def _texts(value: Any, path: tuple[str | int, ...], doc: Document) -> Any:
    if isinstance(value, list):
        return [_texts(v, (*path, i), doc) for i, v in enumerate(value)]
    if isinstance(value, int | float) and not isinstance(value, bool) and path in doc.texts:
        return doc.texts[path]
    return value


def _problem(origin: Origin, loc: tuple[str | int, ...], message: str, *,
             key: bool = False) -> Problem:
    top = loc[0] if loc else None
    name = field_name(loc) or None
    if isinstance(top, str) and top in origin.flags:
        return Problem(message, flag=origin.flags[top], field=name)
    if origin.doc is not None:
        line, col = origin.doc.where(loc, key=key)
        return Problem(message, file=origin.file, line=line, col=col, field=name)
    return Problem(message, file=origin.file, field=name)


def _did_you_mean(word: Any, choices: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _translate(e: ValidationError, cls: type[BaseModel], origin: Origin) -> list[Problem]:
    errors = e.errors(include_url=False)
    # A misspelt key is one mistake, not two: when the did-you-mean of an unknown key names
    # a missing field of the same mapping, report only the unknown key.
    suggested = set()
    for err in errors:
        if err["type"] == "extra_forbidden":
            loc = _plain_loc(err["loc"])
            close = difflib.get_close_matches(str(loc[-1]), _fields_at(cls, loc[:-1]), n=1,
                                              cutoff=0.6)
            if close:
                suggested.add((*loc[:-1], close[0]))
    # A value that fits neither member of a union (a list or a mapping of lists) fails
    # both: "must be a mapping" from the member whose shape it lacks is noise beside the
    # real fault found inside the member whose shape it has.
    deeper = [_plain_loc(err["loc"]) for err in errors if _plain_loc(err["loc"]) != err["loc"]]
    problems = []
    for err in errors:
        if err["type"] == "missing" and _plain_loc(err["loc"]) in suggested:
            continue
        plain = _plain_loc(err["loc"])
        if plain != tuple(err["loc"]) and err["type"] in _SHAPES and any(
                len(d) > len(plain) and d[:len(plain)] == plain for d in deeper):
            continue
        loc = _plain_loc(err["loc"])
        kind = err["type"]
        ctx = err.get("ctx") or {}
        value = err.get("input")
        if kind == "extra_forbidden":
            fields = _fields_at(cls, loc[:-1])
            msg = f"unknown key{_did_you_mean(loc[-1], fields)}"
            problems.append(_problem(origin, loc, msg, key=True))
            continue
        problems.append(_problem(origin, loc, _message(kind, err["msg"], ctx, value)))
    return sorted(problems, key=lambda p: (p.line or 0, p.col or 0))


_SHAPES = frozenset({"list_type", "dict_type", "model_type", "model_attributes_type"})


def _plain_loc(loc: typing.Iterable[str | int]) -> tuple[str | int, ...]:
    """The spec's own path in a pydantic location: the member tags of a union
    ("list[function-before[check(), float]]") are pydantic's, never a key of the spec."""
    return tuple(p for p in loc if not (isinstance(p, str) and "[" in p))


def _message(kind: str, msg: str, ctx: dict[str, Any], value: Any) -> str:
    """Pydantic's message, reworded for people writing YAML."""
    got = f", got {_show(value)}"
    if kind == "missing":
        return "is required"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤",
                "less_than": "<"}[kind]
        bound = next(iter(ctx.values()))
        return f"must be {sign} {bound:g}{got}" if isinstance(bound, float) else \
            f"must be {sign} {bound}{got}"
    if kind == "int_parsing_size":  # beyond Python's digit limit or a 64-bit field
        return f"is too large a whole number{got}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be a whole number{got}"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number{got}"
    if kind == "finite_number":
        return f"must be a finite number{got}"
    if kind == "literal_error":
        expected = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return (f"must be one of {', '.join(expected)}{got}"
                f"{_did_you_mean(value, expected) if isinstance(value, str) else ''}")
    if kind == "too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else msg.lower()
    if kind == "list_type":
        return f"must be a list (write [a, b, c]){got}"
    if kind in ("string_type", "string_pattern_mismatch"):
        if kind == "string_pattern_mismatch" and "A-Za-z0-9" in str(ctx.get("pattern")):
            return ("must be a plain folder name (letters, digits, '.', '_', '-'; not '..' or a "
                    f"path){got}")
        return f"must be text{got}" if kind == "string_type" else f"{msg}{got}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false{got}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping (key: value lines){got}"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    return f"{msg[:1].lower()}{msg[1:]}{got}"


def _fields_at(cls: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """Field names of the model found at `loc` inside cls (for did-you-mean)."""
    current: Any = cls
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        info = current.model_fields.get(str(part))
        if info is None:
            return []
        current = _model_in(info.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    """The BaseModel class inside list[...] / X | None / Annotated[...], if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
