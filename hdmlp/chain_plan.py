"""Where a Job's transform chain runs: :func:`plan_chain` decides it once, as a :class:`ChainPlan`.

The chain a Job is given splits into hdmlp's C++ ops, run by the staging workers, and Python
callables after them, run by worker processes (:mod:`hdmlp.python_chain`). With a device
the workers' part may end early: an ``ImgDecode(device=...)`` chain hands over file bytes
that the device decodes (:mod:`hdmlp.device.decode`); another C++ chain may stop at 8-bit
images, its ``ToTensor``/``Normalize`` tail computed on the device (the hand-off,
:func:`hdmlp.device.plan_hand_off`). The staging threads and the cores they leave to the
training process follow from the chain (:mod:`hdmlp.cpu_budget`).

A device given after the Job was made (a loader's ``device=``) makes a new plan through the
same function. Nothing here holds state; a plan is a frozen value.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any

from hdmlp.cpu_budget import resolve_cpu_budget
from hdmlp.python_chain import PythonChain, split_chain
# Loaded with the Job, so that the chain split knows hdmlp's ops by name (transform_base.cpp_op).
from hdmlp.transforms import pipeline_specs

if TYPE_CHECKING:
    from hdmlp.job_arguments import JobOptions


@dataclasses.dataclass(frozen=True)
class ChainPlan:
    """Where each part of a Job's chain runs.

    Attributes:
        python_chain: the Python part (its C++ ops and callables), or None.
        specs: the C++ chain the staging workers run, as ``(op, args)`` specs; empty when they hand
            over file bytes.
        decode_chain: the device's decoding plan for ``ImgDecode(device=...)``, else None.
        device: where batches are delivered (a ``torch.device``), or None: host buffers.
        tail: what the device computes after the workers' 8-bit hand-off (a ``FloatTail``), or None.
        pin_memory: whether the batch buffers are to be page-locked.
        staging_threads: the staging workers the core starts (0: the configuration's threads).
        spare_cores: the CPUs the configuration's ``threads = "auto"`` leaves to the training process.
    """

    python_chain: PythonChain | None = None
    specs: list = dataclasses.field(default_factory=list)
    decode_chain: Any = None
    device: Any = None
    tail: Any = None
    pin_memory: bool = False
    staging_threads: int = 0
    spare_cores: int = 0


def plan_chain(options: JobOptions, device: Any) -> ChainPlan:
    """The plan of ``options``' chain delivering to ``device`` (None: host buffers).

    Raises ValueError / TypeError for a chain that cannot run where it is asked to.
    """
    transforms = options.transforms
    python_chain = split_chain(transforms)
    items = getattr(transforms, "transforms", transforms)
    devices = [getattr(t, "device", None) for t in items] if isinstance(items, (list, tuple)) else []
    if python_chain is not None and any(d is not None for d in devices):
        raise ValueError("ImgDecode(device=...) with Python transforms: the device decodes for chains of hdmlp "
                         "ops only (docs/gpu.md); decode on the CPU (ImgDecode()) before Python callables")
    specs = []
    if transforms is not None and python_chain is None:
        specs = pipeline_specs(transforms)
        if not specs:
            raise ValueError("transforms is an empty list: pass None to receive each file's bytes, or a chain "
                             "starting with hdmlp.transforms.ImgDecode()")
        if getattr(items[0], "device", None) is not None:
            return _decoding_plan(options, specs, items[0], device)
    plan = ChainPlan(python_chain, specs, pin_memory=bool(options.pin_memory))
    if device is None:
        if options.handoff is not None:
            raise ValueError(f"handoff={options.handoff!r} needs a device: it says what the workers hand to the "
                             "device")
    else:
        from hdmlp.device import plan_hand_off, resolve_device
        target = resolve_device(device)
        hand_off = plan_hand_off(specs, target, options.handoff, options.pin_memory)
        plan = ChainPlan(python_chain, hand_off.specs, None, target, hand_off.tail, hand_off.pin_memory,
                         spare_cores=hand_off.spare_cores)
    return _with_cpu_budget(options, plan)


def _decoding_plan(options: JobOptions, specs: list, decode: Any, device: Any) -> ChainPlan:
    """``ImgDecode(device=...)``: the workers hand over file bytes; the device decodes and runs the chain."""
    from hdmlp.device import resolve_device
    from hdmlp.device.decode import plan_device_decode
    if options.on_error != "raise":
        raise ValueError(f"on_error={options.on_error!r} with ImgDecode(device=...): a bad image raises ValueError "
                         "naming it; use on_error='raise', or ImgDecode() on the CPU to skip bad images")
    decode_chain = plan_device_decode(specs, decode.cpu_share, decode.decoder)
    decoding = resolve_device(decode.device, "ImgDecode(device=...)")
    if device is not None and resolve_device(device) != decoding:
        raise ValueError(f"device={device!r} differs from ImgDecode(device={decode.device!r}): the "
                         "batches arrive where they are decoded; give one of them")
    if options.handoff is not None:
        raise ValueError(f"handoff={options.handoff!r} with ImgDecode(device=...): the device decodes, so there is no "
                         "hand-off to choose; leave handoff unset")
    if options.pin_memory:
        warnings.warn("hdmlp: pin_memory=True has no effect with ImgDecode(device=...) (the workers hand over "
                      "file bytes)", RuntimeWarning, stacklevel=4)
    return _with_cpu_budget(options, ChainPlan(None, [], decode_chain, decoding))


def _with_cpu_budget(options: JobOptions, plan: ChainPlan) -> ChainPlan:
    staging_threads, spare_cores = resolve_cpu_budget(options.cpu_budget, options.num_workers, plan.spare_cores,
                                                      bool(plan.specs))
    return dataclasses.replace(plan, staging_threads=staging_threads, spare_cores=spare_cores)
