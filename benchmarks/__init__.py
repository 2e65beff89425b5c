"""hdmlp's benchmarks: ``python -m benchmarks <scenario>`` (see benchmarks/README.md).

The older scripts in this folder (prefetch.py, index_scan.py, ...)
still run on their own as ``python benchmarks/<script>.py``.
"""
import glob as _glob
import os as _os
import sys as _sys


def _use_installed_hdmlp() -> None:
    # `python -m benchmarks` puts the checkout first on sys.path, where hdmlp/ has no
    # compiled _core; move it to the end so that `import hdmlp` finds the installed package
    # while `benchmarks` stays importable (hdmlp's Python transform workers import
    # the main module, benchmarks.runner, with this sys.path).
    repo = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    if "hdmlp" in _sys.modules or _glob.glob(_os.path.join(repo, "hdmlp", "_core*")):
        return
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != repo] + [repo]


_use_installed_hdmlp()
