"""Safe YAML reading that keeps where every value came from and how numbers were printed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sdpa_cli.errors import InputError, Problem

MAX_BYTES = 1 << 20  # a spec is a page of YAML, not a data set
MAX_NODES = 100_000  # guards against alias bombs ("billion laughs")

Path_ = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2-style scalars: `1e-6` is a number, `on`/`no` are strings."""


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0x[0-9a-fA-F]+|0o[0-7]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?
            |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node)).replace("_", "")
    return int(text, 0) if text[:2] in ("0x", "0o") else int(text)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    if text.lstrip("+-") == ".inf":
        return float("-inf") if text.startswith("-") else float("inf")
    if text == ".nan":
        return float("nan")
    return float(text)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


@dataclass
class Document:
    """A parsed spec: plain data plus, for every path, its position and its source text."""

    data: Any
    file: str
    marks: dict[Path_, tuple[int, int]] = field(default_factory=dict)  # value positions
    key_marks: dict[Path_, tuple[int, int]] = field(default_factory=dict)  # key positions
    texts: dict[Path_, str] = field(default_factory=dict)  # raw text of scalars

    def where(self, path: Path_, *, key: bool = False) -> tuple[int | None, int | None]:
        """(line, col) of the path, or of its nearest ancestor that has one."""
        table = self.key_marks if key else self.marks
        p = tuple(path)
        while p:
            if p in table:
                return table[p]
            if not key and p in self.key_marks:
                return self.key_marks[p]
            p = p[:-1]
        return self.marks.get((), (None, None))


def read_text(path: Path) -> str:
    """The file's text, or an InputError that says why it cannot be a spec."""
    name = str(path)
    if not path.exists():
        raise InputError(Problem("no such file", file=name))
    if path.is_dir():
        raise InputError(Problem("is a folder, not a spec file", file=name))
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(Problem(f"cannot read: {e.strerror or e}", file=name)) from None
    if len(raw) > MAX_BYTES:
        raise InputError(Problem(f"is {len(raw)} bytes; a spec may be at most {MAX_BYTES}",
                                 file=name))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(
            Problem(f"not UTF-8 text (byte 0x{raw[e.start]:02x})", file=name, line=line, col=col)
        ) from None


def parse(text: str, file: str) -> Document:
    """Parse YAML text into a Document; every error is one located InputError."""
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = (e.problem or e.context or "invalid YAML").strip()
        if "\t" in problem or "'\\t'" in problem:
            problem = "a tab character; YAML indents with spaces only"
        elif e.context and e.context_mark and e.problem and e.context_mark is not mark:
            cm = e.context_mark
            problem += f" ({e.context.strip()} from line {cm.line + 1}, column {cm.column + 1})"
        raise InputError(
            Problem(
                f"YAML syntax: {problem}",
                file=file,
                line=mark.line + 1 if mark else None,
                col=mark.column + 1 if mark else None,
            )
        ) from None
    except yaml.reader.ReaderError as e:  # a character YAML does not allow, e.g. \x00
        before = text[: e.position]
        line = before.count("\n") + 1
        col = e.position - (before.rfind("\n") + 1) + 1
        code = e.character if isinstance(e.character, int) else ord(str(e.character)[:1] or "?")
        raise InputError(Problem(f"YAML does not allow the control character 0x{code:02x}",
                                 file=file, line=line, col=col)) from None
    except yaml.YAMLError as e:
        raise InputError(Problem("YAML: " + " ".join(str(e).split()), file=file)) from None
    if node is None:
        raise InputError(Problem("the spec is empty; it needs at least a `study:` line",
                                 file=file))
    doc = Document(data=None, file=file)
    builder = _Builder(doc)
    doc.data = builder.build(node, ())
    if not isinstance(doc.data, dict):
        raise InputError(
            Problem("a spec must be a mapping of keys to values (key: value lines)", file=file,
                    line=node.start_mark.line + 1, col=node.start_mark.column + 1)
        )
    return doc


_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in
                       ("str", "int", "float", "bool", "null", "map", "seq"))


class _Builder:
    """Turns the composed node tree into Python data, recording marks and raw scalar text."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.loader = _Loader("")
        self.count = 0

    def _fail(self, node: yaml.Node, message: str, path: Path_) -> InputError:
        return InputError(
            Problem(message, file=self.doc.file, line=node.start_mark.line + 1,
                    col=node.start_mark.column + 1, field=_field_name(path) or None)
        )

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self._fail(node, f"more than {MAX_NODES} values (alias expansion?)", path)
        self.doc.marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if node.tag not in _PLAIN_TAGS:  # !!python/… and other types are refused, not built
            raise self._fail(node, f"unsupported YAML tag {node.tag}", path)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self._fail(key_node, "keys must be plain words", path)
                key = self.loader.construct_object(key_node)
                if key == "<<":
                    raise self._fail(key_node, "merge keys (<<) are not supported", path)
                if not isinstance(key, str):
                    key = str(key_node.value)
                child = (*path, key)
                if key in out:
                    first = self.doc.key_marks[child][0]
                    raise self._fail(key_node, f"duplicate key {key!r} (first given on line "
                                               f"{first})", child)
                self.doc.key_marks[child] = (key_node.start_mark.line + 1,
                                             key_node.start_mark.column + 1)
                out[key] = self.build(value_node, child)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        self.doc.texts[path] = node.value
        try:
            return self.loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError) as e:
            raise self._fail(node, f"cannot read value {node.value!r}: {e}", path) from None


def _field_name(path: Path_) -> str:
    """('dims', 2) → 'dims[2]'; ('documented', 0, 'value') → 'documented[0].value'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


field_name = _field_name


def scalar(text: str) -> Any:
    """Type a command-line value the way YAML types a plain scalar: '1e3' → 1000.0,
    'true' → True, '-0.5' → -0.5, anything else stays text."""
    loader = _Loader("")
    tag = loader.resolve(yaml.ScalarNode, text, (True, False))
    node = yaml.ScalarNode(tag, text)
    try:
        return loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError):
        return text
