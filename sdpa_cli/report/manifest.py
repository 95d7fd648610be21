"""manifest.json: what ran, with what, when, each file's hash, and the marker that makes it ours."""

from __future__ import annotations

import functools
import json
import os
import platform
import stat
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from sdpa_cli import __version__, schemas
from sdpa_cli.io.digest import sha256_bytes, sha256_file
from sdpa_cli.io.jsonio import MAX_DEPTH, JsonError, load_json
from sdpa_cli.numerics.rng import BIT_GENERATOR
from sdpa_cli.schemas.validate import Mismatch, check, finite

# A folder is sdpa's to replace only when its manifest carries this marker and schema and
# lists exactly the files that are there, byte for byte.
KIND = "sdpa-run-folder"
BATCH_KIND = "sdpa-batch-folder"
SCHEMA_VERSION = 1
NAME = "manifest.json"
BATCH_NAME = "sdpa-batch.json"  # a batch folder's own manifest (index.md, report.html)
_MAX_MANIFEST = 1 << 22  # bytes; sdpa's manifests are a few kilobytes


def spec_digest(spec: dict[str, Any]) -> str:
    """sha256 of the resolved spec in canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256_bytes(canonical.encode())


@functools.cache  # one metadata read per process (each was 3 ms, a sixth of a small run)
def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_commit(cwd: Path) -> str | None:
    """HEAD of the repository holding cwd, if any (and git is installed)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) == 40 else None


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def versions() -> dict[str, str | None]:
    """The library versions a run used (a change reruns the spec under `sdpa run`)."""
    return {
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "matplotlib": _version("matplotlib"),
        "rich": _version("rich"),
        "pydantic": _version("pydantic"),
        "pyyaml": _version("PyYAML"),
        "click": _version("click"),
    }


def build(
    *, spec: dict[str, Any], argv: list[str], started: float, ended: float, status: str,
    workers: int, files: list[Path], reuse: dict[str, Any] | None = None,
) -> dict[str, Any]:
    doc = {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "sdpa_version": __version__,
        "argv": [printable_arg(a) for a in argv],
        "study": spec.get("study"),
        "name": spec.get("name"),
        "spec": spec,
        "spec_sha256": spec_digest(spec),
        "seed": {"entropy": spec.get("seed"), "bit_generator": BIT_GENERATOR,
                 "spawn_key": "(index, block)"},
        "workers": workers,
        "versions": versions(),
        "platform": platform.platform(),
        "git_commit": git_commit(Path.cwd()),
        "started": iso(started),
        "ended": iso(ended),
        "duration_s": round(ended - started, 3),
        "status": status,
        "outputs": [
            {"path": p.name, "bytes": p.stat().st_size, "sha256": sha256_file(p)}
            for p in sorted(files, key=lambda p: p.name)
        ],
    }
    # What `sdpa run` compares to keep an unchanged run folder (report/unchanged.py):
    # code_sha256, input_sha256 and render, appended after the fields above.
    doc.update(reuse or {})
    # Last: a digest over every field above, so that an edit to the manifest itself (a
    # status turned from "failed" to "passed") shows; its listed files carry their own.
    doc[SELF_DIGEST] = self_digest(doc)
    return doc


SELF_DIGEST = "manifest_sha256"


def self_digest(doc: dict[str, Any]) -> str:
    """sha256 of a manifest's canonical JSON, its own digest field left out."""
    return spec_digest({k: v for k, v in doc.items() if k != SELF_DIGEST})


def printable_arg(arg: str) -> str:
    """An argument as valid UTF-8 text: bytes that were not UTF-8 (kept by Python as lone
    surrogates) are written as \\xNN, so the manifest can always be encoded."""
    return arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def batch_document_from(files: dict[str, bytes], experiments: Sequence[str] | None = None,
                        summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """A batch folder's manifest: its own files (not the run folders, which carry theirs),
    the run folders its report describes (`experiments`, sorted; a scratch run folder
    beside them is not one), and the totals the report shows (`summary`: the audit's counts,
    each claim's verdict). No times in it, so two identical batches give identical bytes."""
    doc: dict[str, Any] = {
        "kind": BATCH_KIND, "schema_version": SCHEMA_VERSION, "sdpa_version": __version__,
        "outputs": [{"path": name, "bytes": len(data), "sha256": sha256_bytes(data)}
                    for name, data in sorted(files.items())]}
    if experiments is not None:
        doc["experiments"] = sorted(set(experiments))
    doc.update(summary or {})
    return doc


def batch_experiments(root: Path) -> set[str] | None:
    """The run folders the batch report in `root` describes, as its manifest lists them;
    None when there is no sdpa batch manifest there or it predates the list (then the report
    describes every run folder, as it did)."""
    doc, _ = _read_json(root / BATCH_NAME)
    if doc is None or _check(doc, BATCH_KIND, BATCH_NAME):
        return None
    names = doc.get("experiments")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return set(names)


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str]:
    """A manifest's content if it is a regular file holding a JSON object, else a reason."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None, f"no {path.name}"
    except OSError as e:
        return None, f"cannot read {path.name}: {e.strerror or e}"
    if not stat.S_ISREG(info.st_mode):
        return None, f"its {path.name} is not a regular file"
    if info.st_size > _MAX_MANIFEST:
        return None, f"its {path.name} is too large to be sdpa's"
    try:
        doc = load_json(path, what=path.name, max_bytes=_MAX_MANIFEST)
    except JsonError as e:
        return None, (f"its {path.name} nests more than {MAX_DEPTH} levels deep, deeper "
                      "than sdpa writes" if e.reason == "depth"
                      else f"its {path.name} is not a JSON document sdpa wrote")
    if not isinstance(doc, dict):
        return None, f"its {path.name} is not a JSON document sdpa wrote"
    return doc, ""


def _listed(doc: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    entries = doc.get("outputs")
    if not isinstance(entries, list):
        return None
    out: dict[str, dict[str, Any]] = {}
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("path"), str)
                and isinstance(e.get("bytes"), int) and isinstance(e.get("sha256"), str)):
            return None
        name = e["path"]
        if name in ("", ".", "..") or "/" in name or "\\" in name or name in out:
            return None
        out[name] = e
    return out


def _file_matches(path: Path, entry: dict[str, Any]) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size != entry["bytes"]:
        return False
    try:
        return sha256_file(path) == entry["sha256"]
    except OSError:
        return False


def _check(doc: dict[str, Any], kind: str, name: str) -> str:
    if doc.get("kind") != kind:
        return f"its {name} has no sdpa marker"
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return f"its {name} has no sdpa schema version"
    if version > SCHEMA_VERSION:
        return f"its {name} has schema {version}, newer than this sdpa knows ({SCHEMA_VERSION})"
    return ""


def run_folder_problem(folder: Path) -> str:
    """'' when `folder` is a run folder sdpa wrote and nobody changed since: its manifest is
    sdpa's (marker and schema) and the files listed are exactly the files there, byte for
    byte. Otherwise why not, for a one-line refusal."""
    doc, why = _read_json(folder / NAME)
    if doc is None:
        return why
    why = _check(doc, KIND, NAME)
    if why:
        return why
    listed = _listed(doc)
    if listed is None:
        return f"its {NAME} does not list its files the way sdpa does"
    try:
        present = {e.name for e in os.scandir(folder)} - {NAME}
    except OSError as e:
        return f"cannot list it: {e.strerror or e}"
    extra = sorted(present - set(listed))
    if extra:
        return f"it holds files sdpa did not write ({_names(extra)})"
    missing = sorted(set(listed) - present)
    if missing:
        return f"files its {NAME} lists are missing ({_names(missing)})"
    changed = sorted(n for n, e in listed.items() if not _file_matches(folder / n, e))
    if changed:
        return f"files were changed since sdpa wrote them ({_names(changed)})"
    return ""


def run_folder_around(path: Path, *, itself: bool = False) -> Path | None:
    """The sdpa run folder that `path` would be written inside (a folder above it whose
    manifest carries sdpa's run marker; `path` itself too with `itself`), or None. A file or
    folder made there changes a run folder sdpa vouches for: its manifest stops matching and
    sdpa would refuse to replace it later."""
    here = Path(os.path.abspath(path))
    for folder in ((here,) if itself else ()) + tuple(here.parents):
        if (folder / NAME).is_file():
            doc, _ = _read_json(folder / NAME)
            if doc is not None and not _check(doc, KIND, NAME):
                return folder
    return None


def report_path_problem(path: Path, batch_files: tuple[str, ...]) -> str:
    """Why a CI report (--junit-xml, --codequality) must not be written at `path`: inside a
    run folder sdpa wrote (an extra file there, or a new manifest.json, would make sdpa
    refuse to replace that folder later), or over a batch folder's own files. '' if it may."""
    folder = path.parent
    around = run_folder_around(path)
    if around is not None:
        where = folder if around == Path(os.path.abspath(folder)) else around
        return f"{where} is an sdpa run folder; write the report outside it"
    if path.name in (*batch_files, BATCH_NAME) and (folder / BATCH_NAME).is_file():
        return f"{path.name} is one of the batch folder's own files; choose another name"
    return ""


def batch_file_problem(root: Path, names: tuple[str, ...]) -> str:
    """'' when every one of `names` in the batch folder `root` is absent, or is listed in the
    batch manifest sdpa wrote there and unchanged since. Otherwise why not."""
    present = [n for n in names if os.path.lexists(root / n)]
    if not present:
        return ""
    doc, why = _read_json(root / BATCH_NAME)
    if doc is None:
        return f"{_names(present)} {'is' if len(present) == 1 else 'are'} not sdpa's ({why})"
    why = _check(doc, BATCH_KIND, BATCH_NAME) or _schema_problem(doc, "batch-manifest") or \
        ("" if _listed(doc) is not None else f"its {BATCH_NAME} does not list files")
    if why:
        return f"{_names(present)} {'is' if len(present) == 1 else 'are'} not sdpa's ({why})"
    listed = _listed(doc) or {}
    changed = [n for n in present if n not in listed or not _file_matches(root / n, listed[n])]
    if changed:
        return (f"{_names(changed)} {'was' if len(changed) == 1 else 'were'} not written by sdpa "
                "or changed since")
    return ""


def _schema_problem(doc: dict[str, Any], schema: str) -> str:
    """'' when `doc` fits sdpa's schema of that name, else the field and what it needed."""
    try:
        check(doc, schemas.load(schema))
        finite(doc)
    except Mismatch as e:
        return f"its {e.field} is not what sdpa writes (expected {e.expected})"
    return ""


def own_fields_problem(folder: Path) -> str:
    """'' when the manifest of an sdpa run folder (its files already verified) vouches for
    itself: it fits its schema, its digest covers every field, and its status is the one
    results.json records. A manifest of an sdpa before the digest is left to the files'
    check (such a folder is never kept unchanged: kept_status asks for the digest)."""
    doc, why = _read_json(folder / NAME)
    if doc is None:
        return why
    if SELF_DIGEST not in doc:
        return ""
    why = _schema_problem(doc, "manifest")
    if why:
        return f"{NAME}: {why}"
    if doc[SELF_DIGEST] != self_digest(doc):
        return (f"{NAME}: {SELF_DIGEST}: expected the digest of the other fields; they were "
                "edited since sdpa wrote them")
    try:  # up to the output budget, not the manifest's few megabytes
        results = load_json(folder / "results.json", what="results.json")
    except (OSError, ValueError, RecursionError):
        return "results.json: not a JSON document sdpa wrote"
    if not isinstance(results, dict):
        return "results.json: (the document): expected an object"
    why = _schema_problem(results, "result")
    if why:  # listed with its hash, so changed with the manifest: read nothing of it
        return f"results.json: {why}"
    status = results.get("status") or ("passed" if results["passed"] else "failed")
    if doc["status"] != status:
        return (f"{NAME}: status: expected \"{status}\" as results.json records, not "
                f"\"{doc['status']}\"")
    return ""


def _names(names: list[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
