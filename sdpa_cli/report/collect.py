"""The run folders a batch folder holds, read back from disk, in the documents' order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdpa_cli.errors import InputError
from sdpa_cli.framework.documents import DOCUMENTS, document_of, place
from sdpa_cli.framework.result import Result
from sdpa_cli.report import manifest, ownfiles
from sdpa_cli.report.manifest import SELF_DIGEST
from sdpa_cli.report.outcomes import Outcome
from sdpa_cli.report.runfolder import MARKER

RESULTS = "results.json"
# The first line of every index.md sdpa writes: how a study command recognises a batch
# folder whose report it must keep true.
INDEX_TITLE = "# sdpa: every experiment"


@dataclass(frozen=True)
class Entry:
    """One experiment of a batch report: its run folder as found on disk, and how this
    batch's run of it ended when the batch ran it."""
    name: str
    status: str  # passed, failed (a check failed), error (could not run), skipped, unreadable
    result: Result | None = None
    manifest: Mapping[str, Any] = field(default_factory=dict)
    figures: tuple[str, ...] = ()  # PNG files present in the run folder, in figure order
    spec_file: str | None = None  # the spec this batch ran, if it ran it
    error: str | None = None
    title: str = ""
    source: str = ""

    @property
    def anchor(self) -> str:
        return "x-" + self.name.lower().replace(".", "-").replace("_", "-")

    @property
    def document(self) -> str:
        """The title of the document this experiment reproduces ("" if none of ours)."""
        doc = document_of(self.source)
        return doc.title if doc else ""

    def order(self) -> tuple[int, int, str]:
        return (*place(self.source), self.name)


def is_run_folder(folder: Path) -> bool:
    return (folder / RESULTS).is_file() and (folder / MARKER).is_file()


def is_batch_folder(root: Path) -> bool:
    """Whether `root` holds a batch index sdpa wrote and nobody changed since (so sdpa may
    rewrite it): its batch manifest lists index.md and report.html unchanged."""
    if not (root / manifest.BATCH_NAME).is_file() or \
            manifest.batch_file_problem(root, ("index.md", "report.html")):
        return False
    index = root / "index.md"
    try:
        with index.open(encoding="utf-8") as f:
            first = f.readline().rstrip("\n")
    except (OSError, UnicodeDecodeError):
        return False
    return first == INDEX_TITLE and (root / "report.html").is_file()


def _digested(path: Path) -> bool:
    """Whether a manifest carries its own digest (an sdpa before it wrote a looser shape)."""
    try:
        doc = ownfiles.parse(path)
    except (OSError, ValueError):
        return True  # let read() say why in one line
    return not isinstance(doc, dict) or SELF_DIGEST in doc


def _read(folder: Path) -> Entry:
    try:
        doc = ownfiles.read(folder / RESULTS, "result", shown=f"{folder.name}/{RESULTS}")
        manifest = ownfiles.read(folder / MARKER, "manifest", shown=f"{folder.name}/{MARKER}") \
            if _digested(folder / MARKER) else ownfiles.parse(folder / MARKER)
        result = Result.from_json(doc)
    except InputError as e:  # damaged: listed as unreadable, with the field and what it needs
        return Entry(folder.name, "unreadable", error=e.lines()[0])
    except (OSError, ValueError) as e:
        return Entry(folder.name, "unreadable", error=f"{RESULTS} or {MARKER} cannot be read: "
                     f"{type(e).__name__}")
    figures = tuple(f"{f.name}.png" for f in result.figures
                    if (folder / f"{f.name}.png").is_file())
    if "layout" not in doc:  # written before results.json named its figures: every PNG
        figures = tuple(sorted(p.name for p in folder.glob("*.png")))
    return Entry(folder.name, result.status, result, manifest,
                 figures, title=result.title, source=result.source)


def members(root: Path, outcomes: Sequence[Outcome] = ()) -> set[str] | None:
    """The run folders of `root` its batch report describes: those its batch manifest lists
    and this batch's own (outcomes written into `root`). None: every run folder there (a
    folder without that list, rebuilt with no batch run: what sdpa always did). A run folder
    written there by a study command (a scratch run) is not listed, so it never joins the
    report; `sdpa run SPEC --out ROOT` adds a spec's run on purpose."""
    listed = manifest.batch_experiments(root)
    ours = {o.planned.target.name for o in outcomes
            if o.planned.target.parent.resolve() == root.resolve()}
    if listed is None:
        if not ours or (root / manifest.BATCH_NAME).is_file():
            return None  # nothing to go by (or an older sdpa's report): every run folder
        return ours  # a first batch here: its own runs, not what was lying beside them
    return listed | ours


def entries(root: Path, outcomes: Sequence[Outcome] = (),
            chosen: set[str] | None = None) -> list[Entry]:
    """Every sdpa run folder in `root` (only those in `chosen`, when given), plus this
    batch's runs that left none (errors, skipped), sorted as the documents tell their
    story: by document, then section."""
    found: dict[str, Entry] = {}
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            if chosen is not None and folder.name not in chosen:
                continue
            if folder.is_dir() and not folder.name.startswith(".") and is_run_folder(folder):
                found[folder.name] = _read(folder)
    for o in outcomes:
        if o.planned.target.parent.resolve() != root.resolve():
            continue  # written elsewhere (--out): not part of this folder's report
        name = o.planned.target.name
        spec = o.planned.spec
        seen = found.get(name)
        if o.status in ("error", "skipped"):
            # The folder, if any, still holds an earlier run: show it, and say so.
            base = seen or Entry(name, o.status, title=spec.title or name, source=spec.source)
            found[name] = Entry(base.name, o.status, base.result, base.manifest, base.figures,
                                str(o.planned.file), o.error, base.title, base.source)
        elif seen is not None:
            found[name] = Entry(seen.name, seen.status, seen.result, seen.manifest,
                                seen.figures, str(o.planned.file), seen.error, seen.title,
                                seen.source)
    return sorted(found.values(), key=Entry.order)


def by_document(items: Sequence[Entry]) -> list[tuple[str, str, list[Entry]]]:
    """(anchor, heading, entries) per document, in DOCUMENTS order; others last."""
    groups: list[tuple[str, str, list[Entry]]] = []
    for e in items:
        doc = document_of(e.source)
        if doc is not None:  # named as every table and line names it: one title each
            key = f"doc-{DOCUMENTS.index(doc)}"
            heading = doc.label
        else:
            key, heading = "doc-other", "Other experiments"
        if not groups or groups[-1][0] != key:
            groups.append((key, heading, []))
        groups[-1][2].append(e)
    return groups


def git_commit(start: Path) -> str | None:
    """HEAD of the git repository holding `start`, read from .git without a git binary
    (worktrees and packed refs included); None when there is none or it cannot be read."""
    try:
        for folder in (start, *start.parents):
            dot = folder / ".git"
            if dot.is_file():  # a worktree: "gitdir: PATH"
                text = dot.read_text(encoding="utf-8").strip()
                if not text.startswith("gitdir:"):
                    return None
                gitdir = (folder / text[len("gitdir:"):].strip()).resolve()
            elif dot.is_dir():
                gitdir = dot
            else:
                continue
            return _head(gitdir)
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _head(gitdir: Path) -> str | None:
    head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
    if not head.startswith("ref:"):
        return head if _is_sha(head) else None
    ref = head[len("ref:"):].strip()
    common = gitdir
    if (gitdir / "commondir").is_file():
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    for base in (gitdir, common):
        loose = base / ref
        if loose.is_file():
            sha = loose.read_text(encoding="utf-8").strip()
            return sha if _is_sha(sha) else None
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and _is_sha(parts[0]):
                return parts[0]
    return None


def _is_sha(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)
