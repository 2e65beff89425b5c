"""CUDA's :class:`~hdmlp.device.streams.Streams`: a side stream, and events the training stream waits on.

Thread-safety: used by the one thread that iterates its feeder (and a decoder's own threads,
which issue on the same side stream).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import torch

from hdmlp.device.streams import Streams

__all__ = ["CudaStreams"]


class CudaStreams(Streams):
    """A side CUDA stream; the training stream (the current one) waits on its events."""

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._stream = torch.cuda.Stream(device)

    def side(self) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(self._stream)

    def record(self) -> Any:
        event = torch.cuda.Event()
        event.record(self._stream)
        return event

    def hand_over(self, event: Any, tensors: Iterable[torch.Tensor]) -> None:
        training = torch.cuda.current_stream(self._device)
        training.wait_event(event)
        for t in tensors:  # made on the side stream, used on the training one: not freed before it is done
            t.record_stream(training)

    def done(self, event: Any) -> bool:
        return event.query()

    def synchronize(self, event: Any) -> None:
        event.synchronize()
