"""manifest.json: what ran, with what, when, and the hash of every file it wrote."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from sdpa_cli import __version__
from sdpa_cli.numerics.rng import BIT_GENERATOR


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def spec_digest(spec: dict[str, Any]) -> str:
    """sha256 of the resolved spec in canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256_bytes(canonical.encode())


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
        "sdpa_version": __version__,
        "argv": argv,
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
    return doc
