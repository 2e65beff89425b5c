"""Which device, and what the staging workers write for it.

:func:`plan_hand_off` decides what the workers write. A C++ chain that ends in ``ToTensor()``
(optionally followed by ``Normalize(mean, std)``) is cut there: the workers end it with
``ToUint8()`` (a quarter of the bytes to write, pin and copy), and a :class:`FloatTail` computes
``ToTensor`` and ``Normalize`` on the device, in float32 as the C++ chain does
(``(v / 255 - mean) / std``). ``handoff="float"`` keeps the chain as written. Any other chain
(ending in ``ToUint8``, ``RandomErasing``, Python callables, no transforms) is delivered as it
is, copied.

These are pure functions of their arguments; any thread may call them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["FloatTail", "HandOff", "check_channels_last", "plan_hand_off", "resolve_device"]

_HANDOFFS = ("uint8", "float")


def resolve_device(device: Any, name: str = "device") -> torch.device:
    """``device`` (a str, ``torch.device`` or CUDA index) as a ``torch.device``; a clear error when unusable."""
    if isinstance(device, bool):
        raise TypeError(f"{name} must be a device such as 'cuda:0' or 'cpu', got {device!r}")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(f"{name}={device!r} is not a device torch knows (e.g. 'cuda', 'cuda:0', 'cpu'): "
                         f"{e}") from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{name}={device!r}: torch.cuda is not available on this machine (no CUDA device or "
                               "a CPU-only torch); use device='cpu' to run the same code path without a GPU, or "
                               "leave device unset")
        index = torch.cuda.current_device() if resolved.index is None else resolved.index
        if not 0 <= index < torch.cuda.device_count():
            raise ValueError(f"{name}={device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        resolved = torch.device("cuda", index)
    return resolved


@dataclasses.dataclass(frozen=True)
class FloatTail:
    """``ToTensor()`` and ``Normalize(mean, std)`` (None: no Normalize) on uint8 ``[B, C, H, W]`` device tensors.

    float32 throughout, in the C++ chain's order: ``(v / 255 - mean) / std``, so the values
    equal the workers' within float32 rounding (on the CPU they are the same bits).
    """

    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def apply(self, images: torch.Tensor, constants: dict) -> torch.Tensor:
        out = images.to(torch.float32).div_(255)
        if self.mean is None or self.std is None:
            return out
        key = (out.device, out.shape[1])
        if key not in constants:  # made once per device, on the stream that uses them
            channels = out.shape[1]
            shape = (1, channels, 1, 1)
            mean = torch.tensor(self.mean * (channels if len(self.mean) == 1 else 1), dtype=torch.float32)
            std = torch.tensor(self.std * (channels if len(self.std) == 1 else 1), dtype=torch.float32)
            constants[key] = (mean.view(shape).to(out.device), std.view(shape).to(out.device))
        mean, std = constants[key]
        return out.sub_(mean).div_(std)


@dataclasses.dataclass(frozen=True)
class HandOff:
    """What a job with a device runs: its C++ chain's specs, the tail the device computes, and its
    staging defaults."""

    specs: list
    tail: FloatTail | None
    spare_cores: int
    pin_memory: bool


def plan_hand_off(specs: Sequence[tuple[str, dict]], device: torch.device, handoff: str | None,
                  pin_memory: bool | None) -> HandOff:
    """The hand-off for a C++ chain's ``specs`` on ``device`` (see the module's text)."""
    if handoff is not None and handoff not in _HANDOFFS:
        raise ValueError(f"handoff must be 'uint8' (the workers stop at 8-bit images and the device computes "
                         f"ToTensor/Normalize) or 'float' (the chain as written), got {handoff!r}")
    specs = list(specs)
    tail = None
    if handoff != "float" and specs:
        if specs[-1][0] == "ToTensor":
            specs, tail = specs[:-1], FloatTail()
        elif len(specs) >= 2 and specs[-2][0] == "ToTensor" and specs[-1][0] == "Normalize":
            args = specs[-1][1]
            specs, tail = specs[:-2], FloatTail(tuple(args["mean"]), tuple(args["std"]))
        if tail is not None:
            specs.append(("ToUint8", {"layout": [0.0]}))
    if handoff == "uint8" and tail is None and not (specs and specs[-1][0] == "ToUint8"):
        ends = f"the chain ends in {specs[-1][0]}" if specs else "the job has no C++ transform chain"
        raise ValueError(f"handoff='uint8': {ends}, and only a chain of hdmlp.transforms ending in ToTensor() or "
                         "ToTensor(), Normalize(mean, std) can stop at 8-bit images with the rest on the device "
                         "(RandomErasing works on the float tensor); leave handoff unset or 'float'")
    if pin_memory is None:
        pin_memory = device.type == "cuda" and bool(specs)
    return HandOff(specs=specs, tail=tail, spare_cores=1 if specs else 0, pin_memory=pin_memory)


def check_channels_last(channels_last: Any, specs: Sequence[tuple[str, dict]] = ()) -> bool:
    """``channels_last`` checked against the chain the workers run (an HWC output has no channel dim 1)."""
    if not isinstance(channels_last, bool):
        raise TypeError(f"channels_last must be a bool, got {channels_last!r}")
    if channels_last and specs and specs[-1][0] == "ToUint8" and specs[-1][1].get("layout") == [1.0]:
        raise ValueError("channels_last=True with a chain ending in ToUint8('HWC'): its [B, H, W, C] batches are "
                         "already channels-last in memory (images.permute(0, 3, 1, 2) is an NCHW view in "
                         "torch.channels_last); use ToUint8() (CHW) with channels_last=True, or the permute")
    return channels_last
