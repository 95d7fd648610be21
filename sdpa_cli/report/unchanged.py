"""Skip what has not changed (DVC's `repro`): a run folder is kept when its manifest records
exactly this spec, this sdpa source, these library versions and these figure settings, it
measured something (a skipped run is never kept), and the files it read are as they were."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sdpa_cli
from sdpa_cli.errors import InputError, Problem
from sdpa_cli.framework.result import AuditEntry, Check, audit_from_json
from sdpa_cli.io.digest import input_sha256
from sdpa_cli.report import manifest, ownfiles

MANIFEST = "manifest.json"


@functools.cache
def code_digest() -> str:
    """sha256 over every .py file of the installed sdpa_cli package (path and bytes, sorted):
    any change to sdpa's own code changes it. Computed once per process (a few ms)."""
    root = Path(sdpa_cli.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in rel:
            continue
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def input_digest(spec_json: Mapping[str, Any]) -> str:
    """sha256 of the validated spec as it entered the study (canonical JSON)."""
    text = json.dumps(spec_json, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def render_settings(plots: bool, svg: bool, dpi: int | None) -> dict[str, Any]:
    """What decides which figure files a run writes (none of it changes a number)."""
    return {"plots": plots, "svg": svg, "dpi": dpi}


def reuse_fields(input_spec: Mapping[str, Any] | None, plots: bool, svg: bool,
                 dpi: int | None) -> dict[str, Any]:
    """The manifest fields kept_status compares (no input_sha256 without the input spec)."""
    out: dict[str, Any] = {"code_sha256": code_digest()}
    if input_spec is not None:
        out["input_sha256"] = input_digest(input_spec)
    out["render"] = render_settings(plots, svg, dpi)
    return out


def kept_status(folder: Path, *, input_sha256: str, render: Mapping[str, Any],
                versions: Mapping[str, Any]) -> str | None:
    """The recorded status ("passed"/"failed") when the folder may be kept as it is; None
    when anything differs, is missing, or was not recorded (then the spec runs again)."""
    try:
        raw = ownfiles.parse(folder / MANIFEST)
    except (OSError, ValueError):
        return None  # not sdpa's: check_replaceable has refused it already
    if not isinstance(raw, dict) or manifest.SELF_DIGEST not in raw:
        return None  # written by an sdpa before the digest: its fields cannot vouch, run again
    doc = ownfiles.read(folder / MANIFEST, "manifest")  # damaged: exit 2, one line
    same = (doc.get("code_sha256") == code_digest()
            and doc.get("input_sha256") == input_sha256
            and doc.get("render") == dict(render)
            and doc.get("versions") == dict(versions))
    if not same or manifest.run_folder_problem(folder):  # a file missing, added or changed
        return None
    why = manifest.own_fields_problem(folder)  # an edited status, a digest that differs
    if why:
        raise InputError(Problem(f"{why}; the run folder is damaged: move it away or delete it",
                                 file=str(folder)))
    if doc["status"] == "skipped":  # it measured nothing: what was missing may be here now
        return None
    if read_files_changed(folder):  # what the run read (a model, a text) is not as it was
        return None
    return str(doc["status"])


def read_files_changed(folder: Path) -> bool:
    """Whether a file the run read (results.json's `inputs.files`: a checkpoint's, its
    tokenizer's, a text's, each with its size and sha256) is gone or differs now; a run that
    read no file of its own records none."""
    try:
        doc = ownfiles.read(folder / "results.json", "result")
    except (OSError, InputError):
        return True
    inputs = doc.get("inputs")
    files = inputs.get("files") if isinstance(inputs, dict) else None
    if not isinstance(files, list):
        return False
    try:
        return any(not isinstance(f, dict)
                   or Path(str(f.get("path"))).stat().st_size != f.get("bytes")
                   or input_sha256(Path(str(f.get("path")))) != f.get("sha256") for f in files)
    except OSError:
        return True


def recorded(folder: Path) -> tuple[tuple[Check, ...], tuple[AuditEntry, ...]]:
    """The checks and audit a kept run folder's results.json holds (for JUnit, annotations)."""
    try:
        doc = ownfiles.read(folder / "results.json", "result")
        checks = tuple(Check(str(c["name"]), bool(c["passed"]), str(c["detail"]),
                             tuple(str(f) for f in c.get("fields") or ()))
                       for c in doc.get("checks", []))
        audit = tuple(audit_from_json(a) for a in doc.get("audit", []))
    except (OSError, InputError):
        return (), ()
    return checks, audit
