"""Where a feeder's device work runs: the one interface that differs between devices.

A device with streams (CUDA: :class:`hdmlp.device.cuda.CudaStreams`) copies, decodes and computes
on a side stream and orders the training stream after it with events. This base is for devices
without streams (the CPU): everything is done when issued, so ``device="cpu"`` runs the same code
path without copies (the tail and the layout then run on the training thread). Tests inject their
own to observe when host memory is released.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["Streams"]


class Streams:
    """Where a feeder's device work runs, and how the training stream is ordered after it.

    This base is for devices without streams (the CPU): everything is done when issued.
    """

    def side(self) -> contextlib.AbstractContextManager:
        """The context in which the copy, layout and tail are issued."""
        return contextlib.nullcontext()

    def record(self) -> Any:
        """A marker of the work issued so far on the side stream."""
        return None

    def hand_over(self, event: Any, tensors: Iterable[torch.Tensor]) -> None:
        """Makes the training stream wait for ``event`` before it uses ``tensors``."""

    def done(self, event: Any) -> bool:
        """Whether the work before ``event`` has completed (without waiting)."""
        return True

    def synchronize(self, event: Any) -> None:
        """Waits on the host until the work before ``event`` has completed."""
