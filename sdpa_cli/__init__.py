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
