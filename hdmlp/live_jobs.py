"""The Jobs of this process, and the process's exit around them.

Every open Job is registered here: at exit they are closed before MPI is finalised, so
that no loader thread still uses MPI when it goes (a job left open in a global, a
reference cycle or by an exception would otherwise crash the process at exit); in a child
made by ``os.fork()`` the parent's jobs are forgotten, never used. A Job that fails to
start reports its error to the other ranks (which would otherwise wait for it in their
start-up check) and bounds its process's exit. The registry is weak (it keeps no job
alive) and is touched by a Job's constructor, its ``close()`` and the exit and fork hooks,
on the threads that run them; a Job is not shared between threads while it starts or
closes.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

from hdmlp import _core
from hdmlp.argument_checks import wait_seconds

if TYPE_CHECKING:
    from hdmlp.job import Job

ConfigError = _core.ConfigError

# Every open Job of this process (weak: the registry keeps no job alive).
live_jobs: "weakref.WeakSet[Job]" = weakref.WeakSet()
# Cores of jobs inherited by a forked child: never destroyed there (their
# threads are the parent's), see _forget_jobs_in_child.
_inherited_cores: list = []


def _close_live_jobs() -> None:
    for job in list(live_jobs):
        try:
            job.close()
        except Exception:
            pass


# Set when a Job of this process failed to start under MPI: every rank then
# fails, and its exit must not wait on the others for ever.
_startup_failed = False
_EXIT_AFTER_STARTUP_FAILURE_S = 10.0


def _exit_now() -> None:
    sys.stderr.write(f"hdmlp: this rank's exit did not finish within {_EXIT_AFTER_STARTUP_FAILURE_S:g} s after its "
                     "Job failed to start (MPI finalisation waits for the other ranks): leaving without it\n")
    sys.stderr.flush()
    os._exit(1)


def _finalize_mpi_at_exit() -> None:
    if _startup_failed and _core.in_mpi_job():
        # Bounded: a daemon timer ends the process if what follows hangs.
        watchdog = threading.Timer(_EXIT_AFTER_STARTUP_FAILURE_S, _exit_now)
        watchdog.daemon = True
        watchdog.start()
    # A rank leaving on an uncaught exception must not finalise: MPI_Finalize
    # would wait for the other ranks, which wait for it. Abort the whole job
    # instead, so mpirun ends every rank and reports the error. Only where MPI
    # is up: a launcher's rank whose MPI could not be loaded has nothing to
    # abort, and its own error (what to install) stays the last word.
    if getattr(sys, "last_value", None) is not None and _core.mpi_initialized():
        sys.stderr.write("hdmlp: uncaught exception on this rank: aborting the MPI job\n")
        sys.stderr.flush()
        _core.abort_mpi(1)
    _close_live_jobs()
    _core.finalize_mpi()  # aborts instead when a peer was reported stopped


def _forget_jobs_in_child() -> None:
    """After os.fork() in the child: the parent's jobs are not usable here."""
    parent = os.getppid()
    for job in list(live_jobs):
        _inherited_cores.extend(job.forget_in_child(parent))
    live_jobs.clear()


# MPI, when hdmlp initialised it, is finalised once at exit (never when an
# application such as mpi4py initialised it).
atexit.register(_finalize_mpi_at_exit)
os.register_at_fork(after_in_child=_forget_jobs_in_child)


# The C++ core's error kinds, for carrying this rank's error to the others.
_ERROR_KINDS = ((ConfigError, "config"), (FileNotFoundError, "not_found"), (NotADirectoryError, "not_a_directory"),
                (MemoryError, "allocation"), (TypeError, "type"), (ValueError, "invalid_argument"),
                (OSError, "io"))


def report_startup_failure(error: BaseException, timeout_s: Any, world: Any = None, use_mpi: bool = True) -> None:
    """With several ranks: the others raise this rank's error instead of waiting for it.

    Under MPI through the core's start-up check; under torch.distributed through the same
    gather the core's check uses (the same "error" message the core would send).
    """
    mark_startup_failed()
    kind = next((k for t, k in _ERROR_KINDS if isinstance(error, t)), "other")
    message = os.fsencode(str(error))
    try:
        if use_mpi and _core.in_mpi_job():
            try:
                timeout = wait_seconds("timeout_s", timeout_s)
            except (TypeError, ValueError):
                timeout = 300.0
            _core.report_startup_failure(kind, message, timeout)
        elif world is not None and world.gather is not None and world.world_size > 1:
            world.gather(b"error\n" + kind.encode() + b"\n" + message)
    except Exception:
        pass  # this rank's own error is what matters here


def mark_startup_failed() -> None:
    """This process's Job failed to start under MPI: its exit must not wait on the other ranks for ever."""
    global _startup_failed
    _startup_failed = True
