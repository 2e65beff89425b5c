"""Where a feeder's device work runs: the one interface that differs between devices.

A device with streams (CUDA: :mod:`hdmlp.device.cuda`) issues its copies and kernels on a side stream
and orders the training stream after them. :class:`Streams` itself is for devices without (the CPU):
``device="cpu"`` runs the same code path without copies. Tests inject their own to observe when host
memory is released.
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
