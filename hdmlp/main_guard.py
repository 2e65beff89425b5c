"""The check that keeps hdmlp out of a worker process that is re-running the training script.

Worker processes started with ``spawn`` or from a ``forkserver`` (hdmlp's Python transform
workers, a torch DataLoader's with those start methods) import the training script again
as ``__mp_main__``. A script without ``if __name__ == '__main__':`` around its training
code then creates a Job in every worker, and under ``mpirun`` each of them would initialise
MPI (Open MPI prints "orte_init failed" on every rank). :func:`check_not_bootstrapping` is
called before anything of hdmlp starts (the Job's constructor, :func:`hdmlp.init_mpi`) and
raises instead, naming the fix, as Python's own multiprocessing does for a process started
during that import. It initialises nothing and reads no environment; nothing here knows MPI.
"""
from __future__ import annotations

import os
import sys

__all__ = ["MainGuardError", "check_not_bootstrapping"]


class MainGuardError(RuntimeError):
    """hdmlp was started in a worker process while it re-ran the training script."""


def check_not_bootstrapping(what: str) -> None:
    """Raises MainGuardError when this process is a worker still importing the main script."""
    # A spawned or forkserver child imports multiprocessing before it runs anything of the parent's, so
    # a process without it is no such child (and `import hdmlp` does not pay for importing it).
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is None:
        return
    process = multiprocessing.current_process()
    # multiprocessing sets this while a spawned or forkserver child imports the parent's main module
    # (spawn.prepare, forkserver's preload); its own "bootstrapping phase" check reads it too.
    if not getattr(process, "_inheriting", False):
        return
    raise MainGuardError(
        f"hdmlp: {what} in a worker process (pid {os.getpid()}) that is re-running the training script: worker "
        "processes (hdmlp's Python transforms, a DataLoader's workers) import the script again, so the script "
        "started its training code there too. Wrap the training code in `if __name__ == '__main__':` (as "
        "PyTorch's DataLoader documentation says for worker processes); hdmlp did not start here (no MPI was "
        "initialised in this process)")
