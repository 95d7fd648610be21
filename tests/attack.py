"""The runner every bad-input corpus shares: exit 2, one clean line, nothing written or lost."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Bad:
    id: str
    argv: list[str]
    says: str  # a fragment the one line must contain
    files: dict[str, str | bytes] = field(default_factory=dict)
    where: str | None = None  # the line must start with this (file:line:col, or the flag)
    links: dict[str, str] = field(default_factory=dict)  # symlink name → its target
    make: Callable[[Path], Any] | None = None  # builds what the case needs in the workdir
    env: dict[str, str] = field(default_factory=dict)  # environment variables for the run


def peak_run(argv: list[str], cwd: Path, timeout: float
             ) -> tuple[subprocess.CompletedProcess[str], int]:
    """`sdpa argv` in a process of its own, and that process's peak memory (kB)."""
    # VmHWM: the process's own peak (ru_maxrss carries a large parent's over exec)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from sdpa_cli.cli.entry import run; "
         "code = run(sys.argv[1:]); "
         "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]); "
         "sys.exit(code)", *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        check=False)
    return done, int(done.stdout.split()[-1])


def spec(text: str | bytes, name: str = "s.yaml") -> dict[str, str | bytes]:
    """The files of a case whose one spec file is `text`."""
    return {name: text}


def tampered(written: Path, work: Path, change: Callable[[dict], object] | None = None,
             text: str | None = None) -> Path:
    """R and R2 copied from what sdpa wrote (conftest's `written`) into `work`, R2's
    results.json changed in place by `change` or replaced by `text`; its path."""
    shutil.copytree(written / "R", work / "R")
    shutil.copytree(written / "R", work / "R2")
    path = work / "R2" / "results.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    elif change is not None:
        doc = json.loads(path.read_text(encoding="utf-8"))
        change(doc)
        path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def snapshot(root: Path) -> dict[str, object]:
    """Every path under root with its bytes (or its link target): nothing written or lost."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_file():
                out[rel] = p.read_bytes()
            else:
                out[rel] = "dir"
    return out


def prepare(workdir: Path, bad: Bad) -> None:
    for name, content in bad.files.items():
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for name, target in bad.links.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).symlink_to(target)
    if bad.make is not None:
        bad.make(workdir)


def check(sdpa: Callable[..., Any], workdir: Path, bad: Bad) -> str:
    """Run one case in `workdir` and check the refusal; the line, for further checks."""
    prepare(workdir, bad)
    before = snapshot(workdir)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in bad.env.items():
            mp.setenv(key, value)
        r = sdpa(*bad.argv)
    lines = r.err.strip().splitlines()
    assert r.code == 2, r.err
    assert len(lines) == 1, r.err
    line = lines[0]
    assert "Traceback" not in r.err and r.out == ""
    # one readable line, never a 5000-digit echo: bounded beyond the place it names, which is
    # as long as the name the user gave
    assert len(line.removeprefix(bad.where or "")) < 400, line
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in line), repr(line)
    assert "set_int_max_str_digits" not in line and "internal error" not in line
    assert bad.says in line, line
    if bad.where is not None:
        assert line.startswith(bad.where), line
    assert snapshot(workdir) == before  # nothing written, nothing lost, links kept
    return line
