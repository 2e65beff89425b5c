"""OpenMP's wait policy in a process where hdmlp's staging workers take the cores.

PyTorch (and other libraries built on GNU OpenMP) run their CPU operations on a pool of
OpenMP threads. After each parallel operation those threads spin, by default for about
300,000 iterations (a few milliseconds), waiting for the next one: a good bet on a core of
their own. In a training process whose cores also run hdmlp's staging workers it is a bad
one. A thread that spins takes a core from a worker, and one that waits at the end of an
operation for a partner the workers kept off the core spins too. On the 2-core reference
machine a loop that sums each [64, 3, 224, 224] batch (``float(x.sum())``, bench-peers'
consumer) spent 0.085 CPU seconds per 1,000 images spinning: more than the sum itself
(benchmarks/results/cpu_gap.md).

So ``import hdmlp`` sets ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep at once; the next
operation wakes them) when all of these hold:

- the environment does not set ``OMP_WAIT_POLICY`` (a value you set is kept, ``ACTIVE``
  included);
- ``HDMLP_OMP_WAIT_POLICY`` is not ``keep`` (which leaves the environment alone);
- no OpenMP runtime is loaded in the process yet: a runtime reads the variable once, when it
  loads, so the setting takes effect only when ``hdmlp`` is imported before ``torch``. After
  that nothing is changed.

Child processes inherit the variable, as they inherit any other. See docs/config.md, "CPU
budget".
"""
from __future__ import annotations

import os

__all__ = ["openmp_runtime_loaded", "prefer_passive_wait"]

_RUNTIMES = ("libgomp", "libiomp5", "libomp.so", "libomp-")


def openmp_runtime_loaded(maps_path: str = "/proc/self/maps") -> bool:
    """Whether an OpenMP runtime (GNU, Intel or LLVM) is mapped into this process; True where it
    cannot be told (no /proc), so that nothing is changed then."""
    try:
        with open(maps_path) as f:
            maps = f.read()
    except OSError:
        return True
    return any(name in maps for name in _RUNTIMES)


def prefer_passive_wait(environ: dict | None = None, maps_path: str = "/proc/self/maps") -> bool:
    """Sets OMP_WAIT_POLICY=PASSIVE under the conditions above; True when it did."""
    env = os.environ if environ is None else environ
    if "OMP_WAIT_POLICY" in env or env.get("HDMLP_OMP_WAIT_POLICY", "").lower() == "keep":
        return False
    if openmp_runtime_loaded(maps_path):
        return False
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return True
