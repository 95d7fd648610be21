"""Where the shipped experiment specs are, from a checkout or from an installed wheel."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def shipped_experiments() -> Path | None:
    """The specs that come with sdpa: the copy inside the wheel, or the checkout's folder."""
    for candidate in (_HERE / "_experiments", _HERE.parent / "experiments"):
        if candidate.is_dir():
            return candidate
    return None


def default_experiments() -> Path | None:
    """`experiments/` in the current folder if there is one, else the shipped specs."""
    local = Path("experiments")
    return local if local.is_dir() else shipped_experiments()


# Specs in a subfolder of this name run only when that folder or file is named: long runs
# (e.g. experiments/train/slow/lr-sweep.yaml) stay out of a plain `sdpa run`.
SLOW = "slow"


def spec_files(folder: Path) -> list[Path]:
    """Every *.yaml / *.yml below a folder, in a stable (sorted) order, leaving out those in
    a `slow/` subfolder below it (name that folder to run them)."""
    return sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()
                  and SLOW not in p.relative_to(folder).parts[:-1])
