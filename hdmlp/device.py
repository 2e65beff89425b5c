"""Batches on a device: the copy from the batch memory, and the chain's float end, off the training stream.

``hdmlp.Job(..., device="cuda:0")``, ``HDMLPDataLoader(dataset, device=...)`` and
``job.batches(device=...)`` deliver device tensors. This module holds what that takes:

* :func:`plan_hand_off` decides what the staging workers write. A C++ chain that ends in
  ``ToTensor()`` (optionally followed by ``Normalize(mean, std)``) is cut there: the
  workers end it with ``ToUint8()`` (a quarter of the bytes to write, pin and copy), and
  a :class:`FloatTail` computes ``ToTensor`` and ``Normalize`` on the device, in float32
  as the C++ chain does (``(v / 255 - mean) / std``). ``handoff="float"`` keeps the
  chain as written. Any other chain (ending in ``ToUint8``, ``RandomErasing``, Python
  callables, no transforms) is delivered as it is, copied.
* :class:`DeviceFeeder` turns an iterator of host batches into device batches. It copies
  each batch on a side stream one or more batches ahead (``ahead``), applies the layout
  (``channels_last``) and the tail there, and records an event; the training stream
  waits on that event (the host does not). The host batch is kept referenced until its
  copy's event has completed, so hdmlp reuses its memory only after the copy is done.
  Device tensors are new allocations, so a kept one stays valid.
* :class:`Streams` is the one interface that differs between devices: on CUDA a side
  stream and events (:class:`CudaStreams`); on any other device no-ops, so ``device="cpu"``
  runs the same code path without copies (the tail and the layout then run on the
  training thread). Tests inject their own to observe when host memory is released.

Thread-safety: a feeder belongs to the thread iterating it; one per pass.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

try:
    import torch
except ImportError as e:
    raise ImportError("batches on a device (device=...) need PyTorch, which is not installed: pip install "
                      "'hdmlp[torch]' (or leave device unset)") from e

__all__ = ["CudaStreams", "DeviceFeeder", "FloatTail", "Streams", "plan_hand_off", "resolve_device"]

_HANDOFFS = ("uint8", "float")
MAX_AHEAD = 8


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


def streams_for(device: torch.device) -> Streams:
    return CudaStreams(device) if device.type == "cuda" else Streams()


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
    from hdmlp.batches import Batch
    from hdmlp.host_tensors import host_tensors
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


def check_channels_last(channels_last: Any, specs: Sequence[tuple[str, dict]] = ()) -> bool:
    """``channels_last`` checked against the chain the workers run (an HWC output has no channel dim 1)."""
    if not isinstance(channels_last, bool):
        raise TypeError(f"channels_last must be a bool, got {channels_last!r}")
    if channels_last and specs and specs[-1][0] == "ToUint8" and specs[-1][1].get("layout") == [1.0]:
        raise ValueError("channels_last=True with a chain ending in ToUint8('HWC'): its [B, H, W, C] batches are "
                         "already channels-last in memory (images.permute(0, 3, 1, 2) is an NCHW view in "
                         "torch.channels_last); use ToUint8() (CHW) with channels_last=True, or the permute")
    return channels_last
