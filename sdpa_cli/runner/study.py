"""The recipe every study command follows: spec → study → run folder and report → exit code."""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdpa_cli import registry, report
from sdpa_cli.errors import EXIT_OK, InputError, Problem
from sdpa_cli.io import environment
from sdpa_cli.report import batch as report_batch
from sdpa_cli.report import examples as report_examples
from sdpa_cli.report.outcomes import Outcome, Planned, Report
from sdpa_cli.report.progress import Progress
from sdpa_cli.runner import batch, executors, loader, paths

if TYPE_CHECKING:
    from sdpa_cli.report.progress import Progress


def run_study(
    study: str,
    spec_path: Path | None,
    *,
    overrides: dict[str, Any],
    flags: dict[str, str],
    settings: report.Settings,
    argv: list[str] | None = None,
) -> int:
    """Load and validate everything first (exit 2 before any work), then run and report.
    A bare word for spec_path names a shipped (or local) spec of this study."""
    if spec_path is not None and is_example_name(str(spec_path)) and not spec_path.exists():
        spec_path = find_spec(study, str(spec_path))
    executors.resolve(settings.scheduler)  # a bad --scheduler is bad input: exit 2 first
    resolved = loader.load(spec_path, study=study, overrides=overrides, flags=flags,
                         default_name=study)
    registry.check_documented(resolved, str(spec_path) if spec_path else None)
    target = report.target_for(resolved.name or study, settings)
    if settings.write:
        report.ready(target, "--out" if settings.out is not None else "output folder")
    with executors.session(settings) as settings, _progress(study, resolved, settings) as bar:
        if bar.live:  # a terminal watches: the blocks bar, gone before the table prints
            settings = dataclasses.replace(settings, tick=bar.tick)
        started = time.time()
        result = registry.get(study).run(resolved, report.context(settings))
    replaced = settings.write and target.exists()  # an earlier run of that name goes
    earlier = report.output.earlier_run(target) if replaced else None
    folder = report.write_run(result, settings, target=target,
                              renderer=registry.get(study).renderer,
                              argv=argv if argv is not None else sys.argv, started=started,
                              input_spec=resolved.input_record(),
                              ) if settings.write else None
    after = [earlier] if earlier and folder is not None else []
    if folder is not None and report_batch.refresh(folder):
        # it describes this folder: kept true, and said after the files
        after.append(report_batch.joined(folder, source=result.source,
                                          from_flags=spec_path is None, replaced=replaced,
                                          hint=settings.out is None))
    report.emit(result, settings, folder, after=after)
    tally = Report(check=settings.check)
    tally.add_result(result)
    planned = Planned(spec_path or Path(f"<{study} flags>"), resolved, target)
    outcome = Outcome(planned, result.status, result=result,
                      seconds=time.time() - started, folder=folder)
    report.finish_ci([outcome], settings, started=started)
    return tally.exit_code


def _progress(study: str, resolved: Any, settings: report.Settings) -> Progress:
    """The blocks bar of one study command: on a terminal only, and only for the table
    (-q and --format json|csv|markdown draw nothing: stdout carries the document alone)."""
    return Progress.blocks_only(f"{study} {resolved.name or study}: blocks",
                                quiet=settings.quiet or settings.fmt != "table")


# --- named specs: NAME lookup, --list and --all (every study command has them) ----------------


def named_specs(study: str) -> list[Path]:
    """Every spec of `study` a NAME can reach, in lookup order: `experiments/<study>/` of the
    current folder first, then the shipped ones (a local file shadows a shipped one)."""
    found: dict[str, Path] = {}
    for root in (paths.default_experiments(), paths.shipped_experiments()):
        folder = root / study if root is not None else None
        if folder is not None and folder.is_dir():
            for path in paths.spec_files(folder):
                found.setdefault(path.stem, path)
    return list(found.values())


def is_example_name(target: str) -> bool:
    """A bare word such as `money-bank-grows` names a spec; anything with a folder part
    or a .yaml/.yml suffix is a spec file."""
    return "/" not in target and os.sep not in target and \
        not target.endswith((".yaml", ".yml"))


def find_spec(study: str, name: str) -> Path:
    """The spec file of a named spec of `study`, or exit 2 with a did-you-mean."""
    specs = {p.stem: p for p in named_specs(study)}
    if name in specs:
        return specs[name]
    close = difflib.get_close_matches(name, list(specs), n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    known = (f"`sdpa {study} --list` shows them" if len(specs) > 8
             else f"names: {', '.join(sorted(specs))}" if specs else "none is shipped")
    raise InputError(Problem(
        f"{study}: no spec named {name!r}{hint}; {known} (a spec file is given by its path, "
        f"e.g. ./{name}.yaml)"))


def _listed(study: str, path: Path) -> report_examples.Listed:
    try:
        s = loader.load(path, study=study)
    except InputError as e:
        return report_examples.Listed(path.stem, "", "", str(path), e.problems[0].render())
    return report_examples.Listed(s.name or path.stem, s.description or s.title, s.source,
                                  str(path))


def _sorted_specs(study: str) -> list[Path]:
    """Grouped by source document (their file names sort in the documents' order)."""
    listed = [(p, _listed(study, p)) for p in named_specs(study)]
    return [p for p, _ in sorted(listed, key=lambda x: (x[1].source.split(",")[0], x[1].name))]


def list_specs(study: str, settings: report.Settings) -> int:
    entries = [_listed(study, p) for p in _sorted_specs(study)]
    report_examples.show_listing(entries, settings.fmt)
    return EXIT_OK


def run_all_specs(study: str, *, overrides: dict[str, Any], flags: dict[str, str],
                  settings: report.Settings, argv: list[str] | None = None) -> int:
    """Every named spec of `study`, each into its own run folder (under --out if given); one
    document on stdout. Every spec and folder is checked before the first one runs (exit 2)."""
    loaded, problems = [], []
    for path in _sorted_specs(study):
        try:
            s = loader.load(path, study=study, overrides=overrides, flags=flags)
            registry.check_documented(s, str(path))
        except InputError as e:
            problems.extend(e.problems)
            continue
        loaded.append((path, s))
    if problems:
        raise InputError(problems)
    if not loaded:
        raise InputError(Problem(f"{study}: no named specs found (looked in "
                                 f"experiments/{study}/ and the shipped specs)"))
    per_spec = dataclasses.replace(
        settings, out=None, root=settings.out if settings.out is not None else settings.root)
    planned = [Planned(path, s, report.target_for(s.name or study, per_spec))
               for path, s in loaded]
    # Not caught: a spec that cannot be written ends --all with its own error line.
    started = time.time()
    outcomes, tally = batch.run_planned(planned, per_spec, argv=argv, catch=False)
    report.finish_ci(outcomes, settings, started=started)
    done = [(o.result, o.folder) for o in outcomes
            if o.result is not None and (o.folder or not settings.write)]
    folders = [f for _, f in done if f is not None]
    if folders:
        report_batch.refresh(folders[0])  # they share one parent folder
    text = report_examples.batch_document([r for r, _ in done], settings.fmt)
    if text is not None:
        report.write_stdout(text)
    if not settings.quiet and text is None:
        report_examples.show_batch(done, check=settings.check,
                                   out=report.terminal.result_console())
    else:  # the document (or -q) in its place: a failure is still said, one line each
        for r, _ in done:
            for c in r.checks:
                if not c.passed:
                    print(f"sdpa: {r.name}: FAIL {c.name}: {c.detail}", file=sys.stderr)
    return tally.exit_code


def study_command(study: str, target: str | None, *, list_: bool, all_: bool,
                  overrides: dict[str, Any], flags: dict[str, str],
                  settings: report.Settings) -> int:
    """`sdpa STUDY`: --list, --all, a NAME, a SPEC file, or flags alone."""
    if list_:
        if target is not None or all_:
            raise InputError(Problem("takes no NAME, SPEC or --all", flag="--list"))
        return list_specs(study, settings)
    if all_:
        if target is not None:
            raise InputError(Problem("runs every named spec; give no NAME or SPEC with it",
                                     flag="--all"))
        return run_all_specs(study, overrides=overrides, flags=flags, settings=settings)
    # Too long for a file (NAME_MAX, PATH_MAX), and spec names are at most 100 characters:
    # neither, said before anything stats it (that raised OSError: File name too long).
    why = environment.path_problem(Path(target), sibling=False) if target else None
    if why:
        raise InputError(Problem(why, file=target))
    declared = registry.get(study)
    field = declared.target_field
    if target is not None and field is not None and not _names_a_spec(study, target):
        if declared.check_target is not None:
            declared.check_target(target)  # one line and exit 2 if it names nothing
        overrides = {**overrides, field: target}
        flags = {**flags, field: declared.target_metavar.split()[0]}
        target = None
    elif target is None and (field is None or field not in overrides) and _needs_a_file(study):
        what = f"a {declared.target_metavar}" if field else "a spec NAME or a SPEC file"
        raise InputError(Problem(f"{study}: give {what}, or --list to see the named specs, "
                                 "or --all to run them all"))
    exists = target is not None and Path(target).exists()
    path = None if target is None else (
        find_spec(study, target) if is_example_name(target) and not exists
        else Path(target))
    return run_study(study, path, overrides=overrides, flags=flags, settings=settings)


def _names_a_spec(study: str, target: str) -> bool:
    """A spec file (.yaml, .yml) or the NAME of a named spec of this study."""
    return target.endswith((".yaml", ".yml")) or (
        is_example_name(target) and target in {p.stem for p in named_specs(study)})


def _needs_a_file(study: str) -> bool:
    """A spec with a required field no flag can give (worked-example's parts) comes from a
    file: flags alone cannot make one."""
    declared = registry.get(study)
    return any(info.is_required() for name, info in declared.spec.model_fields.items()
               if name != "study")
