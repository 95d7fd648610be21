"""Studies: one module per study, each with `run(spec, workers=…) -> Result`."""

from __future__ import annotations

import importlib
from types import ModuleType

from sdpa_cli.errors import InputError, Problem
from sdpa_cli.spec.common import SpecBase

MODULES = {
    "variance": "sdpa_cli.studies.variance",
    "softmax-sweep": "sdpa_cli.studies.softmax_sweep",
    "jacobian": "sdpa_cli.studies.jacobian",
    "worked-example": "sdpa_cli.studies.worked_example",
}


def module(study: str) -> ModuleType:
    return importlib.import_module(MODULES[study])


def check_documented(spec: SpecBase, file: str | None) -> None:
    """Refuse, before anything runs, documented entries that name no row or quantity."""
    mod = module(spec.study)
    problems = []
    for i, entry in enumerate(spec.documented):
        why = mod.documented_problem(spec, entry)
        if why:
            problems.append(Problem(why, file=file, field=f"documented[{i}]"))
    if problems:
        raise InputError(problems)
