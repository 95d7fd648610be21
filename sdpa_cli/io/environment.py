"""Limits of the operating system and the environment, checked before anything runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from sdpa_cli.errors import InputError, Problem

# A temporary sibling is `.NAME.tmp-PID-HEX` (or `.probe-`): 1 + 7 + 7 (a PID up to 4194304)
# + 1 + 8 = 24 bytes beside the name itself, which must still fit in one file name.
SIBLING_BYTES = 24
_NAME_MAX, _PATH_MAX = 255, 4096  # Linux's, where pathconf cannot say
# SOURCE_DATE_EPOCH becomes a date in figure metadata: at most the end of year 9999.
_LAST_SECOND = 253402300799


def _pathconf(folder: str, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError):
        return default


def _shown(text: str) -> str:
    return text if len(text) <= 40 else text[:20] + "…" + text[-12:]


def path_problem(path: Path, *, sibling: bool = True) -> str | None:
    """Why `path` cannot be written by sdpa on this system, or None: a component longer than
    the file system's NAME_MAX bytes (the last one with room for its temporary sibling), or a
    whole path longer than PATH_MAX bytes. Each limit is the nearest existing folder's
    (pathconf; file systems differ). The path is walked once, grown as text, so a path of
    2000 folders costs 2000 steps, not 2000²."""
    parts = path.parts
    so_far = ""  # the folders walked, as text
    name_max, path_max = _NAME_MAX, _PATH_MAX
    existing = True  # every folder so far exists: the next one may too
    for i, part in enumerate(parts):
        if existing:
            here = so_far or "."
            if os.path.isdir(here):
                name_max = _pathconf(here, "PC_NAME_MAX", _NAME_MAX)
                path_max = _pathconf(here, "PC_PATH_MAX", _PATH_MAX)
            else:
                existing = False
        size = len(os.fsencode(part))
        room = SIBLING_BYTES if sibling and i == len(parts) - 1 else 0
        most = name_max - room
        if size > most:
            extra = f", {room} of them for its temporary sibling: at most {most}" if room else ""
            return (f"the name {_shown(part)!r} is {size} bytes; a file name may be at most "
                    f"{most + room} bytes on this file system (NAME_MAX){extra}")
        so_far = os.path.join(so_far, part) if so_far else part
    if existing and os.path.isdir(so_far or "."):
        path_max = _pathconf(so_far or ".", "PC_PATH_MAX", _PATH_MAX)
    size = len(os.fsencode(os.path.abspath(path))) + (SIBLING_BYTES if sibling else 0)
    if size >= path_max:
        return (f"the path is {size} bytes long as sdpa writes it; at most {path_max - 1} "
                "(PATH_MAX) on this system: choose a shorter folder")
    return None


def check_path(path: Path, flag: str, *, sibling: bool = True) -> None:
    why = path_problem(path, sibling=sibling)
    if why:
        raise InputError(Problem(why, flag=flag))


def _whole(value: str) -> int | None:
    try:
        return int(value.strip())
    except ValueError:
        return None


def problems() -> list[Problem]:
    """Environment variables that sdpa's libraries read and would fail on, each refused with
    the variable named and what it must be (they used to end as an internal error)."""
    out = []
    env = os.environ
    epoch = env.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        value = _whole(epoch)
        if value is None or not 0 <= value <= _LAST_SECOND:
            out.append(Problem(f"{_shown(epoch)!r} is not a whole number of seconds from 0 to "
                               f"{_LAST_SECOND} (the end of year 9999); figures record it as "
                               "their date", flag="SOURCE_DATE_EPOCH"))
    huge = env.get("NUMPY_MADVISE_HUGEPAGE")
    if huge is not None and _whole(huge) is None:
        out.append(Problem(f"{_shown(huge)!r} is not a whole number (NumPy reads 0 or 1)",
                           flag="NUMPY_MADVISE_HUGEPAGE"))
    backend = env.get("MPLBACKEND")
    if backend:
        try:
            _rcsetup().validate_backend(backend)
        except ValueError:
            out.append(Problem(f"{_shown(backend)!r} is not a backend matplotlib knows; sdpa "
                               "draws its figures off-screen: unset it, or set agg",
                               flag="MPLBACKEND"))
    return out


def _rcsetup() -> Any:
    """matplotlib.rcsetup, imported with MPLBACKEND aside: an import that meets an unknown
    backend fails halfway and leaves a broken matplotlib behind. sdpa draws with Agg
    whatever the variable says (report/figures/style.py), so setting it aside changes no
    figure."""
    if "matplotlib.rcsetup" not in sys.modules:
        saved = os.environ.pop("MPLBACKEND", None)
        try:
            import matplotlib.rcsetup  # noqa: F401 - heavy, so only when MPLBACKEND is set
        finally:
            if saved is not None:
                os.environ["MPLBACKEND"] = saved
    return sys.modules["matplotlib.rcsetup"]


def check() -> None:
    """Raise InputError (exit 2) for every environment variable that would fail a run."""
    found = problems()
    if found:
        raise InputError(found)


def hub_root() -> Path:
    """The Hugging Face cache's hub folder: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/…/hub
    (where `sdpa inspect` looks for a model name and `python -m sdpa_cli.fetch` puts one)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME")
    return Path(home) / "hub" if home else Path.home() / ".cache" / "huggingface" / "hub"
