"""The runner every bad-input corpus shares: exit 2, one clean line, nothing written or lost."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Bad:
    id: str
    argv: list[str]
    says: str  # a fragment the one line must contain
    files: dict[str, str | bytes] = field(default_factory=dict)
    where: str | None = None  # the line must start with this (file:line:col, or the flag)
    links: dict[str, str] = field(default_factory=dict)  # symlink name → its target
    make: Callable[[Path], Any] | None = None  # builds what the case needs in the workdir


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
    r = sdpa(*bad.argv)
    lines = r.err.strip().splitlines()
    assert r.code == 2, r.err
    assert len(lines) == 1, r.err
    line = lines[0]
    assert "Traceback" not in r.err and r.out == ""
    assert len(line) < 400, line  # one readable line, never a 5000-digit echo
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in line), repr(line)
    assert "set_int_max_str_digits" not in line and "internal error" not in line
    assert bad.says in line, line
    if bad.where is not None:
        assert line.startswith(bad.where), line
    assert snapshot(workdir) == before  # nothing written, nothing lost, links kept
    return line
