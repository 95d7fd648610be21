"""sdpa: measure, show and check why attention divides QKᵀ by √d_k."""

__version__ = "0.1.0"

# Started as `python -m sdpa_cli` (argv[0] is "-m" while the module is found) or as the `sdpa`
# script: take over Ctrl-C before the slow imports, so an early one is exit 130, not a traceback.
import _signal  # builtin: no import time, unlike signal.py (enum)
import os as _os
import sys as _sys


def _interrupted_early(signum: int, frame: object) -> None:
    _os.write(2, b"sdpa: interrupted\n")  # nothing is written yet: nothing to clean up
    _os._exit(130)


if _sys.argv[:1] == ["-m"] or _os.path.basename(_sys.argv[0] if _sys.argv else "") == "sdpa":
    if _signal.getsignal(_signal.SIGINT) is not _signal.SIG_IGN:
        _signal.signal(_signal.SIGINT, _interrupted_early)  # until process.install() below
    from sdpa_cli import process as _process

    _process.install()


import importlib as _importlib  # noqa: E402

from sdpa_cli.studies import STUDIES as _STUDIES  # noqa: E402  # the registry's names: a dict, no study


def __getattr__(name: str) -> object:
    """`import sdpa_cli as sdpa; sdpa.variance(dims=[3, 100], seed=74)`: the Python API
    (sdpa_cli.api), loaded only when used so the command line starts light."""
    if name not in API and name.replace("_", "-") not in _STUDIES:
        raise AttributeError(f"module 'sdpa_cli' has no attribute {name!r}")
    return getattr(_importlib.import_module("sdpa_cli.api"), name)


# What `import sdpa_cli as sdpa` offers besides one function per study.
API = ("run_spec", "compare", "Result", "SpecError", "Row")
