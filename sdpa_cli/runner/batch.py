"""`sdpa run` and `sdpa validate`: many specs, all validated first, then run and written."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from sdpa_cli import process, registry, report
from sdpa_cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    InputError,
    Problem,
    SchedulerLost,
    SdpaError,
    one_line,
)
from sdpa_cli.framework.declaration import DeclarationError
from sdpa_cli.framework.result import Result
from sdpa_cli.io import environment, names
from sdpa_cli.report import batch as batch_report
from sdpa_cli.report import eta, manifest, ownfiles, unchanged
from sdpa_cli.report.formatting import skip_reason
from sdpa_cli.report.outcomes import Outcome, Planned, Report
from sdpa_cli.report.progress import Progress
from sdpa_cli.runner import executors, loader, paths, selection
from sdpa_cli.spec.common import SpecBase

if TYPE_CHECKING:
    from sdpa_cli.report.collect import Entry
    from sdpa_cli.report.progress import Progress


def collect(targets: list[Path]) -> list[Path]:
    """Spec files named by the arguments (folders are searched recursively)."""
    if not targets:
        default = paths.default_experiments()
        if default is None:
            raise InputError(Problem("no experiments/ folder here and no shipped specs found; "
                                     "name spec files or folders", flag="PATH"))
        targets = [default]
    files: list[Path] = []
    problems = []
    for t in targets:
        why = environment.path_problem(t, sibling=False)
        if why:
            problems.append(Problem(why, file=str(t)))
        elif t.is_dir():
            found = paths.spec_files(t)
            if not found:
                problems.append(Problem("folder holds no *.yaml spec", file=str(t)))
            files.extend(found)
        elif t.exists():
            files.append(t)
        else:
            problems.append(Problem("no such file or folder", file=str(t)))
    if problems:
        raise InputError(problems)
    unique: list[Path] = []
    for f in files:
        if f.resolve() not in {u.resolve() for u in unique}:
            unique.append(f)
    return unique


# A spec of a study whose declaration is broken: its file, its output name, and the error.
Broken = tuple[Path, str, DeclarationError]


def validate(files: list[Path], broken: list[Broken] | None = None
             ) -> list[tuple[Path, SpecBase]]:
    """Every spec loaded and checked; all problems of all files reported together. A spec
    whose study's declaration is broken is a problem too, unless `broken` collects it (for
    -k: only a spec the selection keeps must be runnable)."""
    loaded, problems = [], []
    for f in files:
        try:
            s = loader.load(f, study=None)
            registry.check_documented(s, str(f))
            loaded.append((f, s))
        except InputError as e:
            problems.extend(e.problems)
        except DeclarationError as e:  # the study's author's mistake, not this spec's
            if broken is None:
                problems.append(_broken_problem(f, e))
            else:
                broken.append((f, _raw_name(f), e))
    owners: dict[str, Path] = {}
    for f, s in loaded:
        name = names.of(s.name, f.stem)
        if name in owners:
            problems.append(Problem(f"output name {name!r} is also used by {owners[name]}; "
                                    "set `name:` in one of them", file=str(f), field="name"))
        owners[name] = f
    if problems:
        raise InputError(problems)
    return loaded


def _broken_problem(file: Path, e: DeclarationError) -> Problem:
    return Problem(f"its study cannot be used: {e}", file=str(file), field="study")


def _raw_name(file: Path) -> str:
    """The output name a spec asks for, read without its study's model (which is broken)."""
    name = loader.read_document(file).data.get("name")
    return names.of(name if isinstance(name, str) else None, file.stem)


def plan(loaded: list[tuple[Path, SpecBase]], settings: report.Settings, *,
         require_models: bool = False) -> list[Planned]:
    """Each spec and its run folder; `require_models` (sdpa run --require-models) sets the
    field of that name wherever a study has it, so a missing model fails instead of skipping."""
    return [Planned(f, _required(s) if require_models else s,
                    report.target_for(names.of(s.name, f.stem), settings)) for f, s in loaded]


def _required(spec: SpecBase) -> SpecBase:
    if "require_models" not in type(spec).model_fields:
        return spec
    return spec.model_copy(update={"require_models": True})


def compute(p: Planned, settings: report.Settings) -> tuple[float, Result]:
    """(start time, result) of one planned spec: its computation only, nothing written."""
    started = time.time()
    return started, registry.get(p.spec.study).run(p.spec, report.context(settings))


def run_one(p: Planned, settings: report.Settings, argv: list[str], *,
            catch: bool = True, computed: Future[tuple[float, Result]] | None = None
            ) -> Outcome:
    """Run one planned spec into its folder (or write what `computed` brings). With `catch`,
    a spec that cannot run becomes an "error" outcome (one broken spec must not stop a
    batch); without, its error propagates."""
    started = time.time()
    try:
        started, result = computed.result() if computed is not None else compute(p, settings)
        folder = report.write_run(result, settings, target=p.target, argv=argv,
                                  renderer=registry.get(p.spec.study).renderer,
                                  started=started, input_spec=p.spec.input_record(),
                                  ) if settings.write else None
    except SchedulerLost:
        raise  # every later spec would fail the same way: end the batch (exit 1)
    except SdpaError as e:
        if not catch:
            raise
        return Outcome(p, "error", error=" ".join(e.lines()), seconds=time.time() - started)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:
        if process.pending():  # a Ctrl-C that an import turned into ImportError: stop all
            raise KeyboardInterrupt from None
        if not catch:
            raise
        return Outcome(p, "error", error=f"internal error: {type(e).__name__}: {e}",
                       seconds=time.time() - started)
    return Outcome(p, result.status, result=result, seconds=time.time() - started,
                   figures=tuple(report.figure_files(result, settings)), folder=folder)


def _kept(p: Planned, settings: report.Settings) -> Outcome | None:
    """The outcome of a spec whose run folder is unchanged (None: it must run)."""
    started = time.time()
    status = unchanged.kept_status(
        p.target, input_sha256=unchanged.input_digest(p.spec.input_record()),
        render=unchanged.render_settings(settings.plots, settings.svg, settings.dpi),
        versions=manifest.versions())
    if status is None:
        return None
    try:  # the folder's own result, so every report reads it as if it had just run
        result = Result.from_json(ownfiles.read(p.target / "results.json", "result"))
    except OSError:
        return None
    return Outcome(p, status, result=result, seconds=time.time() - started,
                   figures=tuple(report.figure_files(result, settings)), folder=p.target,
                   kept=True)


def run_planned(planned: Sequence[Planned], settings: report.Settings, *,
                argv: list[str] | None = None, fail_fast: bool = False,
                progress: Progress | None = None, catch: bool = True,
                keep_unchanged: bool = False, into: list[Outcome] | None = None,
                ) -> tuple[list[Outcome], Report]:
    """The one batch runner (`sdpa run` and `worked-example --all`): probe the folder, run
    every planned spec and write its folder in order (with a cluster, up to SPECS_AHEAD
    specs compute at once), stop early under fail_fast, count into a Report.
    With keep_unchanged, a run folder whose manifest records this very spec, code, library
    versions and figure settings is kept as it is (its recorded status counts).
    Outcomes are appended to `into` as they come, so a caller still has them when the batch
    ends early on an error (a lost scheduler)."""
    for p in planned[:1] if settings.write else ():
        report.ready(p.target, "output folder" if settings.root == Path("outputs")
                     else "--out")  # one probe of the batch folder, before any work
    argv = argv if argv is not None else sys.argv
    tally = Report(check=settings.check)
    outcomes: list[Outcome] = into if into is not None else []
    if progress is not None and progress.live:
        settings = dataclasses.replace(settings, tick=progress.tick)
    ahead = _Ahead(planned, settings, keep_unchanged) if settings.executor is not None else None
    try:
        for i, p in enumerate(planned):
            if progress is not None:
                progress.start(i, p.target.name, p.spec.study)
            if ahead is not None:
                kept, computed = ahead.take(i)
            else:
                kept, computed = (_kept(p, settings) if keep_unchanged else None), None
            outcome = kept or run_one(p, settings, argv, catch=catch, computed=computed)
            outcomes.append(outcome)
            tally.add(outcome)
            if progress is not None:
                # a skip in a word here; where sdpa looked and how to get it, in the summary
                progress.done(outcome.status, outcome.seconds, outcome.error,
                              kept=outcome.kept, why=skip_reason(outcome.result.skipped)[0]
                              .split(" (")[0] if outcome.result and outcome.result.skipped
                              else None)
            if fail_fast and tally.stops(outcome):
                for q in planned[i + 1:]:
                    outcomes.append(Outcome(q, "skipped"))
                    tally.add(outcomes[-1])
                break
    finally:
        if ahead is not None:
            ahead.close()
    return outcomes, tally


# With a cluster, this many specs compute at once: their blocks interleave on the cluster, so
# a spec of few blocks does not leave it idle, and a long spec does not hold the rest back.
# Locally the specs stay one after another: each already keeps every thread busy.
SPECS_AHEAD = 4


class _Ahead:
    """Specs computed ahead on threads of this process (their blocks go to the cluster);
    their folders are still written here, one by one and in order, by the caller. Spec i is
    taken (and waited for) before spec i + SPECS_AHEAD starts, so at most SPECS_AHEAD run."""
    def __init__(self, planned: Sequence[Planned], settings: report.Settings,
                 keep_unchanged: bool) -> None:
        self.planned, self.settings, self.keep_unchanged = planned, settings, keep_unchanged
        self.slots: dict[int, tuple[Outcome | None, Future[tuple[float, Result]] | None]] = {}

    def take(self, i: int) -> tuple[Outcome | None, Future[tuple[float, Result]] | None]:
        """Spec i's kept outcome or its computation; specs up to i + SPECS_AHEAD − 1 start."""
        for j in range(i, min(len(self.planned), i + SPECS_AHEAD)):
            if j not in self.slots:
                p = self.planned[j]
                kept = _kept(p, self.settings) if self.keep_unchanged else None
                self.slots[j] = (kept, None if kept is not None else self._start(p))
        return self.slots.pop(i)

    def _start(self, p: Planned) -> Future[tuple[float, Result]]:
        future: Future[tuple[float, Result]] = Future()

        def target() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(compute(p, self.settings))
            except BaseException as e:  # raised where the caller takes the result
                future.set_exception(e)

        # A daemon thread: after --fail-fast, Ctrl-C or a lost scheduler nobody waits for a
        # spec still computing, and the process must not wait for it either at exit.
        threading.Thread(target=target, name="sdpa-spec", daemon=True).start()
        return future

    def close(self) -> None:
        """Nothing more starts; specs still computing are abandoned (their results are not
        written; their blocks end with the cluster's session)."""
        self.slots.clear()


def run_batch(targets: list[Path], settings: report.Settings, *, fail_fast: bool = False,
              argv: list[str] | None = None, keyword: str | None = None,
              last_failed: bool = False, force: bool = False,
              require_models: bool = False) -> int:
    """Validate all, then run all (keep going unless fail_fast), then index and report."""
    if keyword is not None:
        selection.keyword(keyword)  # a malformed -k is exit 2 before anything is read
    executors.resolve(settings.scheduler)  # a bad --scheduler is bad input: exit 2 first
    # The batch folder first (index.md and report.html sdpa's own or absent; not a run
    # folder or inside one), so a refusal names it rather than one spec's folder in it
    report.check_batch(settings.root, "output folder" if settings.root == Path("outputs")
                       else "--out")
    broken: list[Broken] = []
    planned = plan(validate(collect(targets), broken), settings, require_models=require_models)
    record = selection.read_last_failed(settings.root, strict=last_failed)
    if keyword is not None or last_failed:
        chosen = selection.select([(p.target.name, p.spec.study) for p in planned]
                                  + [(name, e.study) for _, name, e in broken],
                                  expr=keyword, last_failed=record if last_failed else None)
        if not any(chosen):
            what = f"{keyword!r} selects" if keyword is not None else \
                "the specs that failed last time match"
            raise InputError(Problem(f"{what} none of the {len(planned) + len(broken)} specs",
                                     flag="-k" if keyword is not None else "--last-failed"))
        broken = [b for b, ok in zip(broken, chosen[len(planned):], strict=True) if ok]
        planned = [p for p, ok in zip(planned, chosen[:len(planned)], strict=True) if ok]
    if broken:  # a spec the batch would run whose study is broken: nothing runs (exit 2)
        raise InputError([_broken_problem(f, e) for f, _, e in broken])
    # The estimate before the first spec starts; a spec kept as unchanged costs nothing.
    kept = [settings.write and not force and _kept(p, settings) is not None for p in planned]
    estimates = [0.0 if k else eta.seconds(p.spec, settings.workers)
                 for p, k in zip(planned, kept, strict=True)]
    if not settings.quiet:
        print(eta.headline(estimates, sum(kept), settings.workers), file=sys.stderr, flush=True)
    progress = Progress(len(planned), quiet=settings.quiet, estimates=estimates)
    started = time.time()
    finished: list[Outcome] = []
    try:
        with executors.session(settings) as settings, progress:
            outcomes, tally = run_planned(planned, settings, argv=argv, fail_fast=fail_fast,
                                          progress=progress, into=finished,
                                          keep_unchanged=settings.write and not force)
    except SchedulerLost:
        if settings.write:
            _index_after_loss(finished, settings)
        raise  # exit 1 and its message, as before
    described: list[Entry] = []
    if settings.write:
        described = batch_report.write(outcomes, settings.root)
        selection.write_last_failed(settings.root, selection.updated_last_failed(
            record, [(o.planned.target.name, o.status) for o in outcomes]))
    report.finish_ci(outcomes, settings, started=started)
    if settings.fmt == "json":
        report.write_stdout(batch_report.summary_json(outcomes, settings.root))
    if not settings.quiet and settings.fmt == "table":
        batch_report.show_summary(outcomes, settings.root, check=settings.check,
                                  described=len(described), wrote=settings.write)
    else:  # -q silences progress and summary, never a failure: one line per failed spec
        if not settings.quiet:  # the document in the summary's place: where it all went
            print(batch_report.wrote_line(outcomes, settings.root, len(described),
                                          settings.write), file=sys.stderr)
        for o in outcomes:
            if o.status == "error":
                print(one_line(f"sdpa: {o.planned.file}: error: {o.error}"), file=sys.stderr)
            elif o.status == "failed":  # also a kept (unchanged) failure
                bad = [f["check"] for f in batch_report.failures(o)]
                print(one_line(f"sdpa: {o.planned.file}: FAIL {', '.join(bad)}"), file=sys.stderr)
    return tally.exit_code


def _index_after_loss(finished: Sequence[Outcome], settings: report.Settings) -> None:
    """After a lost scheduler: if specs of this batch replaced their folders before the loss,
    rebuild index.md and report.html from the run folders on disk, so they describe the new
    folders (and the old ones the loss left untouched). Only this process writes folders, one
    by one, and the specs still computing write none, so the folders are settled here. A
    failure to write the index must not hide the loss: it is said in one line, and the
    loss's own message and exit 1 follow."""
    if not any(o.folder is not None and not o.kept for o in finished):
        return  # nothing replaced: the index on disk still describes every folder
    try:
        batch_report.write(finished, settings.root)
    except (SdpaError, OSError) as e:
        why = " ".join(e.lines()) if isinstance(e, SdpaError) else e.strerror or str(e)
        print(one_line(f"sdpa: index.md and report.html not rebuilt: {why}"), file=sys.stderr)
        return
    if not settings.quiet:
        print(one_line(f"updated {settings.root / 'index.md'} and report.html"), file=sys.stderr)


def run_validate(targets: list[Path], *, quiet: bool = False) -> int:
    loaded = validate(collect(targets))
    if not quiet:  # the command's result: stdout, for people
        text = "".join(one_line(f"ok  {f}  ({s.study}, {s.name})") + "\n"
                       for f, s in loaded) + f"{len(loaded)} spec(s) valid\n"
        report.write_stdout(report.terminal.for_people(
            text, getattr(sys.stdout, "encoding", None) or "utf-8"))
    return EXIT_OK if loaded else EXIT_BAD_INPUT
