"""A study's one declaration, and the checks it must pass when it is registered."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import math
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sdpa_cli.errors import EXIT_BAD_INPUT, SdpaError, SpecFieldError
from sdpa_cli.framework import sources
from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.derive import Derived, problem
from sdpa_cli.framework.flagshape import flag_shape
from sdpa_cli.framework.result import Figure, Result, row_fields
from sdpa_cli.io import topics
from sdpa_cli.spec.common import Documented, SpecBase
from sdpa_cli.spec.limits import Cost

# Spec fields every study shares and no study command takes as a flag of its own: identity
# is the spec file's business, `seed` is a common flag, `documented` is a list of records.
IDENTITY_FIELDS = ("study", "name", "title", "source", "description", "seed", "documented",
                   "claims", "beyond", "answer")
# A study's flag: `--` and lower-case words joined by `-` (`--d-model`, `--ssmax-s`).
FLAG_NAME = re.compile(r"--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


class DeclarationError(SdpaError):
    """A study's author made a mistake its declaration shows (a field that contradicts the
    package, a package that does not import): raised where that study is first used and only
    there, as one line naming the file, the study, the field and the fix; exit 2 (nothing of
    that study ran). Other studies, their commands and the test session go on."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, study: str, field_: str, message: str, file: str | Path | None = None,
                 line: int | None = None) -> None:
        file = _relative(Path(file)) if file is not None else None
        where = f"{file}:{line}: " if file and line else f"{file}: " if file else ""
        super().__init__(f"{where}study {study!r}: {field_}: {message}")
        self.study, self.field, self.message = study, field_, message
        self.file, self.line = file, line


@dataclass(frozen=True)
class Rate:
    """How long one spec of a study takes, for the batch's estimate (report/eta.py):
    `fixed` seconds (mostly its figures) + `per_step` nanoseconds × the work of its cost
    estimate (Study.cost), + `extra(spec)` seconds of work that estimate leaves out. Fitted to
    measured wall times of the study's shipped specs on a 2-core machine (the timing page says
    how); a study with no rate gets the middle of the others."""

    fixed: float
    per_step: float
    extra: Callable[[Any], float] | None = None


@dataclass(frozen=True)
class Flag:
    """How one spec field reads as a command-line flag, where the derived form is not enough
    (by default the flag's name is the field's: `d_model` is `--d-model`)."""

    metavar: str | None = None  # e.g. "D [D ...]"; default from the field's type
    name: str | None = None  # the flag without its dashes, for a field `s`: "ssmax-s"
    switch: bool = False  # a bool field as a plain flag that only turns it on (`--expand`)
    repeat: bool = False  # a list flag that may also be given again (`--text a --text b`)


def _from_run_module(*_: Any) -> Any:
    """The default of `run` and `documented_problem`: register puts the package's run
    module's function of that name in its place."""
    raise AssertionError("a Study is used as registry.get returns it, registered")


@dataclass(frozen=True, kw_only=True)
class Study:
    """Everything sdpa derives a study's command, batch entry, schema row types, report
    section and figures from. A study package's __init__ holds exactly one, as STUDY."""

    # The `study:` key of its specs and its command's name: by default the package's, with
    # `-` for `_` (filled in by register; a name given must be that one).
    name: str = ""
    spec: type[SpecBase]  # its pydantic spec model; every flag is one of its fields
    # (spec, ctx) → Result; never prints or writes. By default the package's run.run.
    run: Callable[[Any, RunContext], Result] = _from_run_module
    rows: tuple[type, ...]  # the frozen-dataclass row types its tables hold
    # Figure.kind → "module:function" (a module of the study's package, or a dotted name from
    # sdpa_cli.), resolved only to draw, so
    # matplotlib loads only then; checked (without importing) when the study is registered.
    figures: Mapping[str, str]
    cost: Callable[[Any], Cost]  # spec → work, memory and output (refused over budget)
    # Why a documented entry names no row or quantity of this spec (None when it does). By
    # default the package's run.documented_problem.
    documented_problem: Callable[[Any, Documented], str | None] = _from_run_module
    # Spec fields of small, fast runs (one per kind of input the study takes): the contract
    # test (tests/test_contract.py) runs every study with each of them.
    examples: tuple[Mapping[str, Any], ...]
    # Its `sdpa help` page (model, fields, measured results): its own page lives in its
    # package (studies/<name>/<topic>.md), a shared one in sdpa_cli/docs/; linked from its
    # sections of report.html; checked to exist when the study is registered.
    topic: str = ""
    # Seconds per spec for the batch's estimate; None until its specs have been timed.
    rate: Rate | None = None
    description: str = ""  # the command's long help (a paragraph), before its examples
    usage: tuple[str, ...] = ()  # example command lines for --help, each runnable
    flags: Mapping[str, Flag] = field(default_factory=dict)  # per-field flag presentation
    no_flag: tuple[str, ...] = ()  # fields a spec file may set but the command line may not
    # The command's positional argument is a NAME of a shipped spec or a SPEC file; for a study
    # whose input is named on its own (inspect's MODEL), anything else sets this field,
    # after check_target (which raises the one-line InputError) has accepted it.
    target_field: str | None = None
    target_metavar: str = "[NAME or SPEC]"
    check_target: Callable[[str], None] | None = None
    # For examples that need files (a checkpoint): writes them into a folder and returns the
    # spec fields that name them, merged into every example by the contract test.
    example_files: Callable[[Path], Mapping[str, Any]] | None = None
    # A table study's column derivations (`frobenius ← probs`) and the spec fields that fix
    # its rows' values: the audit replays a printed number from the document's printed inputs
    # of its row, and reads the printed numbers of specs with the same rows (framework.derive).
    derived: Derived | None = None
    package: str = ""  # the study package's dotted name (filled in by register)
    summary: str = ""  # its line in the registry: the command's short help (filled in too)

    def renderer(self, kind: str) -> Callable[[Figure], Any]:
        """The function that draws figures of `kind` (imports the study's figure module)."""
        if kind not in self.figures:  # a kind made where registration could not read it
            raise DeclarationError(self.name, "figures", f"no figure kind {kind!r} is declared"
                                   f"{_did_you_mean(kind, self.figures)}; add it to figures=",
                                   self.init_file())
        module, _, name = self.figures[kind].partition(":")
        # Lazy on purpose: figure modules load matplotlib, which --no-plots never needs.
        return typing.cast(Callable[[Figure], Any],
                           getattr(importlib.import_module(self.module(module)), name))

    def init_file(self) -> Path | None:
        """The package's __init__.py, where STUDY is declared."""
        return sources.module_file(self.package) if self.package else None

    def module(self, name: str) -> str:
        """A module named in the declaration: inside the study's package, or absolute."""
        return name if name.startswith("sdpa_cli.") else f"{self.package}.{name}"

    def flag_fields(self) -> list[str]:
        """The spec fields that are flags of this study's command: the spec class's own
        first, then those it inherits, each class's in their written order."""
        order: list[str] = []
        for cls in self.spec.__mro__:
            order += [n for n in getattr(cls, "__annotations__", {}) if n not in order]
        return [n for n in order if n in self.spec.model_fields
                and n not in IDENTITY_FIELDS and n not in self.no_flag]

    def flag_name(self, field_: str) -> str:
        """The command-line flag that sets a spec field: `--d-model` for `d_model`, or the
        name its Flag gives."""
        style = self.flags.get(field_)
        return "--" + (style.name if style is not None and style.name else
                       field_.replace("_", "-"))


def register(study: Study, package: str, summary: str) -> Study:
    """The declaration of `package`, checked: a mistake is an error now, not after a run."""
    study = _by_convention(dataclasses.replace(study, package=package, summary=summary))
    for check in (_names, _topic, _spec_fields, _figures, _figure_kinds, _rows, _rate,
                  _example, _derived):
        check(study)
    return study


def _by_convention(study: Study) -> Study:
    """The declaration with what it left to convention filled in from its package: its name,
    and `run` and `documented_problem` from the package's run module."""
    study = dataclasses.replace(study, name=study.name or _leaf(study).replace("_", "-"))
    module_name = f"{study.package}.run"
    found = {}
    for what in ("run", "documented_problem"):
        if getattr(study, what) is not _from_run_module:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            module = None
        if not callable(getattr(module, what, None)):
            _fail(study, what, f"{module_name} defines no {what}(): write it there, or give "
                  f"{what}= the function")
        found[what] = getattr(module, what)
    return dataclasses.replace(study, **found)


def _leaf(study: Study) -> str:
    return study.package.rsplit(".", 1)[-1]


def _relative(path: Path) -> str:
    """A source file as messages name it: from the folder that holds sdpa_cli/."""
    root = Path(__file__).resolve().parents[2]
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def _fail(study: Study, field_: str, message: str, file: Path | None = None,
          line: int | None = None) -> typing.NoReturn:
    """Raise the error; by default it points at the field's line in the declaration (a spec
    field's at its line in the spec class)."""
    if file is None:
        top = field_.split(".")[0].split("[")[0]
        if top == "spec" and "." in field_:
            file, line = _spec_field_line(study.spec, field_.split(".", 1)[1])
        else:
            file = study.init_file()
            line = sources.keyword_line(file, "Study", top) if file is not None else None
    raise DeclarationError(study.name, field_, message, file, line)


def _spec_field_line(spec: type, name: str) -> tuple[Path | None, int | None]:
    for cls in spec.__mro__:
        if name in getattr(cls, "__annotations__", {}):
            try:
                path = Path(inspect.getfile(cls))
            except TypeError:
                return None, None
            return path, sources.class_field_line(path, cls.__name__, name)
    return None, None


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _names(study: Study) -> None:
    literal = study.spec.model_fields["study"].default
    if literal != study.name:
        _fail(study, "spec.study", f"the spec's `study:` is {literal!r}, not {study.name!r}; "
              f"write study: Literal[{study.name!r}] = {study.name!r}")
    leaf = _leaf(study)
    if leaf != study.name.replace("-", "_"):
        _fail(study, "name", f"the package is {leaf!r}; name it {study.name.replace('-', '_')!r}"
              f" or the study {leaf.replace('_', '-')!r}")
    if not study.summary or "\n" in study.summary or len(study.summary) > 60:
        _fail(study, "summary", "its line in STUDIES (sdpa_cli/studies/__init__.py) is the "
              "command's short help: one line of at most 60 characters")
    shapes = {"run": "(spec, ctx) → Result", "cost": "spec → Cost",
              "documented_problem": "(spec, entry) → str | None"}
    for what, shape in shapes.items():
        if not callable(getattr(study, what)):
            _fail(study, what, f"must be a function {shape}")


def _topic(study: Study) -> None:
    pages = topics.pages()
    if study.topic and study.topic not in pages:
        folder = study.package.replace(".", "/")
        _fail(study, "topic", f"no topic page {study.topic!r}{_did_you_mean(study.topic, pages)};"
              f" write {folder}/{study.topic}.md, or name a page `sdpa help` lists")


def _spec_fields(study: Study) -> None:
    model = study.spec.model_fields
    if study.spec.draws_random and "se_tolerance" not in model:
        _fail(study, "spec.se_tolerance", "a study that draws at random judges its Monte Carlo "
              "checks in standard errors: give its spec `se_tolerance: SeTolerance`")
    if study.target_field is not None and study.target_field not in model:
        _fail(study, "target_field", f"{study.spec.__name__} has no field "
              f"{study.target_field!r}{_did_you_mean(study.target_field, model)}")
    for name in (*study.flags, *study.no_flag):
        if name not in model:
            where = "flags" if name in study.flags else "no_flag"
            _fail(study, f"{where}.{name}", f"{study.spec.__name__} has no field {name!r}"
                  f"{_did_you_mean(name, model)}")
    for name in study.flag_fields():
        info = model[name]
        if not info.description:
            _fail(study, f"spec.{name}", "a flag needs help text: give the field "
                  "Field(description=...)")
        if flag_shape(info.annotation) is None:
            _fail(study, f"spec.{name}", "its type cannot be a flag (a number, word, bool, "
                  "choice or a list of those); list it in the declaration's no_flag")
        if study.flags.get(name, Flag()).switch and flag_shape(info.annotation) != "bool":
            _fail(study, f"flags.{name}", "only a bool field can be a switch")
        if study.flags.get(name, Flag()).repeat and flag_shape(info.annotation) != "list":
            _fail(study, f"flags.{name}", "only a list field can be repeated")
    taken: dict[str, str] = {}
    for name in study.flag_fields():
        flag = study.flag_name(name)
        if not FLAG_NAME.fullmatch(flag):
            _fail(study, f"flags.{name}", f"{flag!r} is not a flag: give Flag(name=...) "
                  "lower-case words joined by '-', without the dashes (e.g. 'ssmax-s')")
        if flag in taken:
            _fail(study, f"flags.{name}", f"{flag} is also the flag of {taken[flag]!r}: "
                  "give one of them another with Flag(name=...)")
        taken[flag] = name


def _figures(study: Study) -> None:
    for kind, where in study.figures.items():
        module, colon, name = where.partition(":")
        if not colon or not module or not name:
            _fail(study, f"figures[{kind!r}]", f"{where!r} is not 'module:function' (e.g. "
                  "'figures:draw_x', a function of the package's figures.py)")
        defined = sources.top_level_functions(study.module(module))
        if defined is None:
            _fail(study, f"figures[{kind!r}]", f"no module {study.module(module)} (a module "
                  "of the study's package, or a dotted name from sdpa_cli.)")
        if name not in defined:
            _fail(study, f"figures[{kind!r}]", f"{study.module(module)} defines no {name}()"
                  f"{_did_you_mean(name, defined)}")


def _figure_kinds(study: Study) -> None:
    """Every Figure its code makes names a declared kind: read from the source, so a typo
    is refused before a run, not found after it when the figure is drawn."""
    declared = ", ".join(sorted(study.figures)) or "none"
    for call in sources.figure_calls(study.package):
        if call.kind is None:
            _fail(study, "figures", "a Figure's kind must be a string written in the call (or a "
                  "module constant), so it can be checked against figures= before a run",
                  call.file, call.line)
        if call.kind not in study.figures:
            _fail(study, "figures", f"Figure kind {call.kind!r} is not declared"
                  f"{_did_you_mean(call.kind, study.figures)}; declared: {declared}",
                  call.file, call.line)


def _rows(study: Study) -> None:
    if not study.rows:
        _fail(study, "rows", "name the row type(s) its tables hold")
    for row in study.rows:
        if not (is_dataclass(row) and row.__dataclass_params__.frozen):  # type: ignore[attr-defined]
            _fail(study, "rows", f"{getattr(row, '__name__', row)!r} is not a frozen dataclass:"
                  " write @dataclass(frozen=True) above it")


def _rate(study: Study) -> None:
    rate = study.rate
    if rate is None:
        return
    if not (isinstance(rate, Rate) and all(
            isinstance(x, int | float) and math.isfinite(x) and x >= 0
            for x in (rate.fixed, rate.per_step))):
        _fail(study, "rate", "Rate(fixed seconds ≥ 0, per_step nanoseconds ≥ 0), or leave it "
              "out until the study's specs are timed")
    if rate.extra is not None and not callable(rate.extra):
        _fail(study, "rate", "Rate.extra must be a function spec → seconds")


def _example(study: Study) -> None:
    if not study.examples:
        _fail(study, "examples", "give at least one small example for the contract test")
    for i, example in enumerate(study.examples):
        unknown = [k for k in example if k not in study.spec.model_fields]
        if unknown:
            _fail(study, f"examples[{i}]", f"{study.spec.__name__} has no field {unknown[0]!r}"
                  f"{_did_you_mean(unknown[0], study.spec.model_fields)}")
        if study.example_files is not None:
            continue  # it names files the contract test writes: validated there
        try:
            spec = study.spec.model_validate({"study": study.name, "seed": 1, **example})
        except (ValueError, SpecFieldError) as e:  # pydantic's, or a cross-field rule's
            said = " ".join(str(e).split())
            if isinstance(e, SpecFieldError):
                said = f"{'.'.join(map(str, e.loc))}: {e.message}"
            _fail(study, f"examples[{i}]", said + " (an example is the spec fields of a "
                  "small, fast run that validates)")
        _cost_places(study, spec)


def _cost_places(study: Study, spec: SpecBase) -> None:
    """A Cost names where its refusals point: `lower` and `rows_field` are each ONE location
    in the spec (a field, then list indices), not a list of fields, or the one-line error
    of a spec over budget would point at no line of the user's file."""
    cost = study.cost(spec)
    if not isinstance(cost, Cost):
        _fail(study, "cost", f"returned {type(cost).__name__}, not a Cost "
              "(sdpa_cli.spec.limits.Cost)")
    for part, loc in (("lower", cost.lower), ("rows_field", cost.rows_field)):
        if not loc and part == "rows_field":
            continue
        why = _no_place(spec, loc)
        if why:
            _fail(study, "cost", f"Cost.{part} = {loc!r}: {why}; it is one location in the "
                  f"spec, where a spec over budget is refused (('trials',), or ('sizes', 0) "
                  f"for an item), not the fields to lower: the hint names those")


def _no_place(spec: SpecBase, loc: tuple[str | int, ...]) -> str | None:
    """Why `loc` is no place in the spec (None: it is one)."""
    if not loc or not isinstance(loc[0], str) or loc[0] not in type(spec).model_fields:
        fields = list(type(spec).model_fields)
        first = loc[0] if loc else None
        return (f"{first!r} is no field of {type(spec).__name__}"
                f"{_did_you_mean(str(first), fields)}" if loc else "it is empty")
    value: Any = getattr(spec, loc[0])
    for step in loc[1:]:
        if isinstance(step, int) and isinstance(value, list | tuple) and \
                -len(value) <= step < len(value):
            value = value[step]
        elif isinstance(step, str) and isinstance(value, BaseModel) and \
                step in type(value).model_fields:
            value = getattr(value, step)
        elif isinstance(step, str) and isinstance(value, Mapping) and step in value:
            value = value[step]
        else:
            return f"{loc[0]} holds no {step!r}"
    return None


def _derived(study: Study) -> None:
    if study.derived is None:
        return
    found = problem(study.derived, [row_fields(r) for r in study.rows],
                    list(study.spec.model_fields))
    if found:
        _fail(study, *found)
