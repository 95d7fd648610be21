"""Each study's click command, derived from its declaration: one flag per spec field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sdpa_cli import registry
from sdpa_cli.cli.options import (
    LIST,
    SETTINGS,
    SpecOption,
    StudyCommand,
    ci_settings,
    common_options,
    spec_overrides,
)
from sdpa_cli.framework.declaration import Flag, Study
from sdpa_cli.framework.flagshape import flag_shape
from sdpa_cli.io.topics import code_lines
from sdpa_cli.report import Settings
from sdpa_cli.runner.study import study_command


def build(name: str) -> click.Command:
    """The command of the registered study `name`."""
    study = registry.get(name)

    def callback(target: str | None, list_: bool, all_: bool, **kwargs: Any) -> int:
        ctx = click.get_current_context()
        overrides, flags = spec_overrides(ctx)
        settings = settings_from(ctx)
        return study_command(study.name, target, list_=list_, all_=all_,
                             overrides=overrides, flags=flags, settings=settings)

    callback = common_options(callback)
    callback = click.option("--all", "all_", is_flag=True,
                            help=f"Run every named {name} spec, each into its own run "
                                 "folder.")(callback)
    callback = click.option("--list", "list_", is_flag=True,
                            help=f"List the named {name} specs (name, description, "
                                 "source) on stdout.")(callback)
    for field in reversed(study.flag_fields()):
        callback = _option(study, field)(callback)
    callback = click.argument("target", metavar=study.target_metavar, required=False)(callback)
    return click.command(name, cls=StudyCommand, short_help=study.summary,
                         help=_help(study))(callback)


def _option(study: Study, field: str) -> Any:
    info = study.spec.model_fields[field]
    shape = flag_shape(info.annotation)
    style = study.flags.get(field, Flag())
    opt = study.flag_name(field)
    help_ = info.description or ""
    if shape == "bool" and style.switch:
        return click.option(opt, field, cls=SpecOption, is_flag=True, default=None,
                            flag_value=True, help=help_)
    metavar = style.metavar or _metavar(shape, info.annotation)
    if shape == "list":
        return click.option(opt, field, cls=SpecOption, type=LIST, default=None,
                            multiple=style.repeat, metavar=metavar, help=help_)
    return click.option(opt, field, cls=SpecOption, default=None, metavar=metavar, help=help_)


def _metavar(shape: str | None, annotation: Any) -> str:
    if shape == "bool":
        return "BOOL"
    text = repr(annotation)
    word = ("N" if "int" in text and "float" not in text else
            "TEXT" if "str" in text and "float" not in text else "X")
    return f"{word} [{word} ...]" if shape == "list" else word


def _help(study: Study) -> str:
    lines = [study.description or study.summary]
    if study.usage:  # click indents the block two columns: each example fits 80 in all
        lines += ["", "\b", "Examples:",
                  *(f"  {part}" for u in study.usage for part in code_lines(u, 76, shell=True))]
    return "\n".join(lines)


def settings_from(ctx: click.Context, **extra: Any) -> Settings:
    """report.Settings from the shared flags this command declares (options.SETTINGS and
    the CI flags)."""
    given = {k: ctx.params[k] for k in SETTINGS if k in ctx.params}
    out = given.pop("out", None)
    no_plots = given.pop("no_plots", False)
    given = {k: v for k, v in given.items() if v is not None}
    # --out is a run folder, except under --all, where it holds one run folder per spec
    batch = bool(ctx.params.get("all_"))
    where = {"batch_folder" if batch else "run_folder": Path(out)} if out else {}
    return Settings(out=Path(out) if out else None, plots=not no_plots, **given,
                    **ci_settings(ctx.params, **where), **extra)
