"""Every registered study's checked declaration, found by name (studies.STUDIES lists them)."""

from __future__ import annotations

import functools
import importlib

from sdpa_cli.errors import InputError, Problem
from sdpa_cli.framework.declaration import Study, register
from sdpa_cli.spec.common import SpecBase
from sdpa_cli.studies import STUDIES

# A live view of the registry's names (a study registered later is in it too).
NAMES = STUDIES.keys()


def package_of(name: str) -> str:
    """The dotted package of the study `name` (`softmax-sweep` → studies.softmax_sweep)."""
    return f"sdpa_cli.studies.{name.replace('-', '_')}"


@functools.cache
def get(name: str) -> Study:
    """The study called `name`, its declaration checked (KeyError for an unknown name:
    check against NAMES first; DeclarationError for a declaration that contradicts itself)."""
    if name not in STUDIES:
        raise KeyError(name)
    package = package_of(name)
    # By name on purpose: the registry is a list of names, so a study is one package and
    # one line, and a command imports only its own study.
    return register(importlib.import_module(package).STUDY, package, STUDIES[name])


def check_documented(spec: SpecBase, file: str | None) -> None:
    """Refuse, before anything runs, documented entries that name no row or quantity."""
    study = get(spec.study)
    problems = []
    for i, entry in enumerate(spec.documented):
        why = study.documented_problem(spec, entry)
        if why:
            problems.append(Problem(why, file=file, field=f"documented[{i}]"))
    if problems:
        raise InputError(problems)
