"""Batches on a device: the copy from the batch memory, and the chain's float end, off the training stream.

:class:`DeviceFeeder` turns an iterator of host batches into device batches. It copies each
batch on a side stream one or more batches ahead (``ahead``), applies the layout
(``channels_last``) and the tail there (:class:`hdmlp.device.hand_off.FloatTail`), and records an
event; the training stream waits on that event (the host does not). The host batch is kept
referenced until its copy's event has completed, so hdmlp reuses its memory only after the copy
is done. Device tensors are new allocations, so a kept one stays valid. The device's
:class:`~hdmlp.device.streams.Streams` say where that work runs (:func:`streams_for`).

:func:`feed_pass` and :func:`feed_job_pass` feed a job's open pass (the job's public pass API);
the job's position follows the batches handed out, not those copied ahead.

Thread-safety: a feeder belongs to the thread iterating it; one per pass.
"""
from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from hdmlp.batches import Batch
from hdmlp.device.cuda import CudaStreams
from hdmlp.device.hand_off import FloatTail
from hdmlp.device.host_tensors import host_tensors
from hdmlp.device.streams import Streams

__all__ = ["DeviceFeeder", "InFlight", "check_ahead", "feed_job_pass", "feed_pass", "streams_for"]

MAX_AHEAD = 8
# The Streams of each device type that has them: a new device's Streams subclass is one module of this
# package plus its line here. Other devices issue their work in order on the training thread (Streams).
STREAMS_BY_TYPE: dict[str, Callable[[torch.device], Streams]] = {"cuda": CudaStreams}


def streams_for(device: torch.device) -> Streams:
    """The streams of ``device``'s type (:data:`STREAMS_BY_TYPE`), else the in-order no-ops of :class:`Streams`."""
    streams = STREAMS_BY_TYPE.get(device.type)
    return streams(device) if streams is not None else Streams()


def _device_tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, list):
        return [t for t in x if isinstance(t, torch.Tensor)]
    return []


@dataclasses.dataclass
class InFlight:
    """A batch a feeder copies (or decodes) to the device: done when ``event`` has completed."""

    item: tuple  # (samples, labels, extra) on the device
    event: Any
    host: tuple  # the host batch, kept until the copy is done


class DeviceFeeder:
    """Host batches ``(samples, labels, extra)`` in, the same on ``device`` out, ``ahead`` batches in flight.

    ``samples`` is a tensor (or a list of them, or of other objects, which pass as they are),
    ``labels`` a tensor or a list; ``extra`` passes through. ``on_hand_out(extra)`` is called just
    before each batch is yielded (the job's position follows the batches handed out, not those
    taken ahead). Closing the iterator (a ``break``) waits for the copies in flight, then drops
    the host batches, and closes ``batches``.
    """

    def __init__(self, batches: Iterator[tuple], device: torch.device, *, tail: FloatTail | None = None,
                 channels_last: bool = False, ahead: int = 2, on_hand_out: Callable[[Any], None] | None = None,
                 streams: Streams | None = None) -> None:
        self._batches = batches
        self._device = device
        self._tail = tail
        self._channels_last = channels_last
        self._ahead = check_ahead(ahead)
        self._on_hand_out = on_hand_out
        self._streams = streams if streams is not None else streams_for(device)
        self._constants: dict = {}
        # Batches handed over whose copies may still run: their host memory stays referenced.
        self.releasing: collections.deque[InFlight] = collections.deque()

    def _to_device(self, x: Any, images: bool) -> Any:
        if isinstance(x, list):
            return [self._to_device(t, False) for t in x]
        if not isinstance(x, torch.Tensor):
            return x
        out = x.to(self._device, non_blocking=True)
        if images and out.dim() == 4:
            if self._channels_last:  # on uint8 before the tail: a quarter of the bytes to move
                out = out.contiguous(memory_format=torch.channels_last)
            if self._tail is not None and out.dtype == torch.uint8:
                out = self._tail.apply(out, self._constants)
        return out

    def _resolve(self, batch: InFlight) -> None:
        """Completes ``batch.item`` and ``batch.event`` before it is handed over (a decoding feeder's
        batches are still being made when launched)."""

    def _settle(self, batch: InFlight) -> None:
        """Like :meth:`_resolve` for a batch left over when the pass ends; never raises."""

    def _launch(self, host: tuple) -> InFlight:
        samples, labels, extra = host
        with self._streams.side():
            item = (self._to_device(samples, True), self._to_device(labels, False), extra)
            event = self._streams.record()
        return InFlight(item, event, host)

    def __iter__(self) -> Iterator[tuple]:
        pending: collections.deque[InFlight] = collections.deque()
        source = iter(self._batches)
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) <= self._ahead:
                    host = next(source, None)
                    if host is None:
                        exhausted = True
                    else:
                        pending.append(self._launch(host))
                if not pending:
                    return
                batch = pending.popleft()
                self._resolve(batch)
                samples, labels, _ = batch.item
                self._streams.hand_over(batch.event, _device_tensors(samples) + _device_tensors(labels))
                self.releasing.append(batch)
                while self.releasing and self._streams.done(self.releasing[0].event):
                    self.releasing.popleft().host = ()
                if self._on_hand_out is not None:
                    self._on_hand_out(batch.item[2])
                item = batch.item
                batch.item = ()
                yield item
        finally:
            for batch in list(self.releasing) + list(pending):
                self._settle(batch)
                if batch.event is not None:
                    self._streams.synchronize(batch.event)  # never hand memory back while a copy reads it
            self.releasing.clear()
            pending.clear()
            close = getattr(source, "close", None)
            if close is not None:
                close()
            # Python 3.12 can keep a closed generator's last values (a host batch) until the generator
            # itself is freed: the feeder holds it no longer.
            self._batches = iter(())
            del source


def feed_pass(job: Any, opened: Any, first: int, host: Iterator[tuple[Any, Any]], device: torch.device,
              tail: FloatTail | None, channels_last: bool, ahead: int) -> Iterator[tuple[Any, Any, int]]:
    """``(samples, labels, index)`` on ``device`` of a job's open pass whose host tensors ``host`` yields
    (from its batch ``first`` on); the job's position follows the batches handed out."""
    def numbered() -> Iterator[tuple]:
        try:
            for index, (samples, labels) in enumerate(host, start=first):
                yield samples, labels, index
        finally:
            opened.close()

    feeder = DeviceFeeder(numbered(), device, tail=tail, channels_last=channels_last, ahead=ahead,
                          on_hand_out=lambda index: job.hand_out(opened.epoch, index + 1))
    batches = iter(feeder)
    try:
        yield from batches
    finally:
        batches.close()


def feed_job_pass(job: Any, opened: Any, first: int, device: torch.device, tail: FloatTail | None,
                  channels_last: bool, ahead: int) -> Iterator[Any]:
    """:meth:`hdmlp.Job.batches` on a device: :class:`hdmlp.batches.Batch` objects of device tensors."""
    ids_of: dict[int, list[int]] = {}

    def host() -> Iterator[tuple[Any, Any]]:
        for index, (ids, labels, samples) in enumerate(opened, start=first):
            ids_of[index] = ids
            yield host_tensors(samples, labels)

    for samples, labels, index in feed_pass(job, opened, first, host(), device, tail, channels_last, ahead):
        yield Batch(samples, labels, ids_of.pop(index), opened.epoch, index)


def check_ahead(ahead: Any) -> int:
    if isinstance(ahead, bool) or not isinstance(ahead, int) or not 0 <= ahead <= MAX_AHEAD:
        raise ValueError(f"ahead (the batches copied to the device ahead of the training loop) must be an int from "
                         f"0 to {MAX_AHEAD}, got {ahead!r}")
    return ahead
