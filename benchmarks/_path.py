"""The path bootstrap of ``python benchmarks/<script>.py``: a script imports this first (``import _path``).

The checkout goes first on sys.path, so that ``benchmarks`` and its lab import as a package
(benchmarks/__init__.py then moves it back behind an installed hdmlp), and benchmarks/ itself
goes last, where its modules shadow no other; a process that imports the script again (a
spawned worker, with this sys.path) still finds this file. ``python -m benchmarks`` needs none of it.
"""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_repo = os.path.dirname(_here)
sys.path[:] = [_repo] + [p for p in sys.path if os.path.abspath(p or os.curdir) not in (_here, _repo)] + [_here]
