"""The cores hdmlp may use on this rank: ``Job(cpu_budget=...)`` and its default.

On a GPU node the CPU decides how many images per second reach the GPU, and the training
thread needs a core of its own to launch the GPU's kernels on time (SPDL's authors measured
loader threads in the training process slowing its launches). hdmlp's CPU-bound work is its
staging workers, which decode and transform the C++ chain; the budget is their number:

``cpu_budget=N``
    N staging workers (1 to 1024), whatever the configuration's ``threads`` of storage
    class 0 says: hdmlp takes N cores of this rank, the training process keeps the rest.
    Not together with ``num_workers`` (the same knob by its thread count).
``cpu_budget=None`` (the default)
    The configuration decides (``threads = "auto"``: the CPUs this process may use, split
    between the ranks of a node that share them). With a C++ chain, one of them is left to
    the training thread when the batches go to a GPU: ``device="cuda..."``, or the machine
    is a GPU node (``/dev/nvidiactl`` or ``/dev/kfd`` exists), where a loop that moves the
    batches itself (``x.cuda()``) is the rule. On a machine without a GPU every CPU decodes:
    the training loop's share of a core is small there, and idling a core would cost more.

How well the budget fits shows per epoch in ``job.metrics()``'s data readiness
(:mod:`hdmlp.readiness`): ``waiting == "loader"`` (the loader waits for the GPU) leaves cores
to spare, ``"consumer"`` asks for more. See docs/gpu.md, "CPU budget and data readiness".
"""
from __future__ import annotations

import os
from typing import Any

from hdmlp import _core

__all__ = ["gpu_node", "resolve_cpu_budget", "usable_cpus"]

_GPU_DEVICE_FILES = ("nvidiactl", "kfd")  # NVIDIA's driver, AMD's ROCm


def gpu_node(dev: str = "/dev") -> bool:
    """Whether this machine has a GPU driver's device file (NVIDIA or AMD); it does not touch CUDA."""
    return any(os.path.exists(os.path.join(dev, name)) for name in _GPU_DEVICE_FILES)


def usable_cpus() -> int:
    """The CPUs this process may use (its affinity, within a cgroup's CPU quota), as ``threads = "auto"``
    counts them."""
    return _core.cpu_budget()["usable_cpus"]


def resolve_cpu_budget(cpu_budget: Any, num_workers: int | None, device_spare_cores: int, has_chain: bool,
                       dev: str = "/dev") -> tuple[int, int]:
    """(staging_threads, spare_cores) for the core: staging_threads 0 lets the configuration decide,
    and spare_cores are the CPUs its ``threads = "auto"`` leaves to the training process."""
    if cpu_budget is not None:
        if isinstance(cpu_budget, bool) or not isinstance(cpu_budget, int):
            raise TypeError(f"cpu_budget must be an int (the cores hdmlp's staging workers may use on this rank) "
                            f"or None, got {type(cpu_budget).__name__} {cpu_budget!r}")
        if not 1 <= cpu_budget <= 1024:
            raise ValueError(f"cpu_budget must be from 1 to 1024 cores, got {cpu_budget}")
        if num_workers is not None:
            raise ValueError(f"cpu_budget={cpu_budget} and num_workers={num_workers} both set the staging "
                             "workers: give one of them")
        return cpu_budget, 0
    spare = device_spare_cores
    if has_chain and gpu_node(dev):
        spare = max(spare, 1)
    return num_workers or 0, spare
