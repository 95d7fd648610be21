"""Safe YAML reading that keeps where every value came from and how numbers were printed."""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sdpa_cli.errors import InputError, Problem, control_name, is_control, whole
from sdpa_cli.io.environment import path_problem
from sdpa_cli.io.jsonio import read_upto
from sdpa_cli.spec import shape

MAX_BYTES = 1 << 20  # a spec is a page of YAML, not a data set
MAX_NODES = 100_000  # guards against alias bombs ("billion laughs")
MAX_DEPTH = 32  # nesting of lists and mappings; the composer recurses once per level
FLOAT_MAX = sys.float_info.max
_MAX_DIGITS = 310  # more decimal digits than this can only be beyond float64's range

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


# libyaml (PyYAML's C parser, when PyYAML was built with it) composes the same node tree ~17×
# faster than the pure-Python parser (1 ms against 18 ms a spec: a batch loads every spec, and
# a spec is read again for each run). Only a text it parses whole takes this path: any text
# it refuses is parsed again in Python, whose messages (and marks) every error gives.
_CLoader: Any = None
if getattr(yaml, "__with_libyaml__", False):
    class _CLoader(yaml.CSafeLoader):  # type: ignore[no-redef]
        """The C parser with _Loader's YAML 1.2-style resolvers (constructors unused)."""

    _CLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers


class OutOfRange(ValueError):
    """A number float64 cannot hold; every numeric field of a spec becomes a float somewhere."""


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node)).replace("_", "")
    digits = text.lstrip("+-")
    # Checked before int(): Python refuses to parse over 4300 digits with a message about
    # sys.set_int_max_str_digits(), and a huge int overflows the first float() it meets.
    if digits[:2] not in ("0x", "0o") and len(digits) > _MAX_DIGITS:
        raise OutOfRange(f"a whole number of {len(digits)} digits is beyond float64's range "
                         f"(about ±{FLOAT_MAX:.1e})")
    value = int(text, 0) if digits[:2] in ("0x", "0o") else int(text)
    if abs(value) > FLOAT_MAX:
        raise OutOfRange(f"is beyond float64's range (about ±{FLOAT_MAX:.1e})")
    return value


def given_problem(value: Any) -> str | None:
    """Why a value handed over from Python (the API's keyword arguments, already typed) could
    not have come from a spec file or a flag, in the words those get: a whole number beyond
    float64's range, or text holding a control character or a lone surrogate."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > FLOAT_MAX:
        if value.bit_length() > 14_000:  # past Python's 4300-digit limit for str(int)
            return ("a whole number of more than 4000 digits is beyond float64's range "
                    f"(about ±{FLOAT_MAX:.1e})")
        digits = len(str(abs(value)))
        if digits > _MAX_DIGITS:
            return (f"a whole number of {digits} digits is beyond float64's range "
                    f"(about ±{FLOAT_MAX:.1e})")
        return f"{_short(str(value))} is beyond float64's range (about ±{FLOAT_MAX:.1e})"
    if isinstance(value, str):
        bad = _control(value)
        if bad:
            return f"text holds the control character {bad}; remove it (tabs and newlines " \
                   "are fine)"
        lone = next((ch for ch in value if 0xD800 <= ord(ch) <= 0xDFFF), None)
        if lone is not None:
            return f"text holds a lone surrogate (U+{ord(lone):04X}), which is no character " \
                   "of UTF-8; remove it"
    return None


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    if text.lstrip("+-") == ".inf":
        return float("-inf") if text.startswith("-") else float("inf")
    if text == ".nan":
        return float("nan")
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e400 would silently become ±infinity
        raise OutOfRange(f"is beyond float64's range (about ±{FLOAT_MAX:.1e}); write .inf "
                         "or -.inf if infinity is meant")
    return value


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


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _not_regular(mode: int) -> str | None:
    """Why a file of this mode cannot be a spec, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a spec file"
    kind = next((text for test, text in _KINDS if test(mode)), "not a regular file")
    return f"is {kind}, not a regular file; a spec is a YAML file"


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)


def read_bytes(path: Path, *, limit: int = MAX_BYTES) -> bytes:
    """At most limit + 1 bytes of a regular file: a device (/dev/zero), a FIFO or a file of
    gigabytes is refused without reading it, so the limit bounds the memory a spec can take."""
    name = str(path)
    if _has_control(name):
        raise InputError(Problem("the file name holds a control character; rename the file",
                                 file=ascii(name)))
    why = path_problem(path, sibling=False)
    if why:
        raise InputError(Problem(why, file=name))
    try:
        mode = os.stat(path).st_mode  # follows symlinks: what would be read
    except FileNotFoundError:
        dangling = os.path.islink(path)
        raise InputError(Problem("is a symbolic link to nothing" if dangling
                                 else "no such file", file=name)) from None
    except OSError as e:
        raise InputError(Problem(f"cannot read: {e.strerror or e}", file=name)) from None
    why = _not_regular(mode)
    if why:
        raise InputError(Problem(why, file=name))
    try:
        # O_NONBLOCK: if the path is swapped for a FIFO after the stat, open does not hang.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise InputError(Problem(f"cannot read: {e.strerror or e}", file=name)) from None
    try:
        info = os.fstat(fd)
        why = _not_regular(info.st_mode)
        if why:
            raise InputError(Problem(why, file=name))
        if info.st_size > limit:
            raise InputError(Problem(f"is {info.st_size} bytes; a spec may be at most {limit}",
                                     file=name))
        data = read_upto(fd, limit, 1 << 16)
    except OSError as e:
        raise InputError(Problem(f"cannot read: {e.strerror or e}", file=name)) from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after the stat
        raise InputError(Problem(f"is more than {limit} bytes; a spec may be at most {limit}",
                                 file=name))
    return data


def read_text(path: Path) -> str:
    """The file's text, or an InputError that says why it cannot be a spec."""
    name = str(path)
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(
            Problem(f"not UTF-8 text (byte 0x{raw[e.start]:02x})", file=name, line=line, col=col)
        ) from None


def _fast(text: str) -> yaml.Node | None:
    """The node tree by libyaml, or None: no libyaml, or a text it refuses or nests deeper
    than MAX_DEPTH (libyaml's composer recurses as PyYAML's does), which the Python parser
    then reads again to say where and why."""
    if _CLoader is None or "\t" in text:  # libyaml allows tabs where PyYAML refuses them
        return None
    try:
        if _too_deep(text, _CLoader) is not None:
            return None
        node: yaml.Node | None = yaml.compose(text, Loader=_CLoader)
    except (yaml.YAMLError, ValueError, UnicodeError):
        return None
    return None if node is None or _has_empty(node) else node


def _has_empty(root: yaml.Node) -> bool:
    """Whether a node tree holds an empty plain scalar (`a:` with no value, `{b: }`): libyaml
    marks some of those a character or a line away from where PyYAML does, and errors name
    that place. Each distinct node is visited once (aliases share theirs)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.value == "" and not node.style:
                return True
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        else:
            for key, value in node.value:
                stack += (key, value)
    return False


def _too_deep(text: str, loader: Any) -> yaml.Event | None:
    """The first list or mapping opened more than MAX_DEPTH levels deep, or None. The event
    parser (PyYAML's or libyaml's) is iterative, so this scan is safe at any depth."""
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return event
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def _check_depth(text: str, file: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH before composing: PyYAML's composer (and every
    walk over the data after it) recurses once per level, so `[[[[…` would exhaust the stack."""
    event = _too_deep(text, _Loader)
    if event is not None:
        mark = event.start_mark
        raise InputError(Problem(
            f"nested more than {MAX_DEPTH} levels deep; a spec is a few levels of keys and "
            "lists", file=file, line=mark.line + 1 if mark else None,
            col=mark.column + 1 if mark else None))


def parse(text: str, file: str) -> Document:
    """Parse YAML text into a Document; every error is one located InputError."""
    if text.startswith("\ufeff"):
        text = text[1:]
    shape.check(text, file)  # before PyYAML spends seconds on it
    node = _fast(text)
    try:
        if node is None:
            _check_depth(text, file)
            node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = " ".join((e.problem or e.context or "invalid YAML").split())
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

    def build(self, node: yaml.Node, path: Path_, parent: yaml.Node | None = None,
              via: yaml.Node | None = None) -> Any:
        """Python data of node at path; `via` is the innermost written node holding the first
        alias (*name) on the way here, where a limit broken by the expansion is reported."""
        if via is None and parent is not None and _reached_by_alias(node, parent):
            via = parent
        self.count += 1
        if self.count > MAX_NODES:
            raise self._fail(via or node, f"more than {MAX_NODES} values once aliases (*name) "
                             "are expanded; a spec is a page of values: write them out or use "
                             "fewer aliases", path[:1])
        # The text was nested at most MAX_DEPTH deep (_check_depth), but an alias puts a whole
        # anchored tree at its place, so chained anchors nest deeper once expanded: 20 anchors
        # of 31 levels make 620, and this walk (and every one after it) recurses per level.
        if len(path) > MAX_DEPTH:
            raise self._fail(via or node, f"nested more than {MAX_DEPTH} levels deep once "
                             "aliases (*name) are expanded; a spec is a few levels of keys and "
                             "lists: write the value out instead of nesting aliases", path[:1])
        self.doc.marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if node.tag not in _PLAIN_TAGS:  # !!python/… and other types are refused, not built
            raise self._fail(node, f"unsupported YAML tag {_tag(node.tag)}", path)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self._fail(key_node, "keys must be plain words", path)
                if key_node.tag != self._implicit(key_node):
                    raise self._fail(key_node, f"keys must be plain words, not tagged "
                                     f"({_tag(key_node.tag)})", path)
                try:
                    key = self.loader.construct_object(key_node)
                except (yaml.YAMLError, ValueError):
                    key = str(key_node.value)
                if key == "<<":
                    raise self._fail(key_node, "merge keys (<<) are not supported", path)
                if not isinstance(key, str):
                    key = str(key_node.value)
                if _lone_surrogate(key):
                    raise self._fail(key_node, f"a key holds a lone surrogate "
                                     f"({_lone_surrogate(key)}); keys are plain words", path)
                if _control(key):
                    raise self._fail(key_node, f"a key holds the control character "
                                     f"{_control(key)}", path)
                child = (*path, key)
                if key in out:
                    first = self.doc.key_marks[child][0]
                    raise self._fail(key_node, f"duplicate key {key!r} (first given on line "
                                               f"{first})", child)
                self.doc.key_marks[child] = (key_node.start_mark.line + 1,
                                             key_node.start_mark.column + 1)
                out[key] = self.build(value_node, child, node, via)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), node, via) for i, item in enumerate(node.value)]
        self.doc.texts[path] = node.value
        try:
            value = self.loader.construct_object(node, deep=True)
            if isinstance(value, str):
                value = _paired(value)
                lone = _lone_surrogate(value)
                if lone:
                    raise self._fail(node, f"text holds a lone surrogate ({lone}), which is no "
                                     "character of UTF-8; write the character itself, or "
                                     "\\U0001F600 for one beyond U+FFFF", path)
            if isinstance(value, str) and _control(value):
                # it would reach the terminal and table.md: an escape sequence can recolour,
                # retitle or hide what sdpa prints
                raise self._fail(node, f"text holds the control character {_control(value)}; "
                                 "remove it (tabs and newlines are fine)", path)
            return value
        except OutOfRange as e:
            raise self._fail(node, str(e), path) from None
        except yaml.MarkedYAMLError as e:
            raise self._fail(node, f"cannot read value {_short(node.value)}: "
                             f"{' '.join(str(e.problem).split())}", path) from None
        except (yaml.YAMLError, ValueError) as e:
            raise self._fail(node, f"cannot read value {_short(node.value)}: "
                             f"{whole(str(e))}", path) from None

    def _implicit(self, node: yaml.ScalarNode) -> str:
        """The tag this scalar would have without an explicit one (quoted text is a str)."""
        if node.style:  # None (Python) or "" (libyaml) when plain
            return "tag:yaml.org,2002:str"
        return str(self.loader.resolve(yaml.ScalarNode, node.value, (True, False)))


def _reached_by_alias(node: yaml.Node, parent: yaml.Node) -> bool:
    """Is node an alias's target rather than text written inside parent? The composer hands
    an alias the anchored node itself, which lies outside the parent's text (or is it)."""
    inside = (parent.start_mark.index <= node.start_mark.index
              and node.end_mark.index <= parent.end_mark.index)
    return node is parent or not inside


def _paired(text: str) -> str:
    """A surrogate pair written as two escapes ("\\ud83d\\ude00", as JSON writes an emoji)
    joined into its one character; a lone surrogate stays, for _lone_surrogate to refuse."""
    if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _lone_surrogate(text: str) -> str | None:
    """The first surrogate code point left in text (as U+D800), or None: no file can hold it
    as UTF-8, so writing results.json or table.md would fail halfway."""
    for ch in text:
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return f"U+{ord(ch):04X}"
    return None


def _control(text: str) -> str | None:
    """The first control character in text other than tab and newline, as 0xNN, or None."""
    for ch in text:
        if is_control(ch) and ch not in "\t\n":
            return control_name(ch)
    return None


def _tag(tag: str) -> str:
    """'tag:yaml.org,2002:python/name:os.system' → '!!python/name:os.system' (cut short)."""
    text = tag.replace("tag:yaml.org,2002:", "!!")
    return text if len(text) <= 40 else text[:37] + "..."


def _short(text: object, limit: int = 40) -> str:
    """repr() of a value for a one-line message, cut to `limit` characters."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


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
    'true' → True, '-0.5' → -0.5, anything else stays text. A number beyond float64's range
    raises OutOfRange, as it does in a spec file (kept as text, it would reach pydantic as a
    whole number and overflow the first float() it met)."""
    loader = _Loader("")
    tag = loader.resolve(yaml.ScalarNode, text, (True, False))
    node = yaml.ScalarNode(tag, text)
    try:
        return loader.construct_object(node, deep=True)
    except OutOfRange:
        raise
    except (yaml.YAMLError, ValueError):
        return text
